// Inputs found by the fuzzers (fuzz/, tools/run_fuzz.sh), kept as tests.
#include "common.hpp"

TEST_CASE("fuzz: a NaN in a lane whose two-pass reference stays low gives all NaN", "[regression]") {
  // Found by fuzz_softmax: two_pass flushed the lane holding the NaN (its
  // exponent reference never moved) when rescaling the partial sums.
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (auto a : {smax::algorithm::two_pass, smax::algorithm::online, smax::algorithm::automatic}) {
      INFO("isa " << isa << " algorithm " << static_cast<int>(a));
      std::vector<double> xd = {std::numeric_limits<double>::quiet_NaN(), 31.0}, yd(2);
      smax::dynamic::softmax(xd.data(), yd.data(), 2, a);
      CHECK(std::isnan(yd[0]));
      CHECK(std::isnan(yd[1]));
      // Same shape in float, the NaN in different lanes and unroll slots.
      for (std::size_t pos : {0, 1, 5, 17, 40}) {
        std::vector<float> x(67, -0.0009765625f), y(67);
        x[50] = 30.0f;
        x[pos] = std::numeric_limits<float>::quiet_NaN();
        smax::dynamic::softmax(x.data(), y.data(), x.size(), a);
        for (float v : y) CHECK(std::isnan(v));
      }
    }
  }
}

TEST_CASE("fuzz: softmax_backward does not overflow when the result is representable", "[regression]") {
  // Found by fuzz_backward: y_i * (dy_i - dot) overflowed in dy_i - dot for
  // dy_i = -DBL_MAX although the result is ~2^-10 * DBL_MAX.
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    const double big = std::numeric_limits<double>::max();
    std::vector<double> y = {-0x1p-10, -0x1p-10, 0.5}, dy = {-0x1p-10, -big, -0x1p-10}, dx(3);
    smax::dynamic::softmax_backward(y.data(), dy.data(), dx.data(), 3);
    INFO("isa " << isa);
    for (double v : dx) CHECK(std::isfinite(v));
    const long double dot = static_cast<long double>(y[0]) * dy[0] + static_cast<long double>(y[1]) * dy[1] +
                            static_cast<long double>(y[2]) * dy[2];
    CHECK(std::fabs((dx[1] - y[1] * (dy[1] - dot)) / (y[1] * (dy[1] - dot))) < 1e-15);
  }
}

namespace {
// y: zeros, then four -denorm_min (a y given as input may be subnormal),
// then -0.18; dy: the largest finite value everywhere. dot ~ -0.18 max, so
// dy_i - dot overflows, and the subnormal y_i times dot is normal.
template <class T>
void check_subnormal_y_huge_dot() {
  const T big = std::numeric_limits<T>::max(), tiny = std::numeric_limits<T>::denorm_min();
  for (std::size_t zeros : {0, 3, 15, 16, 61}) {
    std::vector<T> y(zeros, T(0)), dy;
    for (int k = 0; k < 4; ++k) y.push_back(-tiny);
    y.push_back(T(-0.1796875));
    dy.assign(y.size(), big);
    std::vector<T> dx(y.size());
    smax::dynamic::softmax_backward(y.data(), dy.data(), dx.data(), y.size());
    long double dot = 0;
    for (std::size_t i = 0; i < y.size(); ++i) dot += static_cast<long double>(y[i]) * dy[i];
    INFO("zeros " << zeros);
    for (std::size_t i = 0; i < y.size(); ++i) {
      const long double ref = static_cast<long double>(y[i]) * (static_cast<long double>(dy[i]) - dot);
      INFO("i " << i << " dx " << dx[i] << " ref " << static_cast<double>(ref));
      if (ref == 0)
        CHECK(dx[i] == T(0));
      else
        CHECK(std::fabs((dx[i] - ref) / ref) < 4 * std::numeric_limits<T>::epsilon());
    }
  }
}
}  // namespace

TEST_CASE("fuzz: softmax_backward keeps a subnormal y's product with a huge dot", "[regression]") {
  // Found by fuzz_backward (double, AVX2): where dy_i - dot overflowed, the
  // two-product form dropped y_i dot for |y_i| below the smallest normal
  // number, although dot ~ -0.18 DBL_MAX made it 2^-53: dx_i was y_i dy_i.
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO("isa " << isa);
    check_subnormal_y_huge_dot<float>();
    check_subnormal_y_huge_dot<double>();
  }
}

TEST_CASE("fuzz: stablemax_backward stays accurate for x and dy near the largest double", "[regression]") {
  // Found by fuzz_variants: with s(m) near DBL_MAX, 1 / S was subnormal and
  // lost its bits, and sum dy r overflowed for dy near -DBL_MAX.
  const double big = std::numeric_limits<double>::max();
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    const std::vector<double> x = {big, -24.9, 3.0, big / 3, -1e200};
    const std::vector<double> dy = {-big, 1.5, -big, 2.0, big / 2};
    std::vector<double> dx(x.size());
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), x.size());
    // Reference in long double: dx_k = s'(x_k) / S (dy_k - sum dy y).
    using ld = long double;
    ld S = 0, D = 0;
    std::vector<ld> s(x.size()), d(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      s[i] = x[i] >= 0 ? ld(x[i]) + 1 : 1 / (1 - ld(x[i]));
      S += s[i];
    }
    for (std::size_t i = 0; i < x.size(); ++i) D += ld(dy[i]) * (s[i] / S);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const ld deriv = (x[i] >= 0 ? 1 : s[i] * s[i]) / S;
      const ld ref = deriv * (ld(dy[i]) - D);
      const ld scale = deriv * (std::fabs(ld(dy[i])) + std::fabs(D));
      INFO("isa " << isa << " i " << i << " dx " << dx[i] << " ref " << double(ref));
      CHECK(std::isfinite(dx[i]));
      CHECK(std::fabs(dx[i] - ref) <= 1e-14L * scale + 1e-300L);
    }
  }
}

TEST_CASE("fuzz: stablemax_backward gives all NaN for a NaN in dy, even beside +inf in x", "[regression]") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    std::vector<float> x = {1.0f, inf, -3.0f}, dy = {0.5f, 1.0f, nan}, dx(3);
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), 3);
    for (float v : dx) CHECK(std::isnan(v));
  }
}

