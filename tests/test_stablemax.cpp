// stablemax, log_stablemax and stablemax_backward through smax::dynamic on
// every ISA the CPU has, float and double: long-double references, sizes
// around every vector width, misaligned and in-place calls, no shift
// invariance, huge inputs (no overflow anywhere), special values, and the
// backward against finite differences. `smax_tests "[accuracy]"` prints the
// worst errors measured.
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "variants_common.hpp"

namespace {

using variants_test::ld;
using variants_test::type_name;

template <class T>
struct bound;
template <>
struct bound<float> {
  static constexpr double rel = 1e-6;  // per element, outputs above 1e-30
  static constexpr double log = 3e-7;  // |err| / max(1, |log s|, |log sum|): ~2.5 ulp
};
template <>
struct bound<double> {
  static constexpr double rel = 1e-14;
  static constexpr double log = 1e-15;
};

ld s_of(ld v) { return v >= 0 ? v + 1 : 1 / (1 - v); }  // s(-inf) = 0

template <class T>
std::vector<ld> ref_stablemax(const std::vector<T>& x) {
  std::vector<ld> y(x.size());
  ld s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += (y[i] = s_of(x[i]));
  for (auto& v : y) v /= s;
  return y;
}

template <class T>
std::vector<ld> ref_log_stablemax(const std::vector<T>& x, ld* lse = nullptr) {
  ld s = 0;
  for (T v : x) s += s_of(v);
  const ld l = std::log(s);
  if (lse) *lse = l;
  std::vector<ld> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::log(s_of(x[i])) - l;
  return y;
}

template <class T>
double log_err(const std::vector<T>& y, const std::vector<ld>& ref, ld lse) {
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const ld scale = std::max<ld>({ld(1), std::fabs(ref[i] + lse), std::fabs(lse)});
    double e = static_cast<double>(std::fabs(y[i] - ref[i]) / scale);
    if (e != e) e = std::numeric_limits<double>::infinity();
    worst = std::max(worst, e);
  }
  return worst;
}

template <class T>
std::vector<T> call(void (*f)(const T*, T*, std::size_t), const std::vector<T>& x) {
  std::vector<T> y(x.size(), T(-7));
  f(x.data(), y.data(), x.size());
  return y;
}

template <class T>
void (*stablemax_fn())(const T*, T*, std::size_t) {
  return static_cast<void (*)(const T*, T*, std::size_t)>(&smax::dynamic::stablemax);
}
template <class T>
void (*log_stablemax_fn())(const T*, T*, std::size_t) {
  return static_cast<void (*)(const T*, T*, std::size_t)>(&smax::dynamic::log_stablemax);
}

// Typical, wide and huge inputs (no NaN / +inf).
template <class T>
std::vector<std::vector<T>> inputs(std::size_t n) {
  std::vector<std::vector<T>> v = {smax_test::normal<T>(n, 3.0, n + 1), smax_test::normal<T>(n, 300.0, n + 2),
                                   smax_test::uniform<T>(n, -1e6, 1e6, n + 3)};
  std::vector<T> huge = smax_test::uniform<T>(n, -1, 1, n + 4);
  for (std::size_t i = 0; i < n; ++i) huge[i] *= std::numeric_limits<T>::max();
  v.push_back(huge);
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
        INFO(type_name<T>() << " " << isa << " n = " << n << " input " << which++);
        const std::vector<T> y = call(stablemax_fn<T>(), x);
        const double err = variants_test::rel_err(y, ref_stablemax(x));
        table.add(std::string(type_name<T>()) + " " + isa + " stablemax", err);
        CHECK(err <= bound<T>::rel);
        ld lse = 0;
        const std::vector<ld> lref = ref_log_stablemax(x, &lse);
        const std::vector<T> ly = call(log_stablemax_fn<T>(), x);
        const double lerr = log_err(ly, lref, lse);
        table.add(std::string(type_name<T>()) + " " + isa + " log_stablemax", lerr);
        CHECK(lerr <= bound<T>::log);

        // Misaligned and in place: the same bits; nothing outside [0, n).
        smax_test::guarded<T> g(n, 1, T(-5));
        smax::dynamic::stablemax(x.data(), g.data(), n);
        CHECK(smax_test::same_bits(g.values(), y));
        CHECK(g.intact());
        variants_test::misaligned<T> m(x);
        smax::dynamic::stablemax(m.p, m.p, n);
        CHECK(smax_test::same_bits(m.values(n), y));
        variants_test::misaligned<T> ml(x);
        smax::dynamic::log_stablemax(ml.p, ml.p, n);
        CHECK(smax_test::same_bits(ml.values(n), ly));
      }
    }
  }
}

