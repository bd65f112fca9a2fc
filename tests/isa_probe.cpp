// One ISA's probe (see isa_probe.hpp). Compiled once per ISA with
// -DSMAX_TEST_ISA=<isa> and that ISA's flags; nothing here runs unless the
// CPU has the ISA.
#include "isa_probe.hpp"
#include "narrow_pair_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <smax/smax.hpp>

#ifndef SMAX_TEST_ISA
#error "compile with -DSMAX_TEST_ISA=<isa> (see tests/CMakeLists.txt)"
#endif

namespace smax_test {
namespace {

#define SMAX_TEST_SELECT(isa, arch, check) \
  namespace probe_##isa {                  \
  using selected = arch;                   \
  }
SMAX_ISAS(SMAX_TEST_SELECT)
#undef SMAX_TEST_SELECT

#define SMAX_TEST_CAT2(a, b) a##b
#define SMAX_TEST_CAT(a, b) SMAX_TEST_CAT2(a, b)
using Arch = SMAX_TEST_CAT(probe_, SMAX_TEST_ISA)::selected;

using ld = long double;

// ln2 = ln2_hi + ln2_mid + ln2_lo to about 2^-160: ln2_hi has 29 significant
// bits, so K * ln2_hi is exact in long double for |K| < 2^34, and
// x - K * ln2_hi is exact (Sterbenz) wherever it matters. This gives the
// reference e^x / 2^K = e^(x - K ln2) to about 2^-75 absolute for the whole
// extexp range of double (|K| < 2^21), where a plain expl(x) would overflow.
constexpr ld ln2_hi = 0x1.62e42ffp-1L;
constexpr ld ln2_mid = -0x1.718432a1b0e2634p-35L;
constexpr ld ln2_lo = 0x1.f97b57a079a1933ap-103L;

// One ulp of T at the magnitude of r (r a positive normal number of T).
template <class T>
ld ulp_of(ld r) {
  return std::ldexp(ld(1), std::ilogb(r) - (std::numeric_limits<T>::digits - 1));
}

template <class T>
struct sweep {
  using B = xsimd::batch<T, Arch>;
  static constexpr std::size_t W = B::size;
  exp_ulp& out;

  void fail(const char* what, double at) {
    if (out.failure[0] == 0) std::snprintf(out.failure, sizeof(out.failure), "%s (at %.9g)", what, at);
  }

  // Offsets d <= 0 covering [lo, 0]: a uniform grid plus log-uniform points
  // dense near 0 (where e^d changes binade slowly and rounding shows).
  static std::vector<T> offsets(std::size_t points, T lo, std::uint64_t seed) {
    std::vector<T> d;
    d.reserve(points + 2);
    const std::size_t grid = points / 2;
    for (std::size_t j = 0; j < grid; ++j) d.push_back(static_cast<T>(lo * (static_cast<ld>(j) / (grid - 1))));
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> u(std::log(1e-7), std::log(-static_cast<double>(lo)));
    while (d.size() < points) d.push_back(static_cast<T>(-std::exp(u(g))));
    d.push_back(T(0));
    return d;
  }

  template <class F>
  static void eval(const std::vector<T>& x, std::vector<T>& y, F&& f) {
    y.resize(x.size());
    std::size_t i = 0;
    for (; i + W <= x.size(); i += W) f(B::load_unaligned(x.data() + i)).store_unaligned(y.data() + i);
    if (i < x.size()) {
      T buf[W];
      for (std::size_t k = 0; k < W; ++k) buf[k] = i + k < x.size() ? x[i + k] : x[i];
      T res[W];
      f(B::load_unaligned(buf)).store_unaligned(res);
      for (std::size_t k = 0; i + k < x.size(); ++k) y[i + k] = res[k];
    }
  }