TEST_CASE("fuzz: sparse backward passes do not overflow in the support sums", "[regression]") {
  // Found by fuzz_sparse: four dy = -DBL_MAX on the support overflowed the
  // double sum of dy, making every dx NaN.
  const double big = std::numeric_limits<double>::max();
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    const std::vector<double> y = {0.25, 0.25, 0.25, 0.25, 0.0};
    const std::vector<double> dy = {-big, -big, -big, -big, 1.0};
    std::vector<double> dx(5);
    smax::dynamic::sparsemax_backward(y.data(), dy.data(), dx.data(), 5);
    for (std::size_t i = 0; i < 4; ++i) CHECK(dx[i] == 0.0);  // dy_i - mean = 0 exactly
    CHECK(dx[4] == 0.0);
    smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), 5, 1.25);
    for (std::size_t i = 0; i < 4; ++i) CHECK(dx[i] == 0.0);
    CHECK(dx[4] == 0.0);
  }
}

TEST_CASE("fuzz: alpha-entmax keeps a lone support entry at exactly 1 for a max near FLT_MAX", "[regression]") {
  // Found by fuzz_sparse: the threshold's low part was rounded to float, so
  // with m = FLT_MAX and alpha = 1.1 the power (p = 10) gave 1 + 2^-20.
  const float big = std::numeric_limits<float>::max();
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    const std::vector<float> x = {big, -3.9f, 6.0f, -9.6f, -19.0f, -big};
    std::vector<float> y(x.size());
    for (float alpha : {1.1f, 1.25f, 3.0f}) {
      smax::dynamic::entmax_bisect(x.data(), y.data(), x.size(), alpha);
      INFO("isa " << isa << " alpha " << alpha << " y0 " << y[0]);
      CHECK(std::fabs(y[0] - 1.0f) <= 2 * std::numeric_limits<float>::epsilon());
      for (std::size_t i = 1; i < x.size(); ++i) CHECK(y[i] == 0.0f);
    }
  }
}

TEST_CASE("fuzz: entmax_backward with zeros in y and a general alpha is defined", "[regression]") {
  // Found by fuzz_sparse (UBSan): exp(e log y) converted -inf to an integer
  // inside xsimd for y = 0 lanes. Checked in the sanitizer stage; here the
  // values: zeros stay zeros, and y = 1 gives g = 1.
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    const std::vector<double> y = {0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    const std::vector<double> dy = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    std::vector<double> dx(y.size());
    for (double alpha : {1.25, 3.0, 100.0}) {
      smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), y.size(), alpha);
      for (double v : dx) CHECK(v == 0.0);  // one support entry: dy_1 - dy_1
    }
  }
}

TEST_CASE("fuzz: log_softmax never returns a positive log-probability", "[regression]") {
  // Found by fuzz_softmax: x = {2^-149} gave y = 2^-149 (the log-sum rounded
  // a hair below 0).
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (float v : {0x1p-149f, -0x1p-149f, 0x1p-126f, 1e-30f, 3.0f, -7.5f, 1e30f}) {
      for (std::size_t n : {1, 2, 17}) {
        std::vector<float> x(n, v), y(n);
        smax::dynamic::log_softmax(x.data(), y.data(), n);
        INFO("isa " << isa << " x " << v << " n " << n);
        for (float r : y) CHECK(r <= 0.0f);
        if (n == 1) CHECK(std::fabs(y[0]) <= 1e-6f);  // log 1, within the contract
      }
    }
  }
}

TEST_CASE("fuzz: ssmax of one finite element is exactly [1]", "[regression]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (float v : {0x1.f5dp+3f, -3.0f, 0.0f, 1e30f}) {
      float y = -1;
      smax::dynamic::ssmax(&v, &y, 1, 0.43f, 0.7f);
      INFO("isa " << isa << " x " << v);
      CHECK(y == 1.0f);
      double vd = v, yd = -1;
      smax::dynamic::ssmax(&vd, &yd, 1, 0.43, 0.7);
      CHECK(yd == 1.0);
    }
  }
}

TEST_CASE("fuzz: alpha-entmax is accurate with many ties just above the threshold", "[regression]") {
  // Found by fuzz_sparse: alpha = 4 (p = 1/3), 43 logits tied 0.135 below the
  // maximum, so the threshold sits ~1e-8 below them and each of their
  // outputs depends on d_i - t, a tiny difference of numbers near |t|. With
  // t rounded to double the outputs summed to 1 - 8.5e-11; the threshold now
  // carries its sub-ulp Newton correction.
  std::vector<double> x(46, 0x1.d1dp+4);
  x[9] = 0x1.d3fcp+4;
  x[10] = -0x1p-10;
  x[11] = -0x1.18p-3;
  x[30] = 0x1.d174p+4;
  const long double m = 0x1.d3fcp+4;
  for (double alpha : {4.0, 3.0, 2.5}) {
    // Reference in long double: bisection on t relative to m (d_i exact).
    const long double p = 1.0L / (alpha - 1), am1 = alpha - 1;
    long double lo = -p, hi = 0;
    for (int it = 0; it < 200; ++it) {
      const long double mid = (lo + hi) / 2;
      long double s = 0;
      for (double v : x) s += v - m > mid ? std::pow(am1 * ((v - m) - mid), p) : 0;
      (s >= 1 ? lo : hi) = mid;
    }
    std::vector<long double> ref(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      ref[i] = x[i] - m > lo ? std::pow(am1 * ((x[i] - m) - lo), p) : 0;
    for (const auto& isa : smax_test::isas()) {
      smax_test::use_isa guard(isa);
      for (int n_iter : {0, 1, 50}) {
        std::vector<double> y(x.size());
        smax::dynamic::entmax_bisect(x.data(), y.data(), x.size(), alpha, n_iter);
        long double sum = 0, worst = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
          sum += y[i];
          worst = std::max(worst, ref[i] == 0 ? std::fabs(static_cast<long double>(y[i]))
                                              : std::fabs((y[i] - ref[i]) / ref[i]));
        }
        INFO("isa " << isa << " alpha " << alpha << " n_iter " << n_iter << " sum - 1 "
                    << static_cast<double>(sum - 1) << " worst relative error " << static_cast<double>(worst));
        CHECK(std::fabs(sum - 1) <= 1e-14L);
        CHECK(worst <= 1e-13L);
      }
    }
  }
}

namespace {
// log_stablemax in long double: log s(x_i) - log sum_j s(x_j).
template <class T>
std::vector<long double> ref_log_stablemax(const std::vector<T>& x, long double& log_sum) {
  const auto log_s = [](long double v) { return v >= 0 ? std::log1p(v) : -std::log1p(-v); };
  long double sum = 0;
  for (T v : x) sum += v >= 0 ? v + 1.0L : 1.0L / (1.0L - v);
  log_sum = std::log(sum);
  std::vector<long double> r;
  for (T v : x) r.push_back(log_s(v) - log_sum);
  return r;
}
}  // namespace

