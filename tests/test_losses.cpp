// logsumexp, cross_entropy and cross_entropy_backward through smax::dynamic on
// every ISA the CPU has, float and double: long-double references, sizes
// around every vector width, misaligned and in-place calls, label smoothing,
// the one-read and the max fallback paths, special values, no subnormal
// output, bad arguments, and the batched forms (reductions, ignore_index,
// saved logsumexp, any thread count).
#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <smax/parallel.hpp>

#include "common.hpp"

namespace {

using ld = long double;
using smax_test::guarded;
using smax_test::isas;
using smax_test::normal;
using smax_test::use_isa;

template <class T>
struct loss_bound;
template <>
struct loss_bound<float> {
  static constexpr double lse = 1e-6;   // |err| / max(1, |lse|)
  static constexpr double grad = 1e-6;  // |err| / (|dloss| (p_i + q_i)), outputs above 1e-30
};
template <>
struct loss_bound<double> {
  static constexpr double lse = 1e-14;
  static constexpr double grad = 1e-14;
};

template <class T>
ld ref_ce(const std::vector<T>& x, std::size_t t, float ls, ld lse) {
  ld sum = 0;
  for (T v : x) sum += v;
  const ld l = ls;
  return lse - ((1 - l) * static_cast<ld>(x[t]) + l * sum / static_cast<ld>(x.size()));
}

// softmax(x) in long double, taken relative to the max (exact), not to a
// rounded logsumexp; lse_out gets the logsumexp.
template <class T>
std::vector<ld> ref_probs(const std::vector<T>& x, ld& lse_out) {
  ld m = -std::numeric_limits<ld>::infinity();
  for (T v : x) m = std::max<ld>(m, v);
  ld s = 0;
  for (T v : x) s += std::exp(static_cast<ld>(v) - m);
  const ld log_s = std::log(s);
  lse_out = m + log_s;
  std::vector<ld> p(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) p[i] = std::exp((static_cast<ld>(x[i]) - m) - log_s);
  return p;
}

// Worst |dx - ref| / (|dloss| (p_i + q_i)) / bound, p = ref_probs(x); NaN
// counts as infinite. The bound adds the rounding of the logsumexp, a
// double, that the kernel exponentiates against (|lse| 2^-53; nothing for
// float).
template <class T>
double grad_err(const std::vector<T>& dx, const std::vector<ld>& p, ld lse, std::size_t t, double dloss, float ls,
                double flat) {
  const double bound = flat + std::fabs(static_cast<double>(lse)) * 0x1p-53;
  const ld n = static_cast<ld>(p.size());
  double worst = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const ld q = ld(ls) / n + (i == t ? 1 - ld(ls) : 0);
    const ld ref = ld(dloss) * (p[i] - q);
    const ld scale = std::fabs(ld(dloss)) * (p[i] + q);
    if (std::fabs(ref) < 1e-30L) {
      if (std::fabs(static_cast<ld>(dx[i]) - ref) > 1e-30L + 1e-6L * scale) worst = std::numeric_limits<double>::infinity();
      continue;
    }
    double e = static_cast<double>(std::fabs(static_cast<ld>(dx[i]) - ref) / scale) / bound;
    worst = std::max(worst, e == e ? e : std::numeric_limits<double>::infinity());
  }
  return worst;
}

template <class T>
bool no_subnormal(const std::vector<T>& v) {
  for (T e : v)
    if (std::fpclassify(e) == FP_SUBNORMAL) return false;
  return true;
}