  // Worst ulp of e^(x - m) over x = m + d, d in [log(min normal), 0], plus
  // the edge cases.
  template <bool Split>
  double shifted(T m, std::size_t points) {
    const smax::detail::shifted_exp<Arch, T, Split> ex(m);
    const T lo = static_cast<T>(std::log(static_cast<ld>(std::numeric_limits<T>::min())));
    std::vector<T> x = offsets(points, lo, 42);
    for (T& v : x) v = m + v;
    std::vector<T> y;
    eval(x, y, ex);
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const ld ref = std::exp(static_cast<ld>(x[i]) - static_cast<ld>(m));
      // Below 4 * min the result may be flushed to exactly 0 (no subnormal
      // is ever formed: exp.hpp); a nonzero result there is still accurate.
      if (ref < 4 * static_cast<ld>(std::numeric_limits<T>::min())) {
        const bool ok = y[i] == T(0) || (ref >= static_cast<ld>(std::numeric_limits<T>::min()) &&
                                          std::fabs(static_cast<ld>(y[i]) - ref) <= 2 * ulp_of<T>(ref));
        if (!ok) fail("shifted_exp below 4 * min: neither 0 nor accurate", x[i]);
        continue;
      }
      worst = std::max(worst, static_cast<double>(std::fabs(static_cast<ld>(y[i]) - ref) / ulp_of<T>(ref)));
    }
    out.evaluations += x.size();

    // Edge cases: e^0 = 1 exactly; -inf -> 0; NaN -> NaN; far below m ->
    // exactly 0 (never a subnormal, negative, NaN or inf).
    const T inf = std::numeric_limits<T>::infinity();
    std::vector<T> e = {m, -inf, std::numeric_limits<T>::quiet_NaN(), m + 2 * lo, m + 20 * lo, -std::numeric_limits<T>::max()};
    eval(e, y, ex);
    if (y[0] != T(1)) fail("shifted_exp: e^(m - m) != 1", m);
    if (y[1] != T(0)) fail("shifted_exp: e^(-inf - m) != 0", m);
    if (!std::isnan(y[2])) fail("shifted_exp: NaN did not propagate", m);
    for (std::size_t i = 3; i < e.size(); ++i)
      if (y[i] != T(0) && e[i] < m) fail("shifted_exp far below m", e[i]);
    return worst;
  }