TEST_CASE("fuzz: log_stablemax stays within 2 ulp where log s(x_i) and log sum nearly cancel", "[regression]") {
  // Found by fuzz_variants: log S was rounded on its own, so where one entry
  // dominates the sum, y_i = log s(x_i) - log S kept the rounding of S: 13
  // ulp at x = [-2^-10] (n = 1: the answer is exactly 0).
  const auto check = [](const auto& x) {
    using T = typename std::decay_t<decltype(x)>::value_type;
    long double log_sum;
    const std::vector<long double> ref = ref_log_stablemax(x, log_sum);
    std::vector<T> y(x.size());
    smax::dynamic::log_stablemax(x.data(), y.data(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const long double log_s = x[i] >= 0 ? std::log1p(static_cast<long double>(x[i])) : -std::log1p(-static_cast<long double>(x[i]));
      const long double scale = std::max(std::fabs(log_s), std::fabs(log_sum));
      const long double ulp = scale * std::numeric_limits<T>::epsilon();
      INFO("n " << x.size() << " i " << i << " x " << static_cast<double>(x[i]) << " y " << static_cast<double>(y[i])
                << " ref " << static_cast<double>(ref[i]));
      CHECK(std::fabs(y[i] - ref[i]) <= 2 * ulp);
    }
    return y;
  };
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO("isa " << isa);
    CHECK(check(std::vector<float>{-0x1p-10f})[0] == 0.0f);
    CHECK(check(std::vector<double>{-0x1p-10})[0] == 0.0);
    CHECK(check(std::vector<float>{1e35f})[0] == 0.0f);  // the robust path (sum beyond the fast range)
    check(std::vector<double>{std::numeric_limits<double>::denorm_min(), -25.78});
    check(std::vector<float>{std::numeric_limits<float>::denorm_min(), -25.78f});
    // Ties at the maximum, a dominated tail, and lengths that leave padding.
    for (std::size_t n : {2, 3, 17, 100, 1001}) {
      std::vector<float> x(n, -1e7f);
      x[0] = 3.0f;
      x[n / 2] = 3.0f;
      check(x);
      x[n / 2] = -1e7f;
      check(x);
      std::vector<double> xd(x.begin(), x.end());
      xd[n - 1] = 1e300;  // the robust path, dominated
      check(xd);
    }
    // Not dominated: the usual path, for comparison.
    check(std::vector<float>{0.5f, 0.25f, -1.0f, 2.0f});
  }
}

TEST_CASE("fuzz: entmax_backward does not overflow in dy - q when the result is representable", "[regression]") {
  // Found by fuzz_sparse: dx = g (dy - q) overflowed in dy - q for
  // dy = -FLT_MAX and q = 0.05 FLT_MAX, although g (dy - q) ~ -0.12 FLT_MAX.
  const float big = std::numeric_limits<float>::max();
  std::vector<float> y(20, 1.0f / 18), dy(20, 0x1.fdfcp+4f), dx(20);
  y[0] = y[1] = 0;
  dy[5] = -big;
  dy[6] = big;
  dy[7] = 0x1.fefefep+127f;
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (float alpha : {1.25f, 1.5f, 3.0f}) {
      smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), y.size(), alpha);
      long double G = 0, GD = 0, GDabs = 0;
      std::vector<long double> g(y.size());
      for (std::size_t i = 0; i < y.size(); ++i) {
        g[i] = y[i] > 0 ? std::pow(static_cast<long double>(y[i]), 2 - static_cast<long double>(alpha)) : 0;
        G += g[i];
        GD += g[i] * dy[i];
        GDabs += std::fabs(g[i] * dy[i]);
      }
      for (std::size_t i = 0; i < y.size(); ++i) {
        const long double ref = g[i] * (dy[i] - GD / G);
        const long double scale = g[i] * (std::fabs(static_cast<long double>(dy[i])) + GDabs / G);
        if (!(scale < std::numeric_limits<float>::max() / 4)) continue;  // alpha = 3: g = 18, overflow is right
        INFO("isa " << isa << " alpha " << alpha << " i " << i << " dx " << dx[i] << " ref " << static_cast<double>(ref));
        CHECK(std::isfinite(dx[i]));
        CHECK(std::fabs(dx[i] - ref) <= 64 * std::numeric_limits<float>::epsilon() * scale);
      }
    }
  }
}

TEST_CASE("fuzz: stablemax_backward keeps its precision beside entries near the largest double", "[regression]") {
  // Found by fuzz_variants: with max x = DBL_MAX the ratio s(x) / s(max) of
  // x = -1.9e6 is subnormal, and dx there lost three digits.
  const double big = std::numeric_limits<double>::max();
  const std::vector<double> x = {0x1.5ba4p+4, 0x1.e22p+3, -0x1.d298p+20, big, big};
  const std::vector<double> dy = {0x1.0624dd2f1a9fcp-10, -0x1.2ecp+0, -big, 0x1.d998p+4, -0x1.976p+3};
  // Reference in long double (its range holds the sum of s).
  const auto s = [](long double v) { return v >= 0 ? v + 1 : 1 / (1 - v); };
  long double S = 0, D = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    S += s(x[i]);
    D += dy[i] * s(x[i]);
  }
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    std::vector<double> dx(x.size());
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const long double ds = x[i] >= 0 ? 1.0L : s(x[i]) * s(x[i]);
      const long double ref = ds / S * (dy[i] - D / S);
      INFO("isa " << isa << " i " << i << " dx " << dx[i] << " ref " << static_cast<double>(ref));
      CHECK(std::fabs(dx[i] - ref) <= 1e-14L * std::fabs(ref) + 1e-300L);
    }
  }
}

TEST_CASE("fuzz: softpick_backward does not overflow in dy - dot when the result is representable", "[regression]") {
  // Found by fuzz_variants: x = DBL_MAX on 15 entries (each y = 1/15), dy =
  // DBL_MAX on 10 of them and -DBL_MAX on another: e (dy - dot) overflowed
  // in dy - dot, although the result is -0.107 DBL_MAX.
  const double big = std::numeric_limits<double>::max();
  std::vector<double> x(17, big), dy(17, big);
  x[2] = 0x1.a66p+2;
  x[3] = -std::numeric_limits<double>::infinity();
  dy[10] = 0x1.c98p+2;
  dy[11] = -0x1.50e8p+3;
  dy[12] = -0x1.7fbp+3;
  dy[13] = 0x1.33b8c91a06e98p+481;
  dy[14] = -0x1.94a4p+4;
  dy[15] = -big;
  dy[16] = 0x1.ffa4p+4;
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    std::vector<double> y(x.size()), dx(x.size());
    smax::dynamic::softpick(x.data(), y.data(), x.size(), 0.0);
    smax::dynamic::softpick_backward(x.data(), y.data(), dy.data(), dx.data(), x.size(), 0.0);
    long double dot = 0;
    for (std::size_t i = 0; i < x.size(); ++i) dot += static_cast<long double>(dy[i]) * y[i];
    INFO("isa " << isa << " dx[15] " << dx[15]);
    // x = DBL_MAX: e^(x - M) / D = 1 / 15 (every a_j of the others is 0 next to them).
    const long double ref = (dy[15] - dot) / 15;
    CHECK(std::isfinite(dx[15]));
    CHECK(std::fabs(dx[15] - ref) <= 1e-14L * std::fabs(ref));
  }
}