TEST_CASE("stablemax and log_stablemax match long double on every ISA", "[stablemax][accuracy]") {
  variants_test::worst_table table("stablemax / log_stablemax: worst error (rel; log: abs / max(1, |log s|, |lse|))");
  accuracy<float>(table);
  accuracy<double>(table);
}

template <class T>
void shift_and_overflow() {
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO(type_name<T>() << " " << isa);
    // Not shift-invariant: stablemax(x + 3) is a different distribution,
    // and each is right.
    std::vector<T> x = smax_test::normal<T>(100, 2.0, 7), xs(x);
    for (auto& v : xs) v += T(3);
    const std::vector<T> y = call(stablemax_fn<T>(), x), ys = call(stablemax_fn<T>(), xs);
    double diff = 0;
    for (std::size_t i = 0; i < x.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(y[i] - ys[i])));
    CHECK(diff > 1e-3);
    CHECK(variants_test::rel_err(ys, ref_stablemax(xs)) <= bound<T>::rel);

    // Where e^x overflows T (softmax without its max shift would give
    // inf / inf), stablemax is finite and exact.
    const T big = std::is_same<T, float>::value ? T(200) : T(2000);
    std::vector<T> xo = smax_test::normal<T>(70, 5.0, 8);
    xo[3] = big;
    xo[40] = big * 2;
    xo[69] = -big;
    const std::vector<T> yo = call(stablemax_fn<T>(), xo);
    CHECK(variants_test::all_finite(yo));
    CHECK(variants_test::rel_err(yo, ref_stablemax(xo)) <= bound<T>::rel);
    CHECK(std::isinf(std::exp(static_cast<T>(big))));

    // Up to the largest finite T: sums that overflow T, s(x) that is
    // subnormal, all entries equal and huge.
    const T mx = std::numeric_limits<T>::max();
    for (const std::vector<T>& h : std::vector<std::vector<T>>{
             std::vector<T>(67, mx), std::vector<T>(67, -mx), std::vector<T>(67, mx / 3),
             {mx, -mx, T(1), T(-1), mx / 2, T(0)}, {-mx, -mx / 2, -mx / 4}}) {
      const std::vector<T> yh = call(stablemax_fn<T>(), h);
      INFO("n = " << h.size() << " x[0] = " << h[0]);
      CHECK(variants_test::all_finite(yh));
      CHECK(variants_test::rel_err(yh, ref_stablemax(h)) <= bound<T>::rel);
      ld lse = 0;
      const std::vector<ld> lref = ref_log_stablemax(h, &lse);
      CHECK(log_err(call(log_stablemax_fn<T>(), h), lref, lse) <= bound<T>::log);
    }
  }
}

TEST_CASE("stablemax is not shift-invariant and never overflows", "[stablemax]") {
  shift_and_overflow<float>();
  shift_and_overflow<double>();
}

template <class T>
void special_values() {
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : {std::size_t(1), std::size_t(5), std::size_t(37), std::size_t(130)}) {
      INFO(type_name<T>() << " " << isa << " n = " << n);
      const std::vector<T> base = smax_test::normal<T>(n, 2.0, n);
      // NaN anywhere: all NaN (both functions).
      std::vector<T> x(base);
      x[n / 2] = nan;
      CHECK(variants_test::all_nan(call(stablemax_fn<T>(), x)));
      CHECK(variants_test::all_nan(call(log_stablemax_fn<T>(), x)));
      // +inf entries share the mass; log: -log(count) there, -inf elsewhere.
      x = base;
      x[n - 1] = inf;
      if (n > 2) x[1] = inf;
      const std::size_t count = n > 2 ? 2 : 1;
      std::vector<T> y = call(stablemax_fn<T>(), x), ly = call(log_stablemax_fn<T>(), x);
      for (std::size_t i = 0; i < n; ++i) {
        CHECK(y[i] == (x[i] == inf ? T(1.0 / count) : T(0)));
        CHECK(ly[i] == (x[i] == inf ? T(-std::log(double(count))) : -inf));
      }
      // -inf entries get 0 (log: -inf); the rest as without them.
      x = base;
      x[0] = -inf;
      y = call(stablemax_fn<T>(), x);
      ly = call(log_stablemax_fn<T>(), x);
      CHECK(y[0] == T(0));
      CHECK(ly[0] == -inf);
      if (n > 1) {
        CHECK(variants_test::rel_err(y, ref_stablemax(x)) <= bound<T>::rel);
        ld lse = 0;
        std::vector<ld> lref = ref_log_stablemax(x, &lse);
        lref[0] = -inf;
        std::vector<T> lyr(ly);
        lyr[0] = -inf;
        CHECK(log_err(std::vector<T>(lyr.begin() + 1, lyr.end()), std::vector<ld>(lref.begin() + 1, lref.end()),
                      lse) <= bound<T>::log);
      }
      // All -inf: all 0 (log: all -inf).
      x.assign(n, -inf);
      for (T v : call(stablemax_fn<T>(), x)) CHECK(v == T(0));
      for (T v : call(log_stablemax_fn<T>(), x)) CHECK(v == -inf);
    }
    // n = 0 touches nothing (null pointers allowed).
    smax::dynamic::stablemax(static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0);
    smax::dynamic::log_stablemax(static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0);
    smax::dynamic::stablemax_backward(static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
                                      static_cast<T*>(nullptr), 0);
  }
}

