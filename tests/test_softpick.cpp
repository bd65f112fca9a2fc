// softpick and softpick_backward through smax::dynamic on every ISA the CPU
// has, float and double: long-double reference over sizes and eps, inputs
// near 0 (where e^(x - M) - e^(-M) cancels), huge inputs, the masking of
// -inf, all-nonpositive input, sums below one, special values, bad eps, and
// the backward against finite differences.
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
};
template <>
struct bound<double> {
  static constexpr double rel = 1e-14;
};

// Long-double softpick; the numerator through expm1 near 0.
template <class T>
std::vector<ld> ref_softpick(const std::vector<T>& x, ld eps, ld* sum_out = nullptr) {
  constexpr ld ninf = -std::numeric_limits<ld>::infinity();
  ld m = ninf;
  for (T v : x) m = std::max<ld>(m, v);
  const ld M = m > 0 ? m : 0;
  std::vector<ld> a(x.size());
  ld s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const ld v = x[i];
    a[i] = v == ninf ? 0 : (std::fabs(v) < 1 ? std::exp(-M) * std::expm1(v) : std::exp(v - M) - std::exp(-M));
    s += std::fabs(a[i]);
  }
  const ld den = s + eps;
  if (sum_out) *sum_out = den;
  for (auto& v : a) v = (v > 0 && den > 0) ? v / den : 0;
  return a;
}

template <class T>
std::vector<T> softpick(const std::vector<T>& x, T eps) {
  std::vector<T> y(x.size(), T(-7));
  smax::dynamic::softpick(x.data(), y.data(), x.size(), eps);
  return y;
}

// Rectified: every x <= 0 (and -inf) gives exactly 0.
template <class T>
bool rectified(const std::vector<T>& x, const std::vector<T>& y) {
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(x[i] > 0) && y[i] != T(0)) return false;
  return true;
}

template <class T>
std::vector<std::vector<T>> inputs(std::size_t n) {
  std::vector<std::vector<T>> v = {smax_test::normal<T>(n, 3.0, n + 1), smax_test::normal<T>(n, 0.01, n + 2),
                                   smax_test::uniform<T>(n, -50, 50, n + 3), smax_test::normal<T>(n, 300.0, n + 4),
                                   smax_test::normal<T>(n, 1e-30, n + 5)};
  // Near zero beside large logits: the terms of x near 0 against a large
  // reference, with 2^-Emax normal (30) and below the normal range (90, float).
  for (const T big : {T(30), T(90)}) {
    std::vector<T> x = smax_test::normal<T>(n, 1e-20, n + 6);
    for (std::size_t i = 0; i < n; i += 13) x[i] = big + T(i % 5);
    for (std::size_t i = 5; i < n; i += 11) x[i] = T(1e-37) * T(1 + i % 3);
    v.push_back(x);
  }
  return v;
}

template <class T>
void accuracy(variants_test::worst_table& table) {
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    std::vector<std::size_t> ns = smax_test::sizes_up_to_max();
    ns.push_back(std::min<std::size_t>(smax_test::max_n(), 1 << 20));
    for (std::size_t n : ns) {
      int which = 0;
      for (const std::vector<T>& x : inputs<T>(n)) {
        ++which;
        for (const T eps : {T(1e-8), T(0), T(0.5)}) {
          // (above 64K only the default eps: the others take the same code
          // path, covered at every smaller size; saves QEMU/ASan minutes)
          if (n > 65536 && eps != T(1e-8)) continue;
          INFO(type_name<T>() << " " << isa << " n = " << n << " input " << which << " eps = " << eps);
          const std::vector<T> y = softpick(x, eps);
          const double err = variants_test::rel_err(y, ref_softpick(x, static_cast<ld>(eps)));
          table.add(std::string(type_name<T>()) + " " + isa, err);
          CHECK(err <= bound<T>::rel);
          CHECK(rectified(x, y));
          if (eps != T(1e-8)) continue;
          // Misaligned, in place, guards: the same bits.
          smax_test::guarded<T> g(n, 1, T(-5));
          smax::dynamic::softpick(x.data(), g.data(), n, eps);
          CHECK(smax_test::same_bits(g.values(), y));
          CHECK(g.intact());
          variants_test::misaligned<T> m(x);
          smax::dynamic::softpick(m.p, m.p, n, eps);
          CHECK(smax_test::same_bits(m.values(n), y));
        }
      }
    }
  }
}