TEST_CASE("fuzz: backward passes stay finite when every dy is the largest double", "[regression]") {
  // Found by fuzz_variants and fuzz_sparse (seeds 2, 3): the weighted mean of
  // dy (all -DBL_MAX) rounded one ulp past -DBL_MAX to -inf, and every dx
  // became +-inf although dy - mean is 0. The means are now clamped to the
  // finite range (they lie between the smallest and the largest dy).
  const double big = std::numeric_limits<double>::max();
  const auto s = [](long double v) { return v >= 0 ? v + 1 : 1 / (1 - v); };
  const std::vector<std::vector<double>> xs = {
      {0x1.3bb1697742783p-659, -0x1.059cp+4, -big, -0x1.999cp+4, 0x1.964p+2},
      {0x1.212p+17, -0x1.b1cp+18, -big, -big, -big, -big, -big, -big, -big}};
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (const auto& x : xs) {
      const std::vector<double> dy(x.size(), -big);
      std::vector<double> dx(x.size());
      smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), x.size());
      long double S = 0;
      for (double v : x) S += s(v);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const long double ds = x[i] >= 0 ? 1.0L : s(x[i]) * s(x[i]);
        const long double scale = ds / S * 2 * big;  // the reference is 0: dy_i - mean = 0
        INFO("isa " << isa << " n " << x.size() << " i " << i << " dx " << dx[i]);
        CHECK(std::isfinite(dx[i]));
        CHECK(std::fabs(static_cast<long double>(dx[i])) <= 64 * std::numeric_limits<double>::epsilon() * scale);
      }
    }
    // entmax / sparsemax backward: y uniform on 35 entries, dy all DBL_MAX:
    // the reference is 0; the mean's rounding leaves an ulp or two of
    // DBL_MAX (times g <= 1), within the bound, but never an infinity.
    const std::vector<double> y(35, 1.0 / 35), dy(35, big);
    std::vector<double> dx(35);
    const double tol = 64 * std::numeric_limits<double>::epsilon() * 2 * big;
    for (double alpha : {1.25, 1.5, 2.0}) {
      smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), y.size(), alpha);
      for (double v : dx) CHECK(std::fabs(v) <= tol);
    }
    smax::dynamic::sparsemax_backward(y.data(), dy.data(), dx.data(), y.size());
    for (double v : dx) CHECK(std::fabs(v) <= tol);
  }
}

TEST_CASE("review: a long row whose last block is shorter than the output's misalignment", "[regression][batched]") {
  // The blocked long-row path streamed each block's output; a last block of
  // 1 element at a y that is not vector-aligned made the aligned head longer
  // than the block, and the streaming loop ran with n - head wrapped around
  // (out-of-bounds writes). n = 2^22 + 1 floats (16 MiB of output: streamed).
  const std::size_t n = (std::size_t(1) << 22) + 1;
  const auto x = smax_test::normal<float>(n, 3.0, 7);
  std::vector<float> buf(n + 64, -5.0f), ref(n);
  smax::dynamic::softmax(x.data(), ref.data(), n);
  for (std::size_t off : {1, 3, 15}) {
    std::fill(buf.begin(), buf.end(), -5.0f);
    float* y = buf.data() + off;
    smax::dynamic::softmax(smax::matrix_view<const float>(x.data(), 1, n), smax::matrix_view<float>(y, 1, n));
    INFO("offset " << off);
    CHECK(smax_test::max_rel_err(std::vector<float>(y, y + n), std::vector<long double>(ref.begin(), ref.end())) < 1e-6);
    for (std::size_t i = 0; i < off; ++i) CHECK(buf[i] == -5.0f);
    for (std::size_t i = off + n; i < buf.size(); ++i) CHECK(buf[i] == -5.0f);
  }
}

TEST_CASE("review: the threshold's correction never moves it across an entry", "[regression]") {
  // For p < 1 F' is unbounded where an entry joins the support: a Newton
  // correction taken there lifted the threshold onto 20 tied entries
  // (alpha = 6, x = [5, 20 x 4.81]): they got 0 and the sum was 0.99. The
  // true threshold lies within an ulp of the ties there (their outputs,
  // 5.1e-4, come from x - tau ~ 7e-18). The correction is refused, and the
  // part of the threshold below its ulp is found by bisection instead (it
  // had been left at 0: outputs 6.7e-4, sum 1.003). Against a long-double
  // solve of the same equation.
  std::vector<double> x(21, 4.81);
  x[0] = 5.0;
  // The reference: tau in long double by bisection on sum (am1 (x - tau))_+^p = 1,
  // with tau's offset from 4.81 carried apart (x - tau is ~7e-18).
  const long double am1 = 5.0L, p = 1.0L / am1;
  const long double big = static_cast<long double>(x[0]) - static_cast<long double>(x[1]);  // exact
  const auto F = [&](long double delta) {  // tau = x[1] - delta
    return std::pow(am1 * (big + delta), p) + 20 * (delta > 0 ? std::pow(am1 * delta, p) : 0.0L) - 1;
  };
  long double lo = 0, hi = 1e-10L;  // F(0) < 0 < F(1e-10)
  for (int i = 0; i < 200; ++i) {
    const long double mid = 0.5L * (lo + hi);
    (F(mid) < 0 ? lo : hi) = mid;
  }
  const long double delta = 0.5L * (lo + hi);
  const long double y0 = std::pow(am1 * (big + delta), p), y1 = std::pow(am1 * delta, p);
  std::vector<double> y(x.size());
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    smax::dynamic::entmax_bisect(x.data(), y.data(), x.size(), 6.0);
    long double sum = 0;
    for (double v : y) sum += v;
    INFO("isa " << isa << " y[1] " << y[1] << " reference " << static_cast<double>(y1) << " sum - 1 "
                << static_cast<double>(sum - 1));
    CHECK(std::fabs(y[0] - y0) <= 1e-12L * y0);
    for (std::size_t i = 1; i < x.size(); ++i) CHECK(std::fabs(y[i] - y1) <= 1e-12L * y1);  // measured 6e-15
    CHECK(std::fabs(sum - 1) <= 1e-12L);
    // 200 ties: the sum was 1.12 with the sub-ulp part left at 0.
    std::vector<double> x2(201, 4.81), y2(201);
    x2[0] = 5.0;
    smax::dynamic::entmax_bisect(x2.data(), y2.data(), x2.size(), 6.0);
    long double sum2 = 0;
    for (double v : y2) sum2 += v;
    CHECK(std::fabs(sum2 - 1) <= 1e-12L);  // measured 4.6e-14
  }
}