  // Worst ulp of p against e^x / 2^K over |x| <= split_limit, plus the
  // documented ranges of p and K.
  double extexp(std::size_t points) {
    const T L = smax::detail::exp_constants<T>::split_limit;
    std::vector<T> x = offsets(points, -L, 7);
    const std::size_t half = x.size() / 2;
    for (std::size_t i = 0; i < half; ++i) x[i] = 2 * x[i] + L;  // grid over [-L, L]
    for (std::size_t i = half; i < x.size(); i += 2) x[i] = -x[i];  // both signs near 0
    x.push_back(L);
    std::vector<T> p, K;
    eval(x, p, [](B v) {
      B pv, kv;
      smax::detail::extexp<Arch, T>(v, pv, kv);
      return pv;
    });
    eval(x, K, [](B v) {
      B pv, kv;
      smax::detail::extexp<Arch, T>(v, pv, kv);
      return kv;
    });
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const ld k = K[i];
      if (k != std::nearbyint(k)) fail("extexp: K not an integer", x[i]);
      if (!(p[i] >= T(0.7) && p[i] <= T(1.42))) fail("extexp: p outside [0.7, 1.42]", x[i]);
      const ld r = ((static_cast<ld>(x[i]) - k * ln2_hi) - k * ln2_mid) - k * ln2_lo;
      const ld ref = std::exp(r);
      worst = std::max(worst, static_cast<double>(std::fabs(static_cast<ld>(p[i]) - ref) / ulp_of<T>(ref)));
    }
    if (p.back() != p.back()) fail("extexp: NaN at split_limit", L);
    out.evaluations += x.size();
    return worst;
  }

  // Worst relative error of exp_ref<Arch, T, Acc>(lo, E, scale): scale *
  // e^x 2^-E over x = m + d, d in [log(min normal) / 2, 0] (many whole
  // periods of the range reduction, whose error repeats with d mod ln2),
  // E = round(m log2e).
  template <smax::detail::exp_accuracy Acc>
  double reduced(T m, T scale, std::size_t points) {
    const T E = std::nearbyint(m * T(1.4426950408889634));
    const smax::detail::exp_ref<Arch, T, Acc> ex(smax::detail::clamp_floor(m), E, scale);
    const T lo = static_cast<T>(std::log(static_cast<ld>(std::numeric_limits<T>::min())) / 2);
    std::vector<T> x = offsets(points, lo, 11);
    for (T& v : x) v = m + v;
    std::vector<T> y;
    eval(x, y, ex);
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const ld k = E;
      const ld r = ((static_cast<ld>(x[i]) - k * ln2_hi) - k * ln2_mid) - k * ln2_lo;
      const ld ref = static_cast<ld>(scale) * std::exp(r);
      worst = std::max(worst, static_cast<double>(std::fabs(static_cast<ld>(y[i]) / ref - 1)));
    }
    out.evaluations += x.size();
    return worst;
  }

  void run(std::size_t points) {
    using C = smax::detail::exp_constants<T>;
    const T L = C::split_limit;
    // The split form serves every m with |m| <= split_limit; values with few
    // significant bits keep the long-double reference x - m exact.
    for (T m : {T(0), T(1), T(-3.5), T(88.5), T(700.125), T(-1000.25), L, -L})
      out.shifted_split = std::max(out.shifted_split, shifted<true>(m, points));
    // The plain form serves |m| > split_limit (where x - m is exact for every
    // x whose e^(x - m) is not negligible) and m = 0.
    for (T m : {T(0), T(1.5) * L, T(-1.5) * L, T(1024) * L})
      out.shifted_plain = std::max(out.shifted_plain, shifted<false>(m, points));
    out.extexp = extexp(points);
    if constexpr (std::is_same<T, float>::value) {
      using smax::detail::exp_accuracy;
      for (T m : {T(0), T(-3.5), T(88.5), T(-1000.25), L, -L})
        for (T scale : {T(1), T(3.7e-5)}) {
          out.ref_bf16_rel = std::max(out.ref_bf16_rel, reduced<exp_accuracy::bf16_output>(m, scale, points / 4));
          out.ref_fp16_rel = std::max(out.ref_fp16_rel, reduced<exp_accuracy::fp16_output>(m, scale, points / 4));
        }
    }
  }
};

template <class T>
exp_ulp measure(std::size_t points) {
  exp_ulp r;
  sweep<T>{r}.run(std::max<std::size_t>(points, 16));
  return r;
}

template <class T>
void softmax_default(const T* x, T* y, std::size_t n, smax::algorithm a) {
  smax::softmax(x, y, n, a);
}
template <class T>
void softmax_tag(const T* x, T* y, std::size_t n, smax::algorithm a) {
  smax::softmax(Arch{}, x, y, n, a);
}
template <class T>
void log_softmax_default(const T* x, T* y, std::size_t n) {
  smax::log_softmax(x, y, n);
}
template <class T>
void log_softmax_tag(const T* x, T* y, std::size_t n) {
  smax::log_softmax(Arch{}, x, y, n);
}

long narrow_pair_mismatches(std::size_t vectors) { return narrow_pair_check<Arch>(vectors); }

