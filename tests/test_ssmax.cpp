// ssmax (Scalable-Softmax) through smax::dynamic on every ISA the CPU has,
// float and double: softmax(c x) with c = s log(n) + b against long double,
// n = 1, agreement with softmax at the effective scale, negative and zero
// scales, the three-pass fallback (|c x| beyond the two-pass range, |x| up
// to the largest T), special values, bad arguments, and the documented
// backward c * softmax_backward(y, dy) against finite differences.
#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "variants_common.hpp"

namespace {

using variants_test::ld;
using variants_test::type_name;

template <class T>
struct bound;
template <>
struct bound<float> {
  static constexpr double rel = 1e-6;
  static constexpr double u = 0x1p-24;
};
template <>
struct bound<double> {
  static constexpr double rel = 2e-14;
  static constexpr double u = 0x1p-53;
};

// The effective scale exactly as the library forms it (double, then T).
template <class T>
T scale_of(T s, T b, std::size_t n) {
  return static_cast<T>(static_cast<double>(s) * std::log(static_cast<double>(n)) + static_cast<double>(b));
}

// Long-double softmax(c x) for finite x (c of either sign).
template <class T>
std::vector<ld> ref_scaled(const std::vector<T>& x, T c) {
  ld m = -std::numeric_limits<ld>::infinity();
  for (T v : x) m = std::max<ld>(m, static_cast<ld>(c) * v);
  std::vector<ld> y(x.size());
  ld s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += (y[i] = std::exp(static_cast<ld>(c) * x[i] - m));
  for (auto& v : y) v /= s;
  return y;
}

// Worst error relative to a per-element bound: rel + slope_i, where slope_i
// is what rounding the exponent costs (0 for the flat FMA path).
template <class T>
double worst_ratio(const std::vector<T>& y, const std::vector<ld>& ref, const std::vector<double>& allowance) {
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    double e;
    if (ref[i] > 1e-30L)
      e = static_cast<double>(std::fabs((y[i] - ref[i]) / ref[i])) / (bound<T>::rel + allowance[i]);
    else
      e = (y[i] >= 0 && y[i] <= 2e-30) ? 0.0 : std::numeric_limits<double>::infinity();
    if (e != e) e = std::numeric_limits<double>::infinity();
    worst = std::max(worst, e);
  }
  return worst;
}

template <class T>
std::vector<T> ssmax(const std::vector<T>& x, T s, T b) {
  std::vector<T> y(x.size(), T(-7));
  smax::dynamic::ssmax(x.data(), y.data(), x.size(), s, b);
  return y;
}

template <class T>
void accuracy(variants_test::worst_table& table) {
  const std::vector<std::pair<T, T>> params = {{T(0.43), T(0)}, {T(1), T(0.5)}, {T(-0.7), T(0)},
                                               {T(0.1), T(-2)}, {T(2.5), T(1)}};
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    // SSE2 has no FMA: the product c x is rounded before the exp (see
    // ssmax.hpp); every other ISA here folds it into an fma (flat error).
    const bool fma = isa != "sse2";
    std::vector<std::size_t> ns = smax_test::sizes_up_to_max();
    ns.push_back(std::min<std::size_t>(smax_test::max_n(), 1 << 20));
    for (std::size_t n : ns) {
      if (n == 0) continue;
      for (const auto& sb : params) {
        for (double sigma : {1.0, 4.0}) {
          // (above 64K two of the ten cases: the same paths as below it;
          // saves QEMU/ASan minutes)
          if (n > 65536 && (sigma != 1.0 || (&sb - params.data()) > 1)) continue;
          const std::vector<T> x = smax_test::normal<T>(n, sigma, n + 31);
          const T c = scale_of(sb.first, sb.second, n);
          INFO(type_name<T>() << " " << isa << " n = " << n << " s = " << sb.first << " b = " << sb.second
                              << " c = " << c);
          const std::vector<T> y = ssmax(x, sb.first, sb.second);
          const std::vector<ld> ref = ref_scaled(x, c);
          ld cm = 0;
          for (T v : x) cm = std::max<ld>(cm, std::fabs(static_cast<ld>(c) * v));
          std::vector<double> allow(n, 0.0);
          if (!fma)
            for (std::size_t i = 0; i < n; ++i)
              allow[i] = static_cast<double>((std::fabs(static_cast<ld>(c) * x[i]) + cm) * bound<T>::u);
          const double r = worst_ratio(y, ref, allow);
          table.add(std::string(type_name<T>()) + " " + isa + (fma ? " (flat)" : " (+ |c x| u)"),
                    r * (bound<T>::rel));
          CHECK(r <= 1.0);
          // Misaligned and in place: the same bits; guards intact.
          smax_test::guarded<T> g(n, 1, T(-5));
          smax::dynamic::ssmax(x.data(), g.data(), n, sb.first, sb.second);
          CHECK(smax_test::same_bits(g.values(), y));
          CHECK(g.intact());
          variants_test::misaligned<T> m(x);
          smax::dynamic::ssmax(m.p, m.p, n, sb.first, sb.second);
          CHECK(smax_test::same_bits(m.values(n), y));
        }
      }
    }
  }
}