TEST_CASE("fuzz: entmax_bisect's sub-ulp threshold part settles beyond one Newton step", "[regression]") {
  // Found by fuzz_sparse (alpha = 4, double): 28 logits tied 2.6e-13 above
  // the threshold. One Newton step for the part of the threshold below its
  // ulp moves u = x - t of the ties by 3.7e-5 relative, so its second-order
  // error (1.2e-22) put the ties 1.6e-10 off and the sum 4e-13 off (the fuzz
  // bound: 1.1e-13 at n = 50). Measured after the fix: sum within 2e-16.
  const double t = 0x1.919p+3, inf = std::numeric_limits<double>::infinity();
  std::vector<double> x(50, -inf);
  for (std::size_t i = 0; i < 30; ++i) x[i] = t;
  x[16] = 0x1.719p+3;
  x[19] = 0x1.91bp+3;
  x[30] = 0x1.967p+3;
  x[35] = x[36] = x[45] = 0x1.6968p+3;
  x[37] = x[46] = 0x1.6f1p+3;
  x[41] = -0x1.a878p+4;
  // Reference: tau = t - delta with delta solved in long double apart from t
  // (sum over the ties, x[19] and x[30] of (3 (x - tau))^(1/3) = 1).
  const auto F = [&](long double delta) {
    long double s = 0;
    for (double v : x)
      if (v >= t) s += std::pow(3 * ((static_cast<long double>(v) - t) + delta), 1.0L / 3);
    return s - 1;
  };
  long double lo = 0, hi = 1e-9L;  // F(0) < 0 < F(1e-9)
  REQUIRE(F(lo) < 0);
  REQUIRE(F(hi) > 0);
  for (int i = 0; i < 200; ++i) {
    const long double mid = 0.5L * (lo + hi);
    (F(mid) < 0 ? lo : hi) = mid;
  }
  const long double y_tie = std::pow(3 * (0.5L * (lo + hi)), 1.0L / 3);
  std::vector<double> y(x.size());
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    smax::dynamic::entmax_bisect(x.data(), y.data(), x.size(), 4.0, 100);
    long double sum = 0;
    for (double v : y) sum += v;
    INFO("isa " << isa << " y[0] " << y[0] << " sum - 1 " << static_cast<double>(sum - 1));
    CHECK(std::fabs(sum - 1) <= 1e-14L);
    CHECK(std::fabs(y[0] - y_tie) <= 1e-12L * y_tie);
  }
}

TEST_CASE("review: entmax_backward keeps inf dy where y is +inf", "[regression]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    const double inf = std::numeric_limits<double>::infinity();
    const std::vector<double> y = {0, inf, 0.3};
    for (double d : {inf, -inf}) {
      const std::vector<double> dy = {0, d, 0.5};
      std::vector<double> dx(3);
      smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), 3, 1.5);
      INFO("isa " << isa << " dy " << d << " dx1 " << dx[1]);
      CHECK(dx[1] == d);
    }
  }
}

TEST_CASE("review: stablemax_backward does not underflow for tiny sums (double fast path)", "[regression]") {
  // x = {-2^540, -2^540}: S = 2^-539, in the fast path's range; h s(x)^2
  // underflowed before the multiplication by 1 / S.
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    const std::vector<double> x = {-0x1p540, -0x1p540}, dy = {1.0, -1.0};
    std::vector<double> dx(2);
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), 2);
    // s'(x) / S = s(x)^2 / (2 s(x)) = s(x) / 2 = 2^-541; mean = 0.
    INFO("isa " << isa << " dx " << dx[0] << " " << dx[1]);
    CHECK(std::fabs(dx[0] - 0x1p-541) <= 1e-15 * 0x1p-541);
    CHECK(std::fabs(dx[1] + 0x1p-541) <= 1e-15 * 0x1p-541);
  }
}

TEST_CASE("fuzz: softpick_backward in float keeps e dot where e alone underflows", "[regression]") {
  // Found by fuzz_variants (seed 5): x - M = -93.7, so e^(x - M) / D
  // underflows float while e * dot (dot ~ 1e35, from dy = +-FLT_MAX) is
  // -7.9e-4: dx was 0.
  const float big = std::numeric_limits<float>::max();
  const std::vector<float> x = {-0x1p-149f, 0x1.0624dep-10f, -0x1.02dp+3f, -0x1.585p+3f, 0x1.d9d8p+4f, 0x1.d9d8p+4f,
                                0x1.db18p+4f, -0x1.28p+4f, 0x1.effp+3f, -0x1p+6f, -0x1p-10f, -0x1.42p-3f,
                                -0x1.3ff3b6p-3f, -0x1p-10f, -0x1p-10f, -0x1p-10f, -0x1p-10f};
  const std::vector<float> dy = {-0x1p-10f, 0x1.d9d8p+4f, 0x1.da3cp+4f, 0x1.db9cp+4f, -big, -0x1.ab505cp+103f,
                                 -0x1.ap-4f, 0x1.f368p+3f, -0.0f, 0x1.dc5p+3f, -0x1.0fap+1f, -0x1.228p+0f,
                                 0x1.fbp+4f, big, 0x1.4a9p+4f, -0x1.0cp+2f, -0x1.4b4p+4f};
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    std::vector<float> y(x.size()), dx(x.size());
    smax::dynamic::softpick(x.data(), y.data(), x.size(), 0.0f);
    smax::dynamic::softpick_backward(x.data(), y.data(), dy.data(), dx.data(), x.size(), 0.0f);
    // dx_9 = e_9 (0 - sign(x_9) dot) = e_9 dot, e_9 = e^(x_9 - M) / D.
    long double M = 0, D = 0, dot = 0;
    for (float v : x) M = std::max<long double>(M, v);
    for (std::size_t i = 0; i < x.size(); ++i) {
      D += std::fabs(std::exp(static_cast<long double>(x[i]) - M) - std::exp(-M));
      dot += static_cast<long double>(dy[i]) * y[i];
    }
    const long double ref = std::exp(static_cast<long double>(x[9]) - M) / D * dot;
    INFO("isa " << isa << " dx9 " << dx[9] << " ref " << static_cast<double>(ref));
    CHECK(std::fabs(dx[9] - ref) <= 1e-5L * std::fabs(ref));
  }
}