template <class T>
void check_losses(std::size_t n, double sigma, double mean, std::uint64_t seed) {
  INFO("n " << n << ", sigma " << sigma << ", mean " << mean);
  const std::vector<T> x = normal<T>(n, sigma, seed, mean);
  const std::size_t t = (seed * 7919) % n;
  const double lse = smax::dynamic::logsumexp(x.data(), n);
  ld rl;
  const std::vector<ld> p = ref_probs(x, rl);
  CHECK(std::fabs(lse - static_cast<double>(rl)) <= loss_bound<T>::lse * std::max<double>(1.0, std::fabs(double(rl))));
  for (float ls : {0.0f, 0.1f}) {
    const double ce = smax::dynamic::cross_entropy(x.data(), n, t, ls);
    const ld rc = ref_ce(x, t, ls, rl);
    CHECK(std::fabs(ce - static_cast<double>(rc)) <= loss_bound<T>::lse * std::max<double>(1.0, std::fabs(double(rl))));
    for (double dloss : {1.0, -2.5, 1e-3}) {
      guarded<T> dx(n, 1, T(7));
      smax::dynamic::cross_entropy_backward(x.data(), n, t, dloss, dx.data(), ls);
      CHECK(dx.intact());
      const auto g = dx.values();
      INFO("dloss " << dloss << ", label smoothing " << ls);
      CHECK(grad_err(g, p, rl, t, dloss, ls, loss_bound<T>::grad) <= 1.0);
      CHECK(no_subnormal(g));
      // The saved logsumexp and in place give the same bits.
      std::vector<T> in = x;
      smax::dynamic::cross_entropy_backward(in.data(), n, t, dloss, in.data(), ls, lse);
      CHECK(smax_test::same_bits(in, g));
    }
  }
}

TEMPLATE_TEST_CASE("logsumexp and cross_entropy match a long-double reference", "[losses]", float, double) {
  for (const auto& isa : isas()) {
    use_isa u(isa);
    INFO("isa " << isa);
    for (std::size_t n : smax_test::sizes_up_to_max()) {
      if (n == 0) continue;
      INFO("n " << n);
      check_losses<TestType>(n, 1.0, 0.0, n + 1);
      check_losses<TestType>(n, 30.0, -10.0, n + 2);  // wide: terms far below the max
    }
    // Beyond the one-read range (|x| > split_limit): the max fallback.
    const double far = std::is_same<TestType, float>::value ? 5000.0 : 2e6;
    check_losses<TestType>(1000, 2.0, far, 3);
    check_losses<TestType>(1000, 2.0, -far, 4);
    // Label smoothing over more than one block (block by block sum of x).
    check_losses<TestType>(std::min<std::size_t>(smax_test::max_n(), 200003), 3.0, 0.0, 5);
  }
}

// With label smoothing the loss needs mean(x): n logits near the largest
// finite value overflowed its sum in T lanes (+inf loss; found by
// fuzz_losses). All equal, the loss is log n.
TEMPLATE_TEST_CASE("cross_entropy: label smoothing on logits near the largest finite value", "[losses]", float,
                   double) {
  using T = TestType;
  constexpr T big = std::numeric_limits<T>::max();
  for (const auto& isa : isas()) {
    use_isa on(isa);
    for (std::size_t n : {2, 3, 30, 1000, 70001}) {
      for (T v : {-big, big, T(-big / 3)}) {
        const std::vector<T> x(n, v);
        for (float ls : {0.1f, 0.392157f, 1.0f}) {
          INFO(isa << " n " << n << " x " << v << " ls " << ls);
          const double loss = smax::dynamic::cross_entropy(x.data(), n, n / 2, ls);
          // the mean's sum in T lanes: a few ulps of |x|
          const double allow = 1e-6 + double(ls) * std::fabs(double(v)) * 16 * std::numeric_limits<T>::epsilon();
          CHECK(std::isfinite(loss));
          CHECK(std::fabs(loss - std::log(double(n))) <= allow);
        }
      }
    }
    // Both signs near the largest value: lse - x_t alone would overflow,
    // the loss 0.05 (2 big) + 0.95 (big - 0.8 big) = 0.29 big does not
    // (double; float logits never reach double's range).
    if (sizeof(T) == 8) {
      std::vector<T> x(10, big);
      x[9] = -big;
      const double loss = smax::dynamic::cross_entropy(x.data(), x.size(), 9, 0.95f);
      const double want = (1 - double(0.95f)) * 2 * double(big) + double(0.95f) * (double(big) - 0.8 * double(big));
      INFO(isa);
      CHECK(std::fabs(loss - want) <= 1e-6 * want);
    }
  }
}