template <class T, bool NonnegFinite>
long mul_term_violations_of(std::size_t vectors) {
  using B = xsimd::batch<T, Arch>;
  constexpr std::size_t W = B::size;
  constexpr int lowest = std::numeric_limits<T>::min_exponent - 1;  // min = 2^lowest
  std::mt19937_64 g(vectors * 7 + W + sizeof(T));
  std::uniform_real_distribution<double> unit(1.0, 2.0);
  std::uniform_int_distribution<int> a_exp(lowest, std::numeric_limits<T>::max_exponent - 1);
  // t: near the bound of a small a, or anywhere up to 2^64
  std::uniform_int_distribution<int> t_exp(lowest, 64), which(0, 15);
  const T tiny = std::numeric_limits<T>::min(), inf = std::numeric_limits<T>::infinity();
  alignas(64) T a[W], t[W], r[W];
  long bad = 0;
  for (std::size_t v = 0; v < vectors; ++v) {
    for (std::size_t j = 0; j < W; ++j) {
      const int k = which(g);
      T av = static_cast<T>(std::ldexp(unit(g), a_exp(g)));
      if (k == 0) av = T(0);
      if (k == 5) av = -T(0);
      if (k == 6) av = static_cast<T>(std::ldexp(unit(g) - 1.0, lowest));  // subnormal (or 0)
      if (k == 1) av = NonnegFinite ? T(1) : -inf;
      if (!NonnegFinite && (k & 2)) av = -av;  // (k = 6: a negative subnormal)
      // t: 0, or a normal number, often chosen so that a t lies within a
      // few binades of the smallest normal number
      T tv = static_cast<T>(std::ldexp(unit(g), t_exp(g)));
      if (k == 1 || k == 4) tv = T(0);
      if (k >= 8 && av != T(0) && std::isfinite(av)) {
        const int e = std::ilogb(av), want = lowest - e + (k - 11);
        if (want >= lowest && want <= 64) tv = static_cast<T>(std::ldexp(unit(g), want));
      }
      a[j] = av;
      t[j] = tv;
    }
    smax::detail::mul_term_normal<Arch, T, NonnegFinite>(B::load_aligned(a), B::load_aligned(t)).store_aligned(r);
    for (std::size_t j = 0; j < W; ++j) {
      // (the product in T is the rounded one; in long double, exact for
      // float and within 2^-63 relative for double)
      const ld exact = static_cast<ld>(a[j]) * static_cast<ld>(t[j]);
      bool ok;
      const bool sub = a[j] != T(0) && std::fabs(a[j]) < tiny;
      if (std::isinf(a[j]) && t[j] == T(0))
        ok = r[j] == T(0) && !std::signbit(r[j]);
      else if (a[j] == T(0))  // +-0: +0 beside t < 2
        ok = r[j] == T(0) && (t[j] >= T(2) || !std::signbit(r[j]));
      else if (sub && r[j] != T(0))  // a subnormal input: kept only beside t >= 1
        ok = t[j] >= T(1) && r[j] == a[j] * t[j];
      else if (r[j] == T(0))
        ok = std::fabs(exact) < (smax::detail::mul_term_by_bits_v<Arch, T> ? ld(1.125) : ld(2)) * static_cast<ld>(tiny) *
                                    (1 + 0x1p-60L);
      else
        ok = r[j] == a[j] * t[j] && std::fabs(r[j]) >= tiny;
      bad += !ok;
    }
  }
  return bad;
}

long mul_term_normal_violations(std::size_t vectors) {
  return mul_term_violations_of<float, false>(vectors) + mul_term_violations_of<float, true>(vectors) +
         mul_term_violations_of<double, false>(vectors) + mul_term_violations_of<double, true>(vectors);
}

}  // namespace

const isa_probe& SMAX_TEST_CAT(isa_probe_, SMAX_TEST_ISA)() {
  static const isa_probe p = {xsimd::default_arch::name(),
                              &measure<float>,
                              &measure<double>,
                              &softmax_default<float>,
                              &softmax_tag<float>,
                              &softmax_default<double>,
                              &softmax_tag<double>,
                              &log_softmax_default<float>,
                              &log_softmax_tag<float>,
                              &log_softmax_default<double>,
                              &log_softmax_tag<double>,
                              &narrow_pair_mismatches,
                              &mul_term_normal_violations};
  return p;
}

}  // namespace smax_test