TEST_CASE("ssmax matches long double softmax(c x) on every ISA", "[ssmax][accuracy]") {
  variants_test::worst_table table("ssmax: worst relative error (scaled to the rel bound)");
  accuracy<float>(table);
  accuracy<double>(table);
}

template <class T>
void properties() {
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  const T mx = std::numeric_limits<T>::max();
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO(type_name<T>() << " " << isa);
    // n = 1: log 1 = 0, the scale is b, and softmax of one element is 1.
    for (T v : {T(0), T(-3), T(1e30), T(-1e30)})
      for (T s : {T(0.5), T(-2)})
        for (T b : {T(0), T(1), T(-1)}) {
          const std::vector<T> y = ssmax(std::vector<T>{v}, s, b);
          CHECK(y[0] == T(1));  // b = 0 is c = 0: 1/n = 1 as well
        }
    // Equal to softmax at the effective scale: s = 0, b = 1 is softmax
    // itself; and ssmax(x, s, b) = softmax(c x) for c x exact in T.
    for (std::size_t n : {std::size_t(5), std::size_t(64), std::size_t(1000)}) {
      const std::vector<T> x = smax_test::normal<T>(n, 2.0, n + 3);
      std::vector<T> ys(n);
      smax::dynamic::softmax(x.data(), ys.data(), n);
      const std::vector<T> y1 = ssmax(x, T(0), T(1));
      for (std::size_t i = 0; i < n; ++i) CHECK(std::fabs(y1[i] - ys[i]) <= 2 * bound<T>::rel * ys[i]);
      // b = 2 - log(n): c = 2 exactly at s = 1 only up to rounding, so use
      // s = 0, b = 2: c x is exact (a power of two).
      std::vector<T> x2(x);
      for (auto& v : x2) v *= T(2);
      smax::dynamic::softmax(x2.data(), ys.data(), n);
      const std::vector<T> y2 = ssmax(x, T(0), T(2));
      for (std::size_t i = 0; i < n; ++i) CHECK(std::fabs(y2[i] - ys[i]) <= 2 * bound<T>::rel * ys[i]);
    }
    // Special values, c > 0: softmax's rules.
    for (std::size_t n : {std::size_t(3), std::size_t(40), std::size_t(129)}) {
      INFO("n = " << n);
      std::vector<T> x = smax_test::normal<T>(n, 1.0, n);
      x[1] = nan;
      CHECK(variants_test::all_nan(ssmax(x, T(1), T(0))));
      CHECK(variants_test::all_nan(ssmax(x, T(-1), T(0))));
      x = smax_test::normal<T>(n, 1.0, n);
      x[0] = inf;
      x[n - 1] = inf;
      x[1] = -inf;
      std::vector<T> y = ssmax(x, T(1), T(0));
      for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == (x[i] == inf ? T(0.5) : T(0)));
      // c < 0: the roles flip: -inf entries share, +inf entries get 0.
      y = ssmax(x, T(-1), T(0));
      for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == (x[i] == -inf ? T(1) : T(0)));
      // All at the masked infinity: all 0.
      for (T v : ssmax(std::vector<T>(n, -inf), T(1), T(0))) CHECK(v == T(0));
      for (T v : ssmax(std::vector<T>(n, inf), T(-1), T(0))) CHECK(v == T(0));
      // -inf entries (c > 0) get 0 and the rest is right.
      x = smax_test::normal<T>(n, 1.0, n);
      x[2] = -inf;
      y = ssmax(x, T(0.5), T(0.25));
      CHECK(y[2] == T(0));
      std::vector<T> xr(x);
      xr[2] = -mx;  // same limit
      CHECK(variants_test::rel_err(y, ref_scaled(xr, scale_of(T(0.5), T(0.25), n))) <= 2 * bound<T>::rel);
      // A tiny c > 0, below 4096 / max (c (-max) is then inside the
      // two-pass range: the kernel must not clamp x there), and one just
      // above it (it may): -inf entries still get exactly 0, +-max the
      // right share. s = 0, so c = b.
      for (T c : {T(4096) / mx * T(1e-3), T(4096) / mx * T(2)}) {
        INFO("c = " << c);
        x = smax_test::normal<T>(n, 1.0, n);
        x[0] = -mx;
        x[1] = mx;
        x[2] = -inf;
        y = ssmax(x, T(0), c);
        CHECK(y[2] == T(0));
        CHECK(variants_test::rel_err(y, ref_scaled(x, c)) <= 2 * bound<T>::rel);
      }
      // c = 0: uniform; an infinite entry gives 0 * inf = NaN.
      x = smax_test::normal<T>(n, 1.0, n);
      for (T v : ssmax(x, T(0), T(0))) CHECK(v == T(1.0 / n));
      x[0] = inf;
      CHECK(variants_test::all_nan(ssmax(x, T(0), T(0))));
    }
    // Beyond the two-pass range: |c x| > 4096 (float) / 2^20 (double), and
    // c x overflowing T. Three-pass fallback, exponent c (x - m) rounded
    // twice: |c (x_i - m)| 2 u.
    for (const std::vector<T>& x :
         std::vector<std::vector<T>>{smax_test::normal<T>(70, 3e4, 5), smax_test::normal<T>(70, 3e7, 6),
                                     {mx, mx / 2, T(0), -mx, mx}, {-mx, -mx, T(1)}}) {
      for (T s : {T(4), T(-4)}) {
        const T c = scale_of(s, T(0), x.size());
        INFO("fallback: x[0] = " << x[0] << " c = " << c);
        const std::vector<T> y = ssmax(x, s, T(0));
        CHECK(variants_test::all_finite(y));
        const std::vector<ld> ref = ref_scaled(x, c);
        ld m = -std::numeric_limits<ld>::infinity();
        for (T v : x) m = std::max<ld>(m, static_cast<ld>(c) * v);
        ld cmax = 0;
        for (T v : x) cmax = std::max<ld>(cmax, std::fabs(static_cast<ld>(c) * v));
        std::vector<double> allow(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) {
          // three-pass: c (x - m) rounded twice; two-pass (taken where
          // |c x| is in its range) on SSE2: the rounding of c x.
          const ld cx = static_cast<ld>(c) * x[i];
          allow[i] = static_cast<double>(std::fabs(cx - m) * 2 * bound<T>::u);
          if (isa == "sse2") allow[i] += static_cast<double>((std::fabs(cx) + cmax) * bound<T>::u);
        }
        CHECK(worst_ratio(y, ref, allow) <= 1.0);
      }
    }
    // Bad arguments: a clear error naming the parameter.
    std::vector<T> x(8, T(1)), y(8);
    for (T bad : {nan, inf, -inf}) {
      CHECK_THROWS_WITH(smax::dynamic::ssmax(x.data(), y.data(), 8, bad, T(0)), Catch::Contains("s must be"));
      CHECK_THROWS_WITH(smax::dynamic::ssmax(x.data(), y.data(), 8, T(1), bad), Catch::Contains("b must be"));
      CHECK_THROWS_AS(smax::dynamic::ssmax(x.data(), y.data(), 8, bad, T(0)), std::invalid_argument);
    }
    CHECK_THROWS_AS(smax::dynamic::ssmax(x.data(), y.data(), 8, mx, mx), std::invalid_argument);
    smax::dynamic::ssmax(static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0, T(1), T(0));
  }
}

