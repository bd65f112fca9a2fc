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