TEST_CASE("stablemax special values", "[stablemax]") {
  special_values<float>();
  special_values<double>();
}

TEST_CASE("stablemax_backward matches finite differences", "[stablemax][backward][accuracy]") {
  variants_test::worst_table table("stablemax_backward: worst error vs finite differences (double) / vs double (float)");
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : {std::size_t(1), std::size_t(2), std::size_t(7), std::size_t(33), std::size_t(70)}) {
      INFO(isa << " n = " << n);
      std::vector<double> x = smax_test::normal<double>(n, 2.0, 11 * n);
      for (auto& v : x)
        if (std::fabs(v) < 1e-3) v = 0.5;  // away from the kink of s'' at 0
      const std::vector<double> dy = smax_test::normal<double>(n, 1.0, 13 * n);
      std::vector<double> dx(n);
      smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), n);
      const std::vector<double> fd = variants_test::fd_vjp(
          [](const double* a, double* b, std::size_t m) { smax::dynamic::stablemax(a, b, m); }, x, dy);
      const double err = variants_test::grad_err(dx, fd);
      table.add("double " + isa, err);
      CHECK(err <= 1e-7);
      // In place (dx over dy, then over x).
      std::vector<double> d2(dy);
      smax::dynamic::stablemax_backward(x.data(), d2.data(), d2.data(), n);
      CHECK(smax_test::same_bits(d2, dx));
      std::vector<double> x2(x);
      smax::dynamic::stablemax_backward(x2.data(), dy.data(), x2.data(), n);
      CHECK(smax_test::same_bits(x2, dx));
      // float against the double result.
      std::vector<float> xf(x.begin(), x.end()), dyf(dy.begin(), dy.end()), dxf(n);
      std::vector<double> xd(xf.begin(), xf.end()), dyd(dyf.begin(), dyf.end()), dxd(n);
      smax::dynamic::stablemax_backward(xf.data(), dyf.data(), dxf.data(), n);
      smax::dynamic::stablemax_backward(xd.data(), dyd.data(), dxd.data(), n);
      const double ferr = variants_test::grad_err(std::vector<double>(dxf.begin(), dxf.end()), dxd);
      table.add("float " + isa, ferr);
      CHECK(ferr <= 2e-6);
    }
    // Huge inputs (the robust path) against finite differences in relative
    // terms, and the special values.
    {
      std::vector<double> x = {1e300, 3e299, -2.0, 5.0, -1e300};
      std::vector<double> dy = {0.3, -1.0, 2.0, 0.5, 1.5};
      std::vector<double> dx(5);
      smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), 5);
      // Analytic: y = s / S with S = 1.3e300 + 7 + ..., s'(x) / S.
      const ld S = s_of(1e300L) + s_of(3e299L) + s_of(-2.0L) + s_of(5.0L) + s_of(-1e300L);
      ld dot = 0;
      for (int i = 0; i < 5; ++i) dot += dy[i] * s_of(x[i]) / S;
      for (int i = 0; i < 5; ++i) {
        const ld sp = x[i] >= 0 ? 1.0L : s_of(x[i]) * s_of(x[i]);
        const ld want = sp / S * (dy[i] - dot);
        CHECK(std::fabs(dx[i] - want) <= 1e-14L * std::fabs(want) + 1e-320L);
      }
      CHECK(variants_test::all_finite(dx));
    }
    constexpr double inf = std::numeric_limits<double>::infinity();
    std::vector<double> x = {1.0, -2.0, 3.0}, dy = {1.0, 2.0, 3.0}, dx(3);
    x[1] = std::numeric_limits<double>::quiet_NaN();
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), 3);
    CHECK(variants_test::all_nan(dx));
    x = {1.0, inf, 3.0};
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), 3);
    for (double v : dx) CHECK(v == 0);
    x = {-inf, 0.5, -inf};
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), 3);
    CHECK(dx[0] == 0);
    CHECK(dx[2] == 0);
    CHECK(dx[1] == 0);  // a single finite entry: y = 1 whatever x is
    x = {-inf, -inf};
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), 2);
    CHECK(dx[0] == 0);
    CHECK(dx[1] == 0);
  }
}