TEST_CASE("ssmax: n = 1, softmax at the effective scale, signs, fallback, special values", "[ssmax]") {
  properties<float>();
  properties<double>();
}

TEST_CASE("ssmax backward is c * softmax_backward(y, dy)", "[ssmax][backward]") {
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : {std::size_t(2), std::size_t(9), std::size_t(40)}) {
      // (s, b) with |c| of order one at every n: the check is relative to
      // the largest gradient, which a tiny c would bring down to the
      // finite differences' own noise.
      for (const auto& sb : {std::pair<double, double>{0.6, 0.2}, std::pair<double, double>{-0.3, -0.5}}) {
        const double s = sb.first, b = sb.second;
        INFO(isa << " n = " << n << " s = " << s);
        const std::vector<double> x = smax_test::normal<double>(n, 1.5, 23 * n);
        const std::vector<double> dy = smax_test::normal<double>(n, 1.0, 29 * n);
        std::vector<double> y(n), dx(n);
        smax::dynamic::ssmax(x.data(), y.data(), n, s, b);
        smax::dynamic::softmax_backward(y.data(), dy.data(), dx.data(), n);
        const double c = s * std::log(static_cast<double>(n)) + b;
        for (auto& v : dx) v *= c;
        const std::vector<double> fd = variants_test::fd_vjp(
            [s, b](const double* a, double* o, std::size_t m) { smax::dynamic::ssmax(a, o, m, s, b); }, x, dy);
        CHECK(variants_test::grad_err(dx, fd) <= 1e-7);
      }
    }
  }
}

}  // namespace