TEMPLATE_TEST_CASE("losses: special values and bad arguments", "[losses]", float, double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (const auto& isa : isas()) {
    use_isa u(isa);
    INFO("isa " << isa);
    std::vector<T> x(37, T(0.5));
    std::vector<T> dx(37);
    x[3] = nan;
    CHECK(std::isnan(smax::dynamic::logsumexp(x.data(), x.size())));
    CHECK(std::isnan(smax::dynamic::cross_entropy(x.data(), x.size(), 5)));
    smax::dynamic::cross_entropy_backward(x.data(), x.size(), 5, 1.0, dx.data());
    for (T v : dx) CHECK(std::isnan(v));

    x.assign(37, -inf);
    CHECK(smax::dynamic::logsumexp(x.data(), x.size()) == -double(inf));
    CHECK(smax::dynamic::logsumexp(x.data(), 0) == -double(inf));
    smax::dynamic::cross_entropy_backward(x.data(), x.size(), 5, 2.0, dx.data());
    for (std::size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == (i == 5 ? T(-2) : T(0)));

    x.assign(37, T(1));
    x[7] = x[9] = inf;
    CHECK(smax::dynamic::logsumexp(x.data(), x.size()) == double(inf));
    smax::dynamic::cross_entropy_backward(x.data(), x.size(), 7, 1.0, dx.data());
    for (std::size_t i = 0; i < dx.size(); ++i) CHECK(dx[i] == (i == 7 ? T(-0.5) : i == 9 ? T(0.5) : T(0)));

    // A masked target: infinite loss.
    x.assign(37, T(1));
    x[4] = -inf;
    CHECK(smax::dynamic::cross_entropy(x.data(), x.size(), 4) == double(inf));

    // Huge finite logits: no overflow.
    x.assign(37, std::numeric_limits<T>::max());
    const double l = smax::dynamic::logsumexp(x.data(), x.size());
    CHECK(std::fabs(l - (double(std::numeric_limits<T>::max()) + std::log(37.0))) <= 1e-12 * l);
    smax::dynamic::cross_entropy_backward(x.data(), x.size(), 0, 1.0, dx.data());
    for (std::size_t i = 1; i < dx.size(); ++i) CHECK(std::fabs(dx[i] - T(1.0 / 37)) <= T(1e-6));
    CHECK(std::fabs(dx[0] - T(1.0 / 37 - 1)) <= T(1e-6));

    // Tiny upstream gradients: zeros, never subnormals.
    x = normal<T>(300, 20.0, 9);
    dx.resize(x.size());
    for (double dloss : {1e-30, 1e-40, 1e-300, -1e-35}) {
      smax::dynamic::cross_entropy_backward(x.data(), x.size(), 3, dloss, dx.data(), 0.2f);
      CHECK(no_subnormal(dx));
    }

    CHECK_THROWS_AS(smax::dynamic::cross_entropy(x.data(), x.size(), x.size()), std::invalid_argument);
    CHECK_THROWS_AS(smax::dynamic::cross_entropy(x.data(), 0, 0), std::invalid_argument);
    CHECK_THROWS_AS(smax::dynamic::cross_entropy(x.data(), x.size(), 0, -0.1f), std::invalid_argument);
    CHECK_THROWS_AS(smax::dynamic::cross_entropy(x.data(), x.size(), 0, 1.5f), std::invalid_argument);
    dx.assign(dx.size(), T(3));
    CHECK_THROWS_AS(smax::dynamic::cross_entropy_backward(x.data(), x.size(), x.size(), 1.0, dx.data()),
                    std::invalid_argument);
    for (T v : dx) CHECK(v == T(3));  // nothing written
  }
}