TEST_CASE("fuzz: log_softmax_backward's clamped exp stays 0 under a huge folded sum", "[regression]") {
  // Found by fuzz_backward (CI's fixed seed, SSE2, double): e^y sum(dy) with
  // y = -DBL_MAX and sum(dy) = -6.1e250 came out 1.5e-76 (the clamp of the
  // exp's argument did not count the folded scale's exponent); it is 0.
  const double y[2] = {-std::numeric_limits<double>::max(), -1.2216796875};
  const double dy[2] = {0.0, -6.088940654547858e+250};
  const float yf[2] = {-std::numeric_limits<float>::max(), -1.2216796875f};
  const float dyf[2] = {0.0f, -3e37f};
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    double dx[2];
    smax::dynamic::log_softmax_backward(y, dy, dx, 2);
    CHECK(dx[0] == 0.0);
    CHECK(std::fabs(dx[1] - (dy[1] - std::exp(y[1]) * dy[1])) <= 1e-14 * std::fabs(dy[1]));
    float dxf[2];
    smax::dynamic::log_softmax_backward(yf, dyf, dxf, 2);
    CHECK(dxf[0] == 0.0f);
  }
}

TEST_CASE("fuzz: entmax15 stays exact on logits near 7e5 that differ by 1e-3", "[regression]") {
  // Found by fuzz_sparse (2026-12-05): the check's long-double reference
  // summed z and z^2 without subtracting the max and was 2.6e-8 off; the
  // kernel was right. Its output against the exact value (rational
  // arithmetic, rounded to 26 digits), on every ISA.
  const std::vector<double> x = {
      0x1.5dap+19, 0x1.5da000083126fp+19, 0x1.5da00010624dep+19, 0x1.5da000189374dp+19, 0x1.5da00020c49bcp+19,
      0x1.5da00028f5c2bp+19, 0x1.5da0003126e9ap+19, 0x1.5da0003958109p+19, 0x1.5da0004189378p+19, 0x1.5da00049ba5e7p+19,
      0x1.5da00051eb856p+19, 0x1.5da0005a1cac5p+19, 0x1.5da000624dd34p+19, 0x1.5da0006a7efa3p+19, 0x1.5da00072b0212p+19,
      0x1.5da0007ae1481p+19, 0x1.5da00083126fp+19, 0x1.5da0008b4395fp+19, 0x1.5da0009374bcep+19, 0x1.5da0009ba5e3dp+19,
      0x1.5da000a3d70acp+19, 0x1.5da000ac0831bp+19, 0x1.5da000b43958ap+19, 0x1.5da000bc6a7f9p+19, 0x1.5da000c49ba68p+19,
      0x1.5da000cccccd7p+19, 0x1.5da000d4fdf46p+19, 0x1.5da000dd2f1b5p+19, -0x0.0000000000001p-1022};
  const double exact0 = 0.03319285811374911167348679;
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO("isa " << isa);
    std::vector<double> y(x.size());
    smax::dynamic::entmax15(x.data(), y.data(), x.size());
    CHECK(std::fabs(y[0] - exact0) <= 1e-13 * exact0);
    CHECK(y.back() == 0.0);
  }
}

TEST_CASE("review: sa_softmax normalized gives +0 for -0 entries out of cache, as in cache", "[regression][seeds][large]") {
  // Found by a review of the write pass's integer guard: with no negative
  // logit (lo = 0), c = x h - lo h is -0 at x = -0, whose bit pattern
  // wrapped the guard's room, and the two-pass form wrote -0 where the
  // in-cache form writes +0. 3M + 7 floats: two passes on every ISA that
  // takes them (not SSE2; there the same call is the in-cache reference).
  const std::size_t n = (std::size_t(3) << 20) + 7;
  if (n > smax_test::max_n()) {
    WARN("SKIPPED: n = " << n << " is above SMAX_TEST_MAX_N = " << smax_test::max_n());
    return;
  }
  std::vector<float> x = smax_test::normal<float>(n, 3.0, 41), y(n);
  for (auto& v : x) v = std::fabs(v);
  const std::size_t zeros[] = {0, 7, 1000, n / 2, n - 1};
  for (std::size_t i : zeros) x[i] = -0.0f;
  x[5] = 0.0f;
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO("isa " << isa);
    smax::dynamic::sa_softmax(x.data(), y.data(), n, true);
    for (std::size_t i : zeros) CHECK((y[i] == 0.0f && !std::signbit(y[i])));
    CHECK((y[5] == 0.0f && !std::signbit(y[5])));
    std::vector<float> small(x.begin(), x.begin() + 4096), ys(4096);  // in cache
    smax::dynamic::sa_softmax(small.data(), ys.data(), small.size(), true);
    CHECK((ys[0] == 0.0f && !std::signbit(ys[0])));
    CHECK((ys[7] == 0.0f && !std::signbit(ys[7])));
  }
}

namespace {
// entmax_backward on a row whose dy holds a nonzero |dy| below 2^-60 (the
// scaled form) and a huge dy off the support: the scale comes from the
// support alone (fuzz_sparse, CI on 551b9ff, 2026-12-07: a support of one
// entry with dy = 12.6 beside dy = -FLT_MAX off it gave dx = 12.6, not 0).
template <class T>
void entmax_backward_huge_dy_off_support() {
  const T huge = -std::numeric_limits<T>::max(), tiny = std::ldexp(T(1), sizeof(T) == 4 ? -100 : -600);
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (T alpha : {T(1.5), T(2)}) {
      INFO("isa " << isa << " alpha " << alpha << (sizeof(T) == 4 ? " float" : " double"));
      // One support entry: dx = g (dy - dy) = 0 everywhere.
      std::vector<T> y(33, T(0)), dy(33, T(-1) / 1024), dx(33, T(-7));
      y[26] = 1;
      dy[26] = T(12.6);
      dy[21] = -tiny;
      dy[30] = huge;
      smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), y.size(), alpha);
      for (T v : dx) CHECK(v == 0);
      // Two equal entries: dx = g (dy - mean) = +-7.8 g.
      y[26] = y[3] = T(0.5);
      dy[3] = T(-3);
      smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), y.size(), alpha);
      const T g = alpha == T(2) ? T(1) : std::sqrt(T(0.5));
      CHECK(std::fabs(dx[26] - T(7.8) * g) <= 8 * std::numeric_limits<T>::epsilon() * T(7.8));
      CHECK(std::fabs(dx[3] + T(7.8) * g) <= 8 * std::numeric_limits<T>::epsilon() * T(7.8));
      for (std::size_t i = 0; i < y.size(); ++i)
        if (y[i] == 0) CHECK(dx[i] == 0);
    }
  }
}
}  // namespace