// Rows holding a nonzero |dy| below 2^-60 (double 2^-500) take the scaled
// form (dy 2^K, the products kept where normal, the result scaled back):
// each dx against long double within c (s'(x_i) / S) (|dy_i| + sum s |dy|
// / S), the size of its own terms and of the dot's (so that cancelling
// entries are judged fairly), no subnormal output; the special values as
// on the plain path.
template <class T>
void tiny_dy_rows() {
  constexpr T tiny = std::numeric_limits<T>::min();
  const double c = sizeof(T) == 4 ? 1e-5 : 1e-13;
  const int deep = sizeof(T) == 4 ? -80 : -700;  // outputs above 1e-30
  const auto check_row = [&](const std::vector<T>& x, const std::vector<T>& dy) {
    const std::size_t n = x.size();
    std::vector<T> dx(n, T(-7));
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), n);
    ld S = 0, D = 0, Dabs = 0;
    for (std::size_t i = 0; i < n; ++i) S += s_of(x[i]);
    for (std::size_t i = 0; i < n; ++i) D += s_of(x[i]) * static_cast<ld>(dy[i]);
    for (std::size_t i = 0; i < n; ++i) Dabs += s_of(x[i]) * std::fabs(static_cast<ld>(dy[i]));
    const ld dot = D / S, dot_size = Dabs / S;
    std::size_t bad = 0, sub = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const ld sp = (x[i] >= 0 ? ld(1) : s_of(x[i]) * s_of(x[i])) / S;
      const ld want = sp * (static_cast<ld>(dy[i]) - dot);
      const ld room = c * sp * (std::fabs(static_cast<ld>(dy[i])) + dot_size) + ld(2) * tiny;
      bad += !(std::fabs(static_cast<ld>(dx[i]) - want) <= room);
      sub += dx[i] != T(0) && std::fabs(dx[i]) < tiny;
    }
    CHECK(bad == 0);
    CHECK(sub == 0);
  };
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(70), std::size_t(4100)}) {
      INFO(type_name<T>() << " " << isa << " n = " << n);
      const std::vector<T> x = smax_test::normal<T>(n, 20.0, 17 * n);
      std::vector<T> dy = smax_test::normal<T>(n, 1.0, 19 * n);
      // Every dy tiny (K > 0), then a few tiny among ordinary ones and zeros (K = 0).
      std::vector<T> deep_dy(dy);
      for (T& v : deep_dy) v = std::ldexp(v, deep);
      check_row(x, deep_dy);
      for (std::size_t i = 0; i < n; i += 3) dy[i] = i % 2 ? T(0) : std::ldexp(dy[i], sizeof(T) == 4 ? -100 : -1000);
      check_row(x, dy);
    }
    INFO(type_name<T>() << " " << isa);
    // A dot far below 2^digits min beside a largest |dy| of 1: the
    // difference taken by difference_normal_or_zero.
    const T t = std::ldexp(T(1), sizeof(T) == 4 ? -90 : -940);
    const T eps = std::numeric_limits<T>::epsilon();
    check_row({T(0), T(0), T(0), T(0), T(2), T(-3)}, {T(1), T(-1), t, -t * (1 - eps), T(0), T(0)});
    // NaN in dy or x, +inf in x: as on the plain path.
    std::vector<T> x = {T(1), T(-2), T(3)}, dy = {t, T(2), t}, dx(3);
    dy[1] = std::numeric_limits<T>::quiet_NaN();
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), 3);
    CHECK(variants_test::all_nan(dx));
    dy[1] = t;
    x[1] = std::numeric_limits<T>::quiet_NaN();
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), 3);
    CHECK(variants_test::all_nan(dx));
    x[1] = std::numeric_limits<T>::infinity();
    smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), 3);
    for (T v : dx) CHECK(v == 0);
  }
}
TEST_CASE("stablemax_backward on rows with a tiny dy (the scaled form)", "[stablemax][backward][accuracy]") {
  tiny_dy_rows<float>();
  tiny_dy_rows<double>();
}

}  // namespace