TEST_CASE("softpick matches long double on every ISA", "[softpick][accuracy]") {
  variants_test::worst_table table("softpick: worst relative error (outputs above 1e-30)");
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
    for (std::size_t n : {std::size_t(1), std::size_t(6), std::size_t(33), std::size_t(131)}) {
      INFO(type_name<T>() << " " << isa << " n = " << n);
      // All x <= 0: all exactly 0 (for every eps, 0 included).
      std::vector<T> x = smax_test::uniform<T>(n, -10, 0, n);
      x[0] = T(0);
      for (T eps : {T(1e-8), T(0)})
        for (T v : softpick(x, eps)) CHECK(v == T(0));
      // With negatives the outputs sum to below one; without, to
      // S / (S + eps).
      x = smax_test::normal<T>(n, 2.0, n + 9);
      x[0] = T(1.5);
      if (n > 1) x[1] = T(-1.5);
      ld den = 0;
      const std::vector<ld> ref = ref_softpick(x, ld(1e-8), &den);
      const std::vector<T> y = softpick(x, T(1e-8));
      ld s = 0;
      for (T v : y) s += v;
      if (n > 1) CHECK(s < 0.999L);
      CHECK(variants_test::rel_err(y, ref) <= bound<T>::rel);
      // -inf entries are masked: output 0 and no term in the sum, i.e. the
      // same as the input without them (and not the unmasked formula,
      // which would add e^(-M) per -inf entry).
      std::vector<T> xm = {T(1), -inf, T(0.5), -inf, -inf, T(-2)};
      for (std::size_t k = 6; k < n; ++k) xm.push_back(-inf);
      const std::vector<T> ym = softpick(xm, T(0));
      const std::vector<T> yr = softpick(std::vector<T>{T(1), T(0.5), T(-2)}, T(0));
      CHECK(ym[1] == T(0));
      CHECK(ym[3] == T(0));
      CHECK(std::fabs(ym[0] - yr[0]) <= bound<T>::rel * yr[0]);
      CHECK(std::fabs(ym[2] - yr[1]) <= bound<T>::rel * yr[1]);
      CHECK(ym[5] == T(0));
      const ld e1 = std::expm1(1.0L), e05 = std::expm1(0.5L), em2 = -std::expm1(-2.0L);
      CHECK(std::fabs(ym[0] - e1 / (e1 + e05 + em2)) <= bound<T>::rel * ym[0]);
      // All -inf: all 0.
      for (T v : softpick(std::vector<T>(n, -inf), T(0))) CHECK(v == T(0));
      // NaN: all NaN. +inf entries: 1 / (count + eps), the rest 0.
      x = smax_test::normal<T>(n, 2.0, n + 10);
      x[n - 1] = nan;
      CHECK(variants_test::all_nan(softpick(x, T(1e-8))));
      x[n - 1] = inf;
      if (n > 3) x[2] = inf;
      const std::size_t count = n > 3 ? 2 : 1;
      const std::vector<T> yi = softpick(x, T(0.25));
      for (std::size_t i = 0; i < n; ++i) CHECK(yi[i] == (x[i] == inf ? T(1.0 / (count + 0.25)) : T(0)));
      // Huge finite inputs (beyond the two-pass range, up to the largest
      // T): finite and right.
      for (const std::vector<T>& h :
           std::vector<std::vector<T>>{{T(5000), T(4999), T(1), T(-3)},
                                       {mx, -mx, mx / 2, T(0), T(3)},
                                       std::vector<T>(n, mx),
                                       {T(2e6), T(2e6) - T(1), -inf}}) {
        const std::vector<T> yh = softpick(h, T(1e-8));
        CHECK(variants_test::all_finite(yh));
        CHECK(variants_test::rel_err(yh, ref_softpick(h, ld(1e-8))) <= bound<T>::rel);
      }
      // Denominators whose inverse overflows T (every |x| tiny, eps = 0).
      std::vector<T> tiny = {T(1e-35), T(-2e-35), T(0), T(3e-36)};
      if (std::is_same<T, double>::value) tiny = {T(1e-305), T(-2e-305), T(0), T(3e-306)};
      const std::vector<T> yt = softpick(tiny, T(0));
      CHECK(variants_test::rel_err(yt, ref_softpick(tiny, ld(0))) <= bound<T>::rel);
    }
    // Bad eps: a clear error naming the parameter; n = 0 touches nothing.
    std::vector<T> x(4, T(1)), y(4);
    for (T bad : {T(-1e-8), nan, inf}) {
      CHECK_THROWS_AS(smax::dynamic::softpick(x.data(), y.data(), 4, bad), std::invalid_argument);
      CHECK_THROWS_WITH(smax::dynamic::softpick(x.data(), y.data(), 4, bad), Catch::Contains("eps"));
      CHECK_THROWS_AS(smax::dynamic::softpick_backward(x.data(), y.data(), y.data(), y.data(), 4, bad),
                      std::invalid_argument);
    }
    smax::dynamic::softpick(static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0);
    smax::dynamic::softpick_backward(static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
                                     static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0);
  }
}