TEST_CASE("fuzz: entmax_backward's scaled form takes its scale from the support", "[regression][sparse]") {
  entmax_backward_huge_dy_off_support<float>();
  entmax_backward_huge_dy_off_support<double>();
}

namespace {
// entmax_backward's scaled form (a nonzero |dy| below 2^-60 on the row)
// beside a huge dy on a tiny y: the scale comes from the largest product
// |g dy|, not the largest |dy| (fuzz_sparse, CI on 9b258e9, 2026-12-07:
// float, alpha = 1, dy = -FLT_MAX on y = 1.2e-20 took K = -126, and
// g (dy 2^K - q) of an entry with y = 1e-21 fell below the normal range:
// dx = 0 for 4.4e-3). Rows where g h is below the normal range in the
// scaled units but its result is not take g 2^a (dy 2^K - q) 2^b.
template <class T>
void entmax_backward_huge_product_scale() {
  using ld = long double;
  const bool f = sizeof(T) == 4;
  const T big = std::numeric_limits<T>::max(), tiny = std::ldexp(T(1), f ? -100 : -600);
  // {y, dy} rows: the finding's shape, and one whose result for y = 2^-120
  // (double 2^-1000) needs the split scale-back.
  struct row {
    std::vector<T> y, dy;
  };
  std::vector<row> rows(2);
  rows[0].y = {T(0.6), T(0.3), T(0.1) - T(1e-6), T(1.2e-20), T(1e-21), T(1e-6)};
  rows[0].dy = {T(-16.5), T(-16.5), T(-16.5), -big, T(-16.5), tiny};
  rows[1].y = {T(0.5), T(0.25), T(0.25), std::ldexp(T(1), f ? -100 : -900), std::ldexp(T(1), f ? -120 : -1000)};
  rows[1].dy = {T(1), T(1), tiny, std::ldexp(T(1), f ? 127 : 1023), T(3)};
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (const T alpha : {T(1), T(1.5), T(2)}) {
      for (std::size_t r = 0; r < rows.size(); ++r) {
        INFO("isa " << isa << " alpha " << alpha << " row " << r << (f ? " float" : " double"));
        // Padded to 37 entries (off the support) so that every ISA runs a
        // full vector and a tail.
        std::vector<T> y(37, T(0)), dy(37, T(-7)), dx(37, T(99));
        std::copy(rows[r].y.begin(), rows[r].y.end(), y.begin() + 3);
        std::copy(rows[r].dy.begin(), rows[r].dy.end(), dy.begin() + 3);
        smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), y.size(), alpha);
        ld G = 0, GD = 0, GDabs = 0;
        std::vector<ld> g(y.size());
        for (std::size_t i = 0; i < y.size(); ++i) {
          g[i] = y[i] > 0 ? std::pow(static_cast<ld>(y[i]), 2 - static_cast<ld>(alpha)) : 0;
          G += g[i];
          GD += g[i] * dy[i];
          GDabs += std::fabs(g[i] * dy[i]);
        }
        for (std::size_t i = 0; i < y.size(); ++i) {
          INFO("entry " << i << " dx " << dx[i]);
          const ld ref = g[i] * (dy[i] - GD / G);
          const ld scale = g[i] * (std::fabs(static_cast<ld>(dy[i])) + GDabs / G);
          CHECK(std::fpclassify(dx[i]) != FP_SUBNORMAL);
          CHECK(std::fabs(dx[i] - ref) <= 8 * std::numeric_limits<T>::epsilon() * scale + std::numeric_limits<T>::min());
        }
        // The entry that lost its result before (y = 1e-21; y = 2^-120):
        // normal and nonzero.
        CHECK(std::fabs(dx[7]) >= std::numeric_limits<T>::min());
      }
    }
  }
}
}  // namespace

TEST_CASE("fuzz: entmax_backward's scaled form takes its scale from the largest product", "[regression][sparse]") {
  entmax_backward_huge_product_scale<float>();
  entmax_backward_huge_product_scale<double>();
}

namespace {
// stablemax_backward's careful form takes its scale 2^K from the largest
// |dy r| (r = s(x) / s(max x)), not the largest |dy| (fuzz_variants, on
// the work tree after 9b258e9, 2026-12-07: float, SSE2, dy = FLT_MAX on
// x = -1.7e31, r = 2^-108, beside dy ~ 10 on x ~ 16; the dominant product
// fell below 2^-103 of the largest |dy| and was dropped: dx_0 = -0.06 for
// -6475).
template <class T>
void stablemax_backward_huge_product_scale(const std::vector<T>& x, const std::vector<T>& dy) {
  using ld = long double;
  const std::size_t n = x.size();
  ld S = 0;
  std::vector<ld> s(n), ds(n);
  for (std::size_t i = 0; i < n; ++i) {
    const ld v = x[i];
    s[i] = v >= 0 ? 1 + v : 1 / (1 - v);
    ds[i] = v >= 0 ? 1 : 1 / ((1 - v) * (1 - v));
    S += s[i];
  }
  ld D = 0, Dabs = 0;
  for (std::size_t i = 0; i < n; ++i) {
    D += dy[i] * (s[i] / S);
    Dabs += std::fabs(dy[i] * (s[i] / S));
  }
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    std::vector<T> dx(n, T(99));
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      INFO("isa " << isa << (sizeof(T) == 4 ? " float" : " double") << " entry " << i << " dx " << dx[i]);
      const ld ref = ds[i] / S * (dy[i] - D), scale = ds[i] / S * (std::fabs(static_cast<ld>(dy[i])) + Dabs);
      CHECK(std::fpclassify(dx[i]) != FP_SUBNORMAL);
      CHECK(std::fabs(dx[i] - ref) <= 8 * std::numeric_limits<T>::epsilon() * scale + 4 * std::numeric_limits<T>::min());
    }
  }
}
}  // namespace