TEMPLATE_TEST_CASE("batched losses: reductions, ignore_index, saved logsumexp, threads", "[losses][batched]", float,
                   double) {
  using T = TestType;
  const std::size_t rows = 13, cols = 301, stride = 307;
  std::vector<T> x(rows * stride, T(99));
  std::vector<std::int64_t> tg(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto row = normal<T>(cols, 2.0, 100 + r);
    std::copy(row.begin(), row.end(), x.begin() + r * stride);
    tg[r] = (r % 4 == 1) ? -100 : static_cast<std::int64_t>((r * 37) % cols);
  }
  const smax::matrix_view<const T> xv(x.data(), rows, cols, stride);
  smax::thread_pool pool(3);
  for (const auto& isa : isas()) {
    use_isa u(isa);
    INFO("isa " << isa);
    for (float ls : {0.0f, 0.05f}) {
      smax::loss_options o;
      o.label_smoothing = ls;
      o.reduce = smax::reduction::none;
      std::vector<double> loss(rows), lse(rows), lse2(rows);
      CHECK(smax::dynamic::cross_entropy(xv, tg.data(), o, loss.data(), lse.data()) == 0);
      smax::dynamic::logsumexp(xv, lse2.data());
      double sum = 0;
      std::size_t count = 0;
      for (std::size_t r = 0; r < rows; ++r) {
        const T* xr = x.data() + r * stride;
        CHECK(lse[r] == lse2[r]);
        CHECK(lse[r] == smax::dynamic::logsumexp(xr, cols));
        if (tg[r] == -100) {
          CHECK(loss[r] == 0);
          continue;
        }
        CHECK(loss[r] == smax::dynamic::cross_entropy(xr, cols, static_cast<std::size_t>(tg[r]), ls));
        sum += loss[r];
        ++count;
      }
      o.reduce = smax::reduction::sum;
      CHECK(smax::dynamic::cross_entropy(xv, tg.data(), o) == sum);
      o.reduce = smax::reduction::mean;
      const double mean = smax::dynamic::cross_entropy(xv, tg.data(), o);
      CHECK(mean == sum / double(count));
      CHECK(smax::dynamic::cross_entropy(xv, tg.data(), o, nullptr, nullptr, &pool) == mean);

      // Backward: mean scales by 1 / count; ignored rows get 0; the stride
      // gap is not written; the saved lse and a pool change no bit.
      std::vector<T> dx(rows * stride, T(5)), dx2(rows * stride, T(5));
      const smax::matrix_view<T> dv(dx.data(), rows, cols, stride), dv2(dx2.data(), rows, cols, stride);
      smax::dynamic::cross_entropy_backward(xv, tg.data(), 3.0, dv, o);
      smax::dynamic::cross_entropy_backward(xv, tg.data(), 3.0, dv2, o, nullptr, lse.data(), &pool);
      CHECK(smax_test::same_bits(dx, dx2));
      std::vector<T> one(cols);
      for (std::size_t r = 0; r < rows; ++r) {
        const T* dr = dx.data() + r * stride;
        for (std::size_t c = cols; c < stride && r + 1 < rows; ++c) CHECK(dr[c] == T(5));
        if (tg[r] == -100) {
          for (std::size_t c = 0; c < cols; ++c) CHECK(dr[c] == T(0));
          continue;
        }
        smax::dynamic::cross_entropy_backward(x.data() + r * stride, cols, static_cast<std::size_t>(tg[r]),
                                              3.0 / double(count), one.data(), ls);
        CHECK(std::equal(one.begin(), one.end(), dr));
      }
      // none: per-row upstream gradients (required).
      o.reduce = smax::reduction::none;
      std::vector<double> g(rows, -1.5);
      smax::dynamic::cross_entropy_backward(xv, tg.data(), 0.0, dv2, o, g.data());
      const std::size_t r0 = 2;
      smax::dynamic::cross_entropy_backward(x.data() + r0 * stride, cols, static_cast<std::size_t>(tg[r0]), -1.5,
                                            one.data(), ls);
      CHECK(std::equal(one.begin(), one.end(), dx2.data() + r0 * stride));
      CHECK_THROWS_AS(smax::dynamic::cross_entropy_backward(xv, tg.data(), 1.0, dv2, o), std::invalid_argument);
      CHECK_THROWS_AS(smax::dynamic::cross_entropy(xv, tg.data(), o), std::invalid_argument);
    }
    std::vector<std::int64_t> bad = tg;
    bad[5] = static_cast<std::int64_t>(cols);
    CHECK_THROWS_AS(smax::dynamic::cross_entropy(xv, bad.data()), std::invalid_argument);
    bad[5] = -1;
    CHECK_THROWS_AS(smax::dynamic::cross_entropy(xv, bad.data()), std::invalid_argument);
  }
}

}  // namespace