TEST_CASE("softpick: rectified, masked, sums below one, huge inputs, special values", "[softpick]") {
  properties<float>();
  properties<double>();
}

TEST_CASE("softpick_backward matches finite differences", "[softpick][backward][accuracy]") {
  variants_test::worst_table table("softpick_backward: worst error vs finite differences (double) / vs double (float)");
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    // n = 1: y = a / (a + eps) with a = 1 - e^-x (x > 0), so
    // dx = dy eps e^-x / (a + eps)^2; the VJP formula gets it as a
    // difference of terms near dy / D, so the error is measured against |dy|.
    for (double x0 : {0.7, 3.0, -1.0}) {
      for (double eps : {1e-8, 0.5}) {
        const double dy0 = 1.25;
        double y0, dx0;
        smax::dynamic::softpick(&x0, &y0, 1, eps);
        smax::dynamic::softpick_backward(&x0, &y0, &dy0, &dx0, 1, eps);
        const ld a = -std::expm1(-static_cast<ld>(x0));
        const ld want = x0 > 0 ? dy0 * eps * std::exp(-static_cast<ld>(x0)) / ((a + eps) * (a + eps)) : 0;
        CHECK(std::fabs(dx0 - want) <= 4e-16L * dy0);
        float xf = float(x0), yf, dyf = float(dy0), dxf;
        smax::dynamic::softpick(&xf, &yf, 1, float(eps));
        smax::dynamic::softpick_backward(&xf, &yf, &dyf, &dxf, 1, float(eps));
        const ld af = -std::expm1(-static_cast<ld>(xf));
        const ld wantf = xf > 0 ? dyf * eps * std::exp(-static_cast<ld>(xf)) / ((af + eps) * (af + eps)) : 0;
        CHECK(std::fabs(dxf - wantf) <= 2.5e-7L * dyf);
      }
    }
    for (std::size_t n : {std::size_t(2), std::size_t(9), std::size_t(33), std::size_t(70)}) {
      for (double shift : {0.0, -4.0}) {  // max > 0; all x < 0 (y = 0, dx = 0)
        for (double eps : {1e-8, 0.5}) {
          INFO(isa << " n = " << n << " shift = " << shift << " eps = " << eps);
          std::vector<double> x = smax_test::normal<double>(n, 2.0, 17 * n, shift);
          for (auto& v : x)
            if (std::fabs(v) < 1e-2) v = 0.3;  // away from the kinks at 0
          const std::vector<double> dy = smax_test::normal<double>(n, 1.0, 19 * n);
          std::vector<double> y(n), dx(n);
          smax::dynamic::softpick(x.data(), y.data(), n, eps);
          smax::dynamic::softpick_backward(x.data(), y.data(), dy.data(), dx.data(), n, eps);
          const std::vector<double> fd = variants_test::fd_vjp(
              [eps](const double* a, double* b, std::size_t m) { smax::dynamic::softpick(a, b, m, eps); }, x, dy);
          const double err = variants_test::grad_err(dx, fd);
          table.add("double " + isa, err);
          CHECK(err <= 1e-7);
          // dx over x, over y, over dy: the same bits.
          for (int over = 0; over < 3; ++over) {
            std::vector<double> xa(x), ya(y), da(dy);
            double* out = over == 0 ? xa.data() : over == 1 ? ya.data() : da.data();
            smax::dynamic::softpick_backward(xa.data(), ya.data(), da.data(), out, n, eps);
            CHECK(smax_test::same_bits(std::vector<double>(out, out + n), dx));
          }
          std::vector<float> xf(x.begin(), x.end()), dyf(dy.begin(), dy.end()), yf(n), dxf(n);
          std::vector<double> xd(xf.begin(), xf.end()), dyd(dyf.begin(), dyf.end()), yd(n), dxd(n);
          smax::dynamic::softpick(xf.data(), yf.data(), n, float(eps));
          smax::dynamic::softpick_backward(xf.data(), yf.data(), dyf.data(), dxf.data(), n, float(eps));
          smax::dynamic::softpick(xd.data(), yd.data(), n, eps);
          smax::dynamic::softpick_backward(xd.data(), yd.data(), dyd.data(), dxd.data(), n, eps);
          const double ferr = variants_test::grad_err(std::vector<double>(dxf.begin(), dxf.end()), dxd);
          table.add("float " + isa, ferr);
          CHECK(ferr <= 2e-6);
        }
      }
    }
    // Beyond the two-pass range (max x = 2e6 in double): the analytic
    // gradient in long double, M = max x, e^(-M) = 0.
    {
      const std::vector<double> x = {2e6, 2e6 - 0.5, 2e6 - 1.0, -3.0};
      const std::vector<double> dy = {0.5, -1.0, 2.0, 1.0};
      const double eps = 0.25;
      std::vector<double> y(4), dx(4);
      smax::dynamic::softpick(x.data(), y.data(), 4, eps);
      smax::dynamic::softpick_backward(x.data(), y.data(), dy.data(), dx.data(), 4, eps);
      ld S = 0, dot = 0;
      for (double v : x) S += std::exp(static_cast<ld>(v) - 2e6L);
      const ld D = S + eps;
      for (int i = 0; i < 4; ++i) dot += static_cast<ld>(dy[i]) * std::exp(static_cast<ld>(x[i]) - 2e6L) / D;
      for (int i = 0; i < 4; ++i) {
        const ld e = std::exp(static_cast<ld>(x[i]) - 2e6L) / D;
        ld want = x[i] > 0 ? e * (dy[i] - dot) : e * dot;
        if (i == 0) want -= eps * dot / D;
        CHECK(std::fabs(dx[i] - want) <= 1e-13L * (std::fabs(want) + 1e-300L));
      }
    }
    // Special values.
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> x = {1.0, std::numeric_limits<double>::quiet_NaN(), 3.0}, y(3, 0.1), dy = {1, 2, 3}, dx(3);
    smax::dynamic::softpick_backward(x.data(), y.data(), dy.data(), dx.data(), 3);
    CHECK(variants_test::all_nan(dx));
    x = {1.0, inf, -2.0};
    smax::dynamic::softpick_backward(x.data(), y.data(), dy.data(), dx.data(), 3);
    for (double v : dx) CHECK(v == 0);
    x = {1.0, -inf, 2.0};
    smax::dynamic::softpick(x.data(), y.data(), 3);
    smax::dynamic::softpick_backward(x.data(), y.data(), dy.data(), dx.data(), 3);
    CHECK(dx[1] == 0);
    CHECK(std::isfinite(dx[0]));
  }
}

}  // namespace