TEST_CASE("fuzz: stablemax_backward's careful form takes its scale from the largest product", "[regression][stablemax]") {
  const float fmax = std::numeric_limits<float>::max();
  stablemax_backward_huge_product_scale<float>(
      {0x1.3124p+4f, -0x1p-149f, -0.0f, -fmax, -0x1.ab505cp+103f, -0x1.21ap+4f, 0x1.f368p+3f, -0.0f, 0x1.dcdp+3f,
       -0x1.4dc8p+3f},
      {-0x1.aecp+1f, -0x1.0fap+1f, -0x1.208p+0f, -0x1.58p-3f, fmax, 0x1.4a9p+4f, -0x1.002p+2f, -0x1.a048p+4f,
       -0x1.0098p+4f, -0x1.4edp+3f});
  // The same shape in double, and at a length with full vectors and a tail.
  std::vector<double> x(37, 3.0), dy(37, -2.5);
  x[5] = -0x1p980;
  dy[5] = std::numeric_limits<double>::max();
  x[20] = 19.0;
  dy[20] = 0x1p-600;  // (a tiny dy: the careful form)
  stablemax_backward_huge_product_scale<double>(x, dy);
  std::vector<float> xf(37, 3.0f), dyf(37, -2.5f);
  xf[5] = -0x1p110f;
  dyf[5] = fmax;
  dyf[20] = 0x1p-100f;
  stablemax_backward_huge_product_scale<float>(xf, dyf);
  // A ratio r below the normal range (+0) under a dy near the largest T:
  // dy r still counts (fuzz_variants, the fresh-clone CI on 4124300: dx_0
  // 2^-16 off), and the review's rows of 2026-12-07 (dx_1 = 0 for -0.25;
  // double 0 for 1).
  stablemax_backward_huge_product_scale<float>(
      {-0x1p-149f, 0x1.0624dep-10f, -0x1.02dp+3f, -0x1.5d8p+3f, 0x1.47e8p+4f, -0x1.1da8p+4f, 0x1.3124p+4f, -0x1p-149f,
       0x1p-149f, -fmax, -0x1.ab505cp+103f, -0x1.21ap+4f, 0x1.f368p+3f, -0.0f, 0x1.dcdp+3f, -0x1.4dc8p+3f, -0x1.aecp+1f},
      {-0x1.0fap+1f, -0x1.354p+0f, -0x1.02dp+3f, -0x1.5d8p+3f, 0x1.47e8p+4f, -0x1.1da8p+4f, 0x1.3124p+4f, -0x1p-149f,
       0x1p-149f, -fmax, -0x1.712c98p+104f, 0x1.91a8p+20f, -0x1.956p+1f, -0x1.956p+1f, 0x1.75b8p+3f, -0x1.9f08p+4f,
       0x1.b4p+4f});
  stablemax_backward_huge_product_scale<float>({-0x1p127f, 0.0f}, {0x1p125f, 0.0f});
  const double dmax = std::numeric_limits<double>::max();
  stablemax_backward_huge_product_scale<double>({-dmax, -0.097}, {-dmax, 0.0});
}

namespace {
// entmax_backward on one row against long double, every ISA: within 8 ulp
// of each entry's scale g (|dy| + sum |g dy| / sum g) plus 4 min, finite.
template <class T>
void check_entmax_backward_row(const std::vector<T>& y, const std::vector<T>& dy, T alpha) {
  using ld = long double;
  const std::size_t n = y.size();
  ld G = 0, GD = 0, GDabs = 0;
  std::vector<ld> g(n);
  for (std::size_t i = 0; i < n; ++i) {
    g[i] = y[i] > 0 ? std::pow(static_cast<ld>(y[i]), 2 - static_cast<ld>(alpha)) : 0;
    G += g[i];
    GD += g[i] * dy[i];
    GDabs += std::fabs(g[i] * dy[i]);
  }
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    std::vector<T> dx(n, T(99));
    smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), n, alpha);
    for (std::size_t i = 0; i < n; ++i) {
      INFO("isa " << isa << " alpha " << alpha << (sizeof(T) == 4 ? " float" : " double") << " entry " << i << " dx "
                  << dx[i]);
      const ld ref = g[i] * (dy[i] - GD / G), scale = g[i] * (std::fabs(static_cast<ld>(dy[i])) + GDabs / G);
      CHECK(std::isfinite(dx[i]));
      CHECK(std::fabs(dx[i] - ref) <= 8 * std::numeric_limits<T>::epsilon() * scale + 4 * std::numeric_limits<T>::min());
    }
  }
}
}  // namespace

TEST_CASE("review: the scaled forms' 2^K stays finite, its estimate holds for alpha > 2, K < 0 keeps dy",
          "[regression][sparse][stablemax]") {
  // (review of 4124300 and 6b573c0, 2026-12-07) Every product below the
  // normal range took K above max_exponent: 2^K = inf, dx NaN.
  std::vector<float> y(1001, 1e-30f), dy(1001, 1e-25f);
  y[0] = 1;
  dy[0] = 0;
  check_entmax_backward_row<float>(y, dy, 1.5f);
  std::vector<double> yd(1001, 1e-157), dyd(1001, 1e-152);
  yd[0] = 1;
  dyd[0] = 0;
  check_entmax_backward_row<double>(yd, dyd, 1.0);
  // alpha = 120: e log2 y from the exponent alone was |e| binades high.
  check_entmax_backward_row<float>({0.99f, 0.98f}, {1e-20f, 3e-20f}, 120.0f);
  check_entmax_backward_row<double>({0.999, 0.998}, {1e-200, 3e-200}, 1000.0);
  // K < 0 from a large g: dy_1 2^K fell below the normal range.
  check_entmax_backward_row<float>({1e-35f, 0.5f, 0.25f}, {1.0f, 1e-3f, 1e-30f}, 3.0f);
  check_entmax_backward_row<double>({1e-305, 0.5, 0.25}, {1.0, 1e-3, 1e-300}, 3.0);
  // stablemax_backward: 2^K = inf; a dy on x = -inf set the scale.
  std::vector<float> x(1001, -1e10f), dys(1001, 1e-30f);
  x[0] = 0;
  dys[0] = 0;
  stablemax_backward_huge_product_scale<float>(x, dys);
  const double inf = std::numeric_limits<double>::infinity();
  stablemax_backward_huge_product_scale<double>({-inf, 0.0, 1.0}, {std::numeric_limits<double>::max(), 1e-300, 3e-300});
  stablemax_backward_huge_product_scale<float>({-std::numeric_limits<float>::infinity(), 0.0f, 1.0f},
                                               {1e10f, 1e-30f, 3e-30f});
  // fuzz_variants on 095d98b (older than it): the careful form's mean
  // D 2^1021 / R overflowed in D 2^1021 (dy = DBL_MAX): dx_0 = 0 for
  // -0.027 DBL_MAX.
  const double dmax = std::numeric_limits<double>::max();
  stablemax_backward_huge_product_scale<double>({0x1.fc37a16977483p-666, -0x0.0000000000001p-1022, -inf, -inf, -0x1.056p+4},
                                                {-dmax, -dmax, -dmax, 0x1.e858p+4, dmax});
}
