// smax — stablemax and log_stablemax (Prieto et al. 2025, "Grokking at the
// edge of numerical stability"): s(x) = x + 1 for x >= 0, 1 / (1 - x) for
// x < 0, y_i = s(x_i) / sum_j s(x_j). s is positive and increasing, but the
// map is not shift-invariant, so nothing is max-subtracted.
//
// Out of cache the fast path reads x twice and writes y once: pass 1 sums
// s(x) 2^k (per-lane blocks, compensated: error flat in n; the lift 2^k,
// k = 32 float, 64 double, keeps 2^k / (1 - x) normal for every finite x,
// free with a fused multiply-add: the same bits, scaled, as s(x) where
// that is normal); pass 2 writes s(x) / sum with one division (x < 0:
// (1/sum) / (1 - x); x >= 0: (x + 1) * (1/sum)), +0 where the quotient
// would be below the normal range (never formed; SSE2 chooses per row).
// It is exact to rounding while the sum lies in [sum_lo, sum_hi]: below sum_hi no partial
// sum overflowed and 1/sum is a normal number; above sum_lo every s(x)
// below 2^-26 sum has an output below 1e-30 (the accuracy floor).
// Anything else (NaN, +inf, sums beyond the range: |x| near FLT_MAX, or
// every x hugely negative) takes the robust path: the ratios
// r_i = s(x_i) / s(m) in (0, 1] (m = max x), computed without overflow,
// summed (between 1 and n), then r_i / sum r.
#pragma once

#include <cmath>
#include <limits>

#include "log.hpp"
#include "loops.hpp"
#include "pair_loops.hpp"
#include "softmax.hpp"

namespace smax {
namespace detail {

// (float / double)
template <class T>
struct stablemax_limits {
  static constexpr bool f32 = std::is_same<T, float>::value;
  static constexpr double sum_lo = f32 ? 0x1p-26 : 0x1p-922;
  static constexpr double sum_hi = f32 ? 0x1p100 : 0x1p1000;
  // A pass 1 that sums s(x) 2^lift_exp (float: 2^32 / (1 - x) >= 2^-96)
  // takes lifted_sum_hi for sum_hi: the lifted sum then stays below 2^122
  // (double: 2^994).
  static constexpr int lift_exp = f32 ? 32 : 64;
  static constexpr double lifted_sum_hi = f32 ? 0x1p90 : 0x1p930;
  // The least nonzero |dy| that stablemax_backward's plain form takes
  // (2^-60, double 2^-500): beside its lifted s(x) >= 2^-43 (double
  // 2^-424; backward_lift_exp) every product s(x) dy is 0 or a multiple of
  // the smallest normal number, and so is every lane sum; dy / 2 is normal.
  // A row with a smaller one takes stablemax_backward_careful.
  static constexpr double dy_floor = f32 ? 0x1p-60 : 0x1p-500;
  // stablemax_backward's pass 1 sums s(x) 2^backward_lift_exp: 2^85 / (1 -
  // x) >= 2^-43 (double 2^600 / (1 - x) >= 2^-424) for every finite x, so
  // that beside dy_floor every product is 0 or a multiple of the smallest
  // normal number. (Rows with x beyond 2^43, double 2^424, or a dot beyond
  // about that, overflow there and take the careful form.)
  static constexpr int backward_lift_exp = f32 ? 85 : 600;
};

// lifted 2^-lift where that lies in [lo, hi], else -1, judged before the
// unlift so that no subnormal double is formed (double rows of tiny sums).
inline double unlift_in_range(double lifted, int lift, double lo, double hi) noexcept {
  if (!(lifted - lifted == 0 && lifted >= std::ldexp(lo, lift) && lifted <= std::ldexp(hi, lift))) return -1.0;
  return std::ldexp(lifted, -lift);
}
// a 2^e / b (a finite, b > 0 finite, e >= 0), or 0 where it would lie
// below 2^-1020: no subnormal double formed (a mean of tiny sums).
inline double quotient_normal_or_zero(double a, double b, int e = 0) noexcept {
  if (a == 0 || std::ilogb(a) - std::ilogb(b) + e < -1020) return 0.0;
  // (a 2^e can overflow where (a / b) 2^e does not: the scale split there;
  // found by fuzz_variants, double, the careful form's D 2^1021 beside
  // dy = DBL_MAX: the mean went to -inf, clamped, and dx = 0 for -0.03 max)
  const int e1 = std::min(e, 1000 - std::ilogb(a));
  return std::ldexp(std::ldexp(a, e1) / b, e - e1);
}

// s(x); NaN stays NaN, s(-inf) = 0, s(+inf) = +inf.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> stable_s(xsimd::batch<T, A> v) noexcept {
  using B = xsimd::batch<T, A>;
  const B one(T(1));
  return xsimd::select(v >= B(T(0)), v + one, div_<A, T>(one, one - v));
}

// s(x) 2^Lift, normal for every finite x (2^k / (1 - x) >= 2^(k - 128) for
// float) unless it overflows; the same bits as s(x) scaled wherever s(x)
// is normal (fma(x, c, c) rounds (x + 1) c once, c a power of two).
template <class A, class T, int Lift = stablemax_limits<T>::lift_exp>
SMAX_INLINE xsimd::batch<T, A> stable_s_lifted(xsimd::batch<T, A> v) noexcept {
  using B = xsimd::batch<T, A>;
  if constexpr (Lift == 0) {
    return stable_s<A>(v);
  } else {
    const B c(std::ldexp(T(1), Lift));
    return xsimd::select(v >= B(T(0)), xsimd::fma(v, c, c), div_<A, T>(c, B(T(1)) - v));
  }
}

// SSE2, with neither a blend nor a fused multiply-add, chooses pass 2 per
// row (its guard cost 1.17x, AMD EPYC Zen 5, 2026-12-05): pass 1 takes
// s(x) unlifted as max(x + 1, 1 / min(1 + |x|, 2^125)) (double 2^1021;
// s(x) bit for bit down to x = -2^125: x + 1 < 1 / (1 - x) for x < 0,
// 1 / (1 + x) <= x + 1 for x >= 0, and rounding keeps the order; beyond,
// 2^-125 for s(x), a change below 2^-99 of the sum) and keeps the largest
// 1 + |x|; the row takes the unguarded quotient where that is within the
// limit. As many instructions as the select it replaces (until 2026-12-07
// its s(x) was subnormal beyond -2^126).
template <class A>
constexpr bool stablemax_row_guard = is_x86_sse2_v<A> && !is_x86_avx_v<A>;

// The forward's lift (none on SSE2, above).
template <class A, class T>
constexpr int stablemax_lift = stablemax_row_guard<A> ? 0 : stablemax_limits<T>::lift_exp;

// f / d for d >= 1, or +0 where d exceeds `limit` (beyond it the quotient
// would lie below the normal range: normal_quotient_limit): that quotient
// is never formed. NaN stays NaN.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> div_normal(xsimd::batch<T, A> f, xsimd::batch<T, A> d, xsimd::batch<T, A> limit) noexcept {
  using B = xsimd::batch<T, A>;
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {  // (one masked division; NaN lanes divide)
    if constexpr (std::is_same<T, float>::value)
      return _mm512_maskz_div_ps(_mm512_cmp_ps_mask(d, limit, _CMP_NGT_UQ), f, d);
    else
      return _mm512_maskz_div_pd(_mm512_cmp_pd_mask(d, limit, _CMP_NGT_UQ), f, d);
  }
#endif
  return div_<A, T>(f, xsimd::select(d > limit, B(std::numeric_limits<T>::infinity()), d));
}

// The largest d for which f / d is normal (f > 0), or +inf where every
// finite d is.
template <class T>
T normal_quotient_limit(double f) noexcept {
  // (1 - 2^-20: below the rounding of f and of the limit itself)
  const double l = f / static_cast<double>(std::numeric_limits<T>::min()) * (1.0 - 0x1p-20);
  return l > static_cast<double>(std::numeric_limits<T>::max()) ? std::numeric_limits<T>::infinity()
                                                                : static_cast<T>(l);
}

// s(x) * f in one rounding for x < 0 (f / (1 - x)).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> stable_s_times(xsimd::batch<T, A> v, xsimd::batch<T, A> f) noexcept {
  using B = xsimd::batch<T, A>;
  const B one(T(1));
  return xsimd::select(v >= B(T(0)), (v + one) * f, div_<A, T>(f, one - v));
}

// The forward's pass 1: the sum of s(x) (summed lifted, returned
// unlifted), or a negative number where the fast path may not use it. x may
// be 16-bit (each vector widened as loaded: the sum of the widened row).
// With stablemax_row_guard, `widest` gets the largest 1 + |x|.
template <class A, class S>
double stablemax_fast_sum(const S* x, std::size_t n, compute_t<S>* widest = nullptr) noexcept {
  using T = compute_t<S>;
  using Lim = stablemax_limits<T>;
  using B = xsimd::batch<T, A>;
  constexpr int lift = stablemax_lift<A, T>;
  double lifted;
  if constexpr (stablemax_row_guard<A>) {
    // (2^125, double 2^1021: s(x) normal, and a row of such s(x) alone sums
    // below sum_lo, the robust path's)
    const B one(T(1)), cap(std::ldexp(T(1), std::numeric_limits<T>::max_exponent - 3));
    B w(one);
    lifted = sum_map<A>(x, static_cast<T*>(nullptr), n, [&w, one, cap](B v) {
      const B a = one + xsimd::abs(v);
      w = xsimd::max(w, a);
      return xsimd::max(v + one, div_<A, T>(one, xsimd::min(cap, a)));
    });
    if (widest) *widest = hmax<A>(w);
  } else {
    lifted = sum_map<A>(x, static_cast<T*>(nullptr), n, [](B v) { return stable_s_lifted<A, T, lift>(v); });
  }
  return unlift_in_range(lifted, lift, Lim::sum_lo, lift ? Lim::lifted_sum_hi : Lim::sum_hi);
}

// What the robust path found: NaN (then y is all NaN), +inf entries (they
// share), or m = max x and the sum of the ratios s(x_i) / s(m).
struct stablemax_scan {
  bool nan = false;
  std::size_t n_posinf = 0;
};

template <class T>
stablemax_scan stablemax_special(const T* x, std::size_t n) noexcept {
  constexpr T inf = std::numeric_limits<T>::infinity();
  stablemax_scan r;
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] != x[i]) {
      r.nan = true;
      return r;
    }
    r.n_posinf += (x[i] == inf);
  }
  return r;
}

// Calls f(ratio) with ratio(v) = s(v) / s(m) for m = max x finite:
//   m >= 0:  (v + 1) / (m + 1) for v >= 0,  1 / ((1 - v)(m + 1)) for v < 0
//   m < 0:   (1 - m) / (1 - v)
// Every form is in (0, 1], or +0 where it would lie below the normal range
// (an output far below 1e-30; never formed): no overflow for any finite x.
template <class A, class T, class F>
SMAX_INLINE void with_stable_ratio(T m, F&& f) {
  using B = xsimd::batch<T, A>;
  const B one(T(1)), zero(T(0));
  if (m >= T(0)) {
    // (1 / (m + 1) itself below the normal range: every v < 0 gives +0;
    // a ternary on m + 1, not on the quotient: clang evaluates both arms)
    const T mp1_t = m + T(1);
    const T inv_t = static_cast<T>(1.0 / std::min(static_cast<double>(mp1_t), static_cast<double>(T(1) / std::numeric_limits<T>::min())));
    const T inv_k = mp1_t > T(1) / std::numeric_limits<T>::min() ? T(0) : inv_t;
    const B mp1(mp1_t), inv_mp1(inv_k), small(mp1_t * std::numeric_limits<T>::min());
    const B limit(inv_k > T(0) ? normal_quotient_limit<T>(static_cast<double>(inv_k)) : T(0));
    // (1 + |x|, which is 1 - x where it is kept: the discarded lanes x >= 0
    // divided by 1 - x, a subnormal quotient beside a large x)
    f([=](B v) {
      const B up = v + one;
      return xsimd::select(v >= zero, div_<A, T>(xsimd::select(up >= small, up, zero), mp1),
                           div_normal<A, T>(inv_mp1, one + xsimd::abs(v), limit));
    });
  } else {
    const B omm(T(1) - m), limit(normal_quotient_limit<T>(static_cast<double>(T(1) - m)));
    f([=](B v) { return div_normal<A, T>(omm, one - v, limit); });
  }
}

template <class A, class T>
void stablemax_robust(const T* x, T* y, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  const stablemax_scan sc = stablemax_special(x, n);
  if (sc.nan || sc.n_posinf) return softmax_nonfinite(x, y, n, result_form::probabilities);  // NaN / +inf share
  const T m = reduce_max<A>(x, n);
  if (m == -std::numeric_limits<T>::infinity()) return fill(y, n, T(0));  // all -inf
  with_stable_ratio<A, T>(m, [&](auto ratio) {
    const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, ratio);
    const scale_normal<A, T> inv(static_cast<T>(1.0 / s));
    map<A>(x, y, n, [ratio, inv](B v) { return inv(ratio(v)); });
  });
}

// The forward's pass 2 as a function of x: s(x) / sum, given inv_t = 1 / sum
// of the fast path (one division; +0 where the quotient would lie below the
// normal range, never formed). One body for T arrays and for 16-bit x
// widened as loaded. Wide: for rows with 1 / sum below 2^-62 (a sum
// beyond 2^62, from some x beyond it), where the discarded lanes' (1/sum) /
// (1 - x) for a large positive x would be subnormal: those lanes divide by
// 1 + |x| instead, which the guard turns into +0 (not AVX-512, whose
// masked division never divides there).
template <class A, class T, bool Wide = false>
auto stablemax_quotient(T inv_t) noexcept {
  using B = xsimd::batch<T, A>;
  const B inv(inv_t), one(T(1));
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    // As many instructions as the unguarded form: x as an integer, at most
    // lowest's bits exactly where lowest <= x <= -0 (negative floats order
    // the other way as integers), selects the division (masked: other lanes
    // never divide); the rest get max(x + 1, 0) / sum, which is 0 for
    // x < -1 (-inf included). (1/sum) / (1 - x) is +0, never formed, where
    // 1 - x exceeds `limit`.
    using I = typename exp_constants<T>::int_type;
    using BI = xsimd::batch<I, A>;
    const T limit = normal_quotient_limit<T>(static_cast<double>(inv_t));
    const T lowest_t = static_cast<T>(1.0 - static_cast<double>(limit));  // (-inf for limit = inf)
    const BI lowest = xsimd::bitwise_cast<BI>(B(lowest_t == -std::numeric_limits<T>::infinity()
                                                    ? std::numeric_limits<T>::lowest() : lowest_t));
    const B zero(T(0));
    return [=](B v) {
      const BI xi = xsimd::bitwise_cast<BI>(v);
      const auto k = [&] {
        if constexpr (std::is_same<T, float>::value)
          return _mm512_cmple_epi32_mask(xi, lowest);
        else
          return _mm512_cmple_epi64_mask(xi, lowest);
      }();
      return div_where<A, T>(k, xsimd::max(v + one, zero) * inv, inv, one - v);
    };
  } else
#endif
#if defined(__AVX__)
  if constexpr (is_x86_avx_v<A> && !is_avx512_v<A>) {
    // One instruction more than the unguarded form: blends on sign bits, x's
    // own for the arm (-0 divides: 1/sum either way) and limit - (1 - x)'s
    // for a divisor of +inf beyond the limit.
    const B lim(normal_quotient_limit<T>(static_cast<double>(inv_t))), inf(std::numeric_limits<T>::infinity());
    return [=](B v) {
      const B d = Wide ? one + xsimd::abs(v) : one - v;
      if constexpr (std::is_same<T, float>::value)
        return B(_mm256_blendv_ps((v + one) * inv, div_<A, T>(inv, B(_mm256_blendv_ps(d, inf, lim - d))), v));
      else
        return B(_mm256_blendv_pd((v + one) * inv, div_<A, T>(inv, B(_mm256_blendv_pd(d, inf, lim - d))), v));
    };
  } else
#endif
  {
    const B lim(normal_quotient_limit<T>(static_cast<double>(inv_t)));
    return [=](B v) {
      const B d = Wide ? one + xsimd::abs(v) : one - v;
      return xsimd::select(v >= B(T(0)), (v + one) * inv, div_normal<A, T>(inv, d, lim));
    };
  }
}

// f(quotient): stablemax_quotient (Wide for 1 / sum below 2^-62), or with
// stablemax_row_guard the unguarded s(x) / sum where the row's largest
// 1 + |x| (`widest`) is within the limit, so that every quotient, kept or
// discarded, is normal.
template <class A, class T, class F>
SMAX_INLINE void with_stablemax_quotient(T inv_t, T widest, F&& f) {
  const bool wide = inv_t < T(0x1p-62);
  if constexpr (stablemax_row_guard<A>) {
    if (widest <= normal_quotient_limit<T>(static_cast<double>(inv_t))) {
      const xsimd::batch<T, A> inv(inv_t);
      return f([inv](xsimd::batch<T, A> v) { return stable_s_times<A>(v, inv); });
    }
  } else {
    (void)widest;
  }
  if constexpr (!is_avx512_v<A>)
    if (wide) return f(stablemax_quotient<A, T, true>(inv_t));
  f(stablemax_quotient<A, T>(inv_t));
}

template <class A, class T>
void stablemax(const T* x, T* y, std::size_t n) noexcept {
  if (n == 0) return;
  T widest = T(1);
  const double s = stablemax_fast_sum<A>(x, n, &widest);
  if (s < 0) return stablemax_robust<A>(x, y, n);
  with_stablemax_quotient<A>(static_cast<T>(1.0 / s), widest, [&](auto q) { map<A>(x, y, n, q); });
}

// log s(x) = log1p(x) for x >= 0, -log1p(-x) for x < 0; -inf at x = -inf.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> log_stable_s(xsimd::batch<T, A> v) noexcept {
  using B = xsimd::batch<T, A>;
  const B l = log1p_nonneg<A, T>(xsimd::abs(v));
  const B r = xsimd::select(v >= B(T(0)), l, -l);
  return xsimd::select(v == B(-std::numeric_limits<T>::infinity()), v, r);
}

// log_stablemax: y_i = log s(x_i) - log S, S = sum_j s(x_j), log S in
// double. Same two passes and the same robust path (where log S is
// log s(m) + log(sum of ratios)), unless the maximum m dominates the sum
// (S < 1.5 s(m)): then log s(x_i) and log S can nearly cancel, and log S,
// rounded on its own, would carry the rounding of S (relative 2^-53 of S,
// many ulp of a small log S: 13 ulp for x = [-2^-10] in float). That case
// writes log S = log s(m) + log1p(R), R = sum over j other than one
// maximum of s(x_j) / s(m) (accurate relative to itself: the maximum's own
// term is left out, not subtracted), and
//     y_i = (log s(x_i) - log s(m)) - log1p(R),
// where the first difference is 0 exactly at the maximum and both terms are
// non-positive resp. non-negative: no cancellation, error within ~3 ulp of
// max(|log s(x_i)|, |log S|). It costs three more passes over x (max, sum
// of ratios, count of maxima); inputs where one entry dominates are short
// or have one outlier.
template <class A, class T>
void log_stablemax_dominated(const T* x, T* y, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  const T m = reduce_max<A>(x, n);  // finite: the callers saw no NaN or inf, and a positive sum
  const B mv(m);
  double rest = 0;
  with_stable_ratio<A, T>(m, [&](auto ratio) {
    rest = sum_map<A>(x, static_cast<T*>(nullptr), n, [&](B v) { return xsimd::select(v < mv, ratio(v), B(T(0))); });
  });
  const double ties = sum_map<A>(x, static_cast<T*>(nullptr), n, [&](B v) { return xsimd::select(v == mv, B(T(1)), B(T(0))); });
  const B l1p(static_cast<T>(std::log1p(rest + (ties - 1.0))));
  // log s(m) by the same vector code as the map: the maximum's difference is 0.
  alignas(64) T lm[B::size];
  log_stable_s<A, T>(mv).store_aligned(lm);
  const B lmv(lm[0]);
  map<A>(x, y, n, [lmv, l1p](B v) { return (log_stable_s<A, T>(v) - lmv) - l1p; });
}

// log_stablemax's pass 1 on 16-bit x (widened as loaded), the float
// kernel's below step for step: log S where S is in the fast path's range
// and no entry dominates it. (The float kernel keeps its own copy: called
// from there, this form cost float log_stablemax at 64K about 5%, AMD EPYC
// Zen 5, 2026-12-06; code placement, not arithmetic.)
enum class log_stable_sum { in_range, dominated, out_of_range };

template <class A, class S>
SMAX_INLINE log_stable_sum log_stablemax_fast_lse(const S* x, std::size_t n, double& lse) noexcept {
  using T = compute_t<S>;
  using B = xsimd::batch<T, A>;
  using Lim = stablemax_limits<T>;
  B top(T(0));
  const double lifted = sum_map<A>(x, static_cast<T*>(nullptr), n, [&top](B v) {
    const B e = stable_s_lifted<A>(v);
    top = xsimd::max(top, e);
    return e;
  });
  const double s = unlift_in_range(lifted, Lim::lift_exp, Lim::sum_lo, Lim::lifted_sum_hi);
  if (s < 0) return log_stable_sum::out_of_range;
  if (!(1.5 * static_cast<double>(hmax<A>(top)) <= lifted)) return log_stable_sum::dominated;
  lse = std::log(s);
  return log_stable_sum::in_range;
}

template <class A, class T>
void log_stablemax(const T* x, T* y, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  using Lim = stablemax_limits<T>;
  if (n == 0) return;
  double lse;
  // Pass 1 also keeps the largest s(x) (an overestimate: tail padding reads
  // as x = 0), enough to tell that no entry dominates the sum; both lifted
  // as the forward's (no s(x) below the normal range).
  B top(T(0));
  const double lifted = sum_map<A>(x, static_cast<T*>(nullptr), n, [&top](B v) {
    const B e = stable_s_lifted<A>(v);
    top = xsimd::max(top, e);
    return e;
  });
  const double s = unlift_in_range(lifted, Lim::lift_exp, Lim::sum_lo, Lim::lifted_sum_hi);
  if (s >= 0) {
    if (!(1.5 * static_cast<double>(hmax<A>(top)) <= lifted)) return log_stablemax_dominated<A>(x, y, n);
    lse = std::log(s);
  } else {
    const stablemax_scan sc = stablemax_special(x, n);
    if (sc.nan || sc.n_posinf) return softmax_nonfinite(x, y, n, result_form::logs);
    const T m = reduce_max<A>(x, n);
    if (m == -std::numeric_limits<T>::infinity()) return fill(y, n, -std::numeric_limits<T>::infinity());
    double rs = 0;
    with_stable_ratio<A, T>(m, [&](auto ratio) { rs = sum_map<A>(x, static_cast<T*>(nullptr), n, ratio); });
    if (!(rs >= 1.5)) return log_stablemax_dominated<A>(x, y, n);
    const double md = static_cast<double>(m);
    lse = (md >= 0 ? std::log1p(md) : -std::log1p(-md)) + std::log(rs);
  }
  const B l(static_cast<T>(lse));
  map<A>(x, y, n, [l](B v) { return log_stable_s<A, T>(v) - l; });
}

// stablemax_backward: with y = s(x) / S, the vector-Jacobian product is
//     dx_k = s'(x_k) / S * (dy_k - sum_i dy_i y_i),
// s'(x) = 1 for x >= 0, s(x)^2 for x < 0 (continuous at 0). Pass 1 sums
// s(x) and dy s(x) together; pass 2 writes. The robust path works with the
// ratios r = s / s(m) as the forward does. Special values: NaN in x or dy
// gives NaN everywhere; a +inf in x gives dx = 0 (the limit: the output is
// saturated); all x = -inf gives dx = 0.
//
// Pass 1: s1 = sum f(x_i) and s2 = sum prod(f(x_i), dy_i) in one read.
// With StopAtTinyDy, false (s1, s2 unset) as soon as a nonzero |dy| below
// stablemax_limits' dy_floor is met, before any product of its vector.
// x and dy may be 16-bit (widened as loaded: the sums of the widened rows).
template <class A, bool StopAtTinyDy, class S, class F, class P>
SMAX_INLINE bool sum_and_products(const S* x, const S* dy, std::size_t n, F&& f, P&& prod, double& s1,
                                  double& s2) noexcept {
  using T = compute_t<S>;
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t block = 2 * W * loop_shape<A>::block_chunks;
  const B floor(static_cast<T>(stablemax_limits<T>::dy_floor));
  compensated<A, T> t1, t2;
  std::size_t i = 0;
  while (i + 2 * W <= n) {
    B a0(T(0)), a1(T(0)), b0(T(0)), b1(T(0));
    const std::size_t end = (n - i >= block) ? i + block : i + ((n - i) / (2 * W)) * (2 * W);
    for (; i < end; i += 2 * W) {
      const B d0 = load_as<A, T>(dy + i), d1 = load_as<A, T>(dy + i + W);
      if constexpr (StopAtTinyDy)
        if (any_tiny_nonzero<A>(d0, d1, floor)) return false;
      const B r0 = f(load_as<A, T>(x + i)), r1 = f(load_as<A, T>(x + i + W));
      a0 += r0;
      a1 += r1;
      b0 += prod(r0, d0);
      b1 += prod(r1, d1);
    }
    t1.add(a0 + a1);
    t2.add(b0 + b1);
  }
  B ra(T(0)), rb(T(0));
  for (; i + W <= n; i += W) {
    const B d = load_as<A, T>(dy + i);
    if constexpr (StopAtTinyDy)
      if (any_tiny_nonzero<A>(d, d, floor)) return false;
    const B r = f(load_as<A, T>(x + i));
    ra += r;
    rb += prod(r, d);
  }
  if (i < n) {
    const B d = load_as_partial<A, T>(dy + i, n - i, T(0));
    if constexpr (StopAtTinyDy)
      if (any_tiny_nonzero<A>(d, d, floor)) return false;
    const auto live = lane_index<A, T>() < B(static_cast<T>(n - i));
    const B r = xsimd::select(live, f(load_as_partial<A, T>(x + i, n - i, T(0))), B(T(0)));
    ra += r;
    rb += prod(r, d);
  }
  t1.add(ra);
  t2.add(rb);
  s1 = hsum<A>(t1.value());
  s2 = hsum<A>(t2.value());
  return true;
}
template <class A, class S, class F>
SMAX_INLINE void sum_and_dot(const S* x, const S* dy, std::size_t n, F&& f, double& s1, double& s2) noexcept {
  using B = xsimd::batch<compute_t<S>, A>;
  sum_and_products<A, false>(x, dy, n, f, [](B r, B d) { return r * d; }, s1, s2);
}

// m / 2 as T, m clamped to the finite range, +0 where m / 2 lies below the
// normal range (never formed): the rows' half means, the same bits as
// finite_mean<T>(m) * 0.5 elsewhere.
template <class T>
T half_mean_normal(double m) noexcept {
  const double big = static_cast<double>(std::numeric_limits<T>::max());
  return to_normal<T>((m > big ? big : m < -big ? -big : m) * 0.5);
}

// stablemax_backward where S and D are in range: dx = s'(x) / S * (dy - mean),
// mean = D / S (from stablemax_backward_sums), formed as 2 * (h * ...) with h = (dy - mean) / 2 (no
// overflow: |mean| <= max |dy|) and the small factors applied to h one at a
// time, never multiplied together first: s'(x) = s(x)^2 underflows for x
// below -2^63 (float) while s(x)^2 h may still be a normal number. One
// chain for every lane, ((h sv) / S) sv with sv = 1 / max(1 - x, 1): sv = 1
// for x >= 0 gives h / S exactly, and no lane divides by a 1 - x <= 0
// (the discarded quotients of a select were subnormal beside a large x).
// Checked (rows whose bound fails, stablemax_backward_sums): a vector with
// a nonzero |h| below hcut takes each product by mul_normal.
template <class A, class T, bool Checked = false>
auto stablemax_backward_term(double S, double mean, T hcut = T(0)) noexcept {
  using B = xsimd::batch<T, A>;
  const B one(T(1)), zero(T(0)), half(T(0.5)), two(T(2)), cut(hcut);
  const B invS(static_cast<T>(1.0 / S)), mean_half(half_mean_normal<T>(mean));
  return [=](B v, B g) {
    const B h = g * half - mean_half;
    const B sv = div_<A, T>(one, xsimd::max(one - v, one));
    if constexpr (Checked) {
      if (!xsimd::all((xsimd::abs(h) >= cut) | (h == zero)))
        return mul_normal<A, T>(mul_normal<A, T>(mul_normal<A, T>(h, sv), invS), sv) * two;
    }
    // (invS before the second s(x): h s(x)^2 alone can underflow where the
    // result is normal: double, S near 2^-539; found in review)
    return ((h * sv) * invS) * sv * two;
  };
}
template <class A, class T, bool Checked = false>
SMAX_FLATTEN void stablemax_backward_plain(const T* x, const T* dy, T* dx, std::size_t n, double S, double mean,
                                           T hcut = T(0)) noexcept {
  map_pairs<A>(x, dy, dx, n, stablemax_backward_term<A, T, Checked>(S, mean, hcut));
}

// S and D of stablemax_backward's pass 1: in_range where the plain form
// forms no subnormal on the row (below), careful elsewhere (a nonzero |dy|
// below dy_floor, where pass 1 stops; S or D out of range, NaN and inf
// included; a row whose pass 2 could form a product below the normal
// range). x and dy may be 16-bit.
//
// Pass 1 sums s(x) 2^backward_lift_exp and its products with dy (the same
// bits, scaled, as the unlifted sums wherever those are normal): every
// lifted s(x) is 0 (x = -inf) or at least 2^-43 (double 2^-424), so beside
// nonzero |dy| >= dy_floor every product is 0 or a multiple of the smallest
// normal number min, as is every lane sum; the discarded quotients of the
// lanes x >= 0 are at least that large too. It also keeps the largest
// 1 - x (a row holding -inf takes the largest finite one in a pass over x).
// Pass 2's products (h s(x)) invS s(x), h = dy / 2 - mean / 2, are normal
// where |h| s(x)^2 min(1 / S, 1) >= 4 min for every nonzero h. Nonzero |h|
// is at least hmin = min(|mean / 2| 2^-(digits + 1), dy_floor / 4) (dy_floor
// / 2 for a mean of 0): where dy / 2 and mean / 2 lie within a factor of 2
// of each other both are multiples of ulp(|mean / 2| / 2); elsewhere the
// difference exceeds half the larger. So the row check is, in binary
// exponents, hmin / (1 - x)_max^2 min(1 / S, 1) >= 4 min. Rows that fail
// it (a mask of -1e9 beside dy ~ 1 does) but whose 1 - x stays below
// 2^(max_exponent - 3), so that every s(x) is normal, are `checked`: pass
// 2 tests each vector's |h| against hcut, the least |h| the bound allows.
enum class stable_sums { in_range, checked, careful };
template <class T>
stable_sums stablemax_plain_products_normal(double S, T mean_half, T dmax, T& hcut) noexcept {
  using Lim = stablemax_limits<T>;
  constexpr int digits = std::numeric_limits<T>::digits;
  const int floor_exp = std::ilogb(Lim::dy_floor);
  const int h_exp = mean_half == T(0) ? floor_exp - 1
                                      : std::min(std::ilogb(mean_half) - digits - 1, floor_exp - 2);
  // (upper bounds of log2 (1 - x)_max and log2 S: ilogb + 1)
  const int d_exp = dmax > T(1) ? std::ilogb(dmax) + 1 : 0;
  const int s_exp = S > 1.0 ? std::ilogb(S) + 1 : 0;
  const int cut_exp = std::numeric_limits<T>::min_exponent + 1 + 2 * d_exp + s_exp;
  if (h_exp >= cut_exp) return stable_sums::in_range;
  if (!(dmax <= std::ldexp(T(1), std::numeric_limits<T>::max_exponent - 3))) return stable_sums::careful;
  hcut = std::ldexp(T(1), std::min(cut_exp, std::numeric_limits<T>::max_exponent - 1));
  return stable_sums::checked;
}
// The least x other than -inf (+inf where there is none; 0 counts in the
// partial vector's padding, harmless beside 1 - x >= 1).
template <class A, class S>
compute_t<S> least_finite(const S* x, std::size_t n) noexcept {
  using T = compute_t<S>;
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  const B inf(std::numeric_limits<T>::infinity()), ninf(-std::numeric_limits<T>::infinity());
  B m0(inf), m1(inf);
  std::size_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const B v0 = load_as<A, T>(x + i), v1 = load_as<A, T>(x + i + W);
    m0 = xsimd::min(m0, xsimd::select(v0 == ninf, inf, v0));
    m1 = xsimd::min(m1, xsimd::select(v1 == ninf, inf, v1));
  }
  for (; i < n; i += W) {
    const B v = n - i >= W ? load_as<A, T>(x + i) : load_as_partial<A, T>(x + i, n - i, T(0));
    m0 = xsimd::min(m0, xsimd::select(v == ninf, inf, v));
  }
  return -hmax<A>(-xsimd::min(m0, m1));
}
template <class A, class S>
stable_sums stablemax_backward_sums(const S* x, const S* dy, std::size_t n, double& s, double& mean,
                                    compute_t<S>& hcut) noexcept {
  using T = compute_t<S>;
  using B = xsimd::batch<T, A>;
  using Lim = stablemax_limits<T>;
  const B one(T(1)), zero(T(0)), lift(std::ldexp(T(1), Lim::backward_lift_exp));
  B dmax(T(1));
  const auto lifted_s = [&](B v) {
    if constexpr (stablemax_row_guard<A>) {
      // (SSE2, with neither a blend nor a fused multiply-add: max((x + 1) c,
      // c / (1 + |x|)) is s(x) c bit for bit, x + 1 < 1 / (1 - x) for x < 0
      // and 1 / (1 + x) <= x + 1 for x >= 0, rounding keeping the order;
      // 1 + |x| >= 1 - x is what it keeps)
      const B w = one + xsimd::abs(v);
      dmax = xsimd::max(dmax, w);
      return xsimd::max((v + one) * lift, div_<A, T>(lift, w));
    } else {
      const B w = one - v;
      dmax = xsimd::max(dmax, w);
      const B q = div_<A, T>(lift, w), p = xsimd::fma(v, lift, lift);
#if defined(__AVX__)
      // (AVX2: a blend on x's sign bit, no compare, which pays for the
      // step above; -0 divides: c / (1 + 0) = s(0) c)
      if constexpr (is_x86_avx_v<A> && !is_avx512_v<A>) {
        if constexpr (std::is_same<T, float>::value)
          return B(_mm256_blendv_ps(p, q, v));
        else
          return B(_mm256_blendv_pd(p, q, v));
      }
#endif
      return xsimd::select(v >= zero, p, q);
    }
  };
  double d;
  if (!sum_and_products<A, true>(x, dy, n, lifted_s, [](B r, B g) { return r * g; }, s, d))
    return stable_sums::careful;
  // (the mean from the lifted sums, whose lifts cancel)
  if (!(d - d == 0)) return stable_sums::careful;
  const double lifted = s;
  s = unlift_in_range(lifted, Lim::backward_lift_exp, Lim::sum_lo, Lim::sum_hi);
  if (s < 0) return stable_sums::careful;
  mean = quotient_normal_or_zero(d, lifted);
  T dm = hmax<A>(dmax);
  if (dm == std::numeric_limits<T>::infinity()) dm = T(1) - std::min(least_finite<A>(x, n), T(0));
  return stablemax_plain_products_normal<T>(s, half_mean_normal<T>(mean), dm, hcut);
}

// h / d for d >= 1 (+inf included), or +0 where |h / d| would lie below
// the normal range (never formed: |h| >= d min, d min exact, is the test).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> quotient_normal(xsimd::batch<T, A> h, xsimd::batch<T, A> d) noexcept {
  using B = xsimd::batch<T, A>;
  return div_<A, T>(xsimd::select(xsimd::abs(h) >= d * B(std::numeric_limits<T>::min()), h, B(T(0))), d);
}

// stablemax_backward on every finite row the plain form leaves (tiny dy, x
// far below 0 or above it, sums out of range, rows whose pass 2 could form
// a product below the normal range), on the ratios r = s(x) / s(m) in
// [min, 1] or +0 (m = max x, with_stable_ratio), R = sum r in [1, n], and
// dy scaled by 2^K (the largest |dy r| 2^K near 1, estimated from the
// exponents, and |dy| 2^K below 2^(max_exponent - 1): K < 0 drops what
// falls below the normal range, K > 0 is exact), so that sum dy r 2^K
// neither overflows nor, through mul_summable, forms a subnormal:
//     mean = (sum dy r) / R,  h = (dy - mean) / 2  (in 2^max(K, 0)),
//     x >= 0: dx = 2 h / (s(m) R);   x < 0: dx = 2 h s(x)^2 / (s(m) R),
// the latter as h / (1 - x) / (1 - x) / s(m) for m >= 0 (r s(x) would be
// 0 where s(m) is near the largest T though the result is normal: found
// by fuzz_variants, m = DBL_MAX, x = -1.6e6) and as (h / (1 - x)) r for
// m < 0. Every step is 0 or normal (quotient_normal, mul_normal), what a
// step drops is below min times the factors still to come (each at most
// 1), and the result is scaled back by 2^-max(K, 0), +0 below the normal
// range. Nothing written where dy holds NaN or inf (false).
template <class A, class T>
SMAX_FLATTEN bool stablemax_backward_careful(const T* x, const T* dy, T* dx, std::size_t n, T m) noexcept {
  using B = xsimd::batch<T, A>;
  // K from the largest |dy r|, not the largest |dy|: dy = FLT_MAX on
  // x = -1.7e31 (r = 2^-108) beside dy ~ 10 on x ~ 16 dropped the
  // dominant product, dx = -0.06 for -6474 (found by fuzz_variants, SSE2).
  // log2 s(x) lies within 1 of exponent(1 + |x|) (x >= 0) or of its
  // negation (x < 0); -inf lanes (r = 0) are left out.
  const B one(T(1)), zero(T(0)), neg_inf(-std::numeric_limits<T>::infinity());
  T G, E;
  B lowest(std::numeric_limits<T>::infinity());
  if (!largest_product_exponent<A, true>(x, dy, n, [=](B v) { return v > neg_inf; },
                                         [&](B v) {
                                           lowest = xsimd::min(lowest, v);
                                           const B ex = exponent_estimate<A, T>(one + xsimd::abs(v));
                                           return xsimd::select(v >= zero, ex, -ex);
                                         },
                                         G, E))
    return false;
  // (a ratio r below the normal range is +0, but dy r need not be: dy near
  // the largest T on x = -FLT_MAX; such rows add those products again,
  // formed as dy / (1 - x) / s(m) (m >= 0) or dy / (1 - x) (1 - m); found
  // by fuzz_variants, dy = -FLT_MAX: 2^-16 off)
  const double xmin = -static_cast<double>(hmax<A>(-lowest));
  const double least_ratio = m >= T(0) ? 1.0 / ((1.0 - xmin) * (1.0 + m)) : (1.0 - m) / (1.0 - xmin);
  const bool deep_ratios = xmin < 0 && !(least_ratio >= 4.0 * static_cast<double>(std::numeric_limits<T>::min()));
  const double log2_sm = m >= T(0) ? std::log2(1.0 + m) : -std::log2(1.0 - m);
  // (2^K normal: K in [min_exponent, max_exponent - 2], float [-125, 126];
  // |dy| 2^K below 2^(max_exponent - 1) on the lanes x > -inf; the -inf
  // lanes' dy, whose products are 0, neither sets the scale nor is scaled:
  // found in review, dy = DBL_MAX on x = -inf scaled the row's tiny
  // products away)
  constexpr int top = std::numeric_limits<T>::max_exponent - 2;
  const int K = G == T(0) ? 0
                          : static_cast<int>(std::max<double>(
                                std::numeric_limits<T>::min_exponent,
                                std::min<double>({std::ceil(log2_sm - static_cast<double>(E)), double(top),
                                                  double(top - std::max(std::ilogb(G), -top))})));
  const int Kout = std::max(K, 0);
  const B sums_scale(std::ldexp(T(1), K)), out_scale(std::ldexp(T(1), Kout));
  const B half(T(0.5)), two(T(2)), back(T(1 - Kout));
  with_stable_ratio<A, T>(m, [&](auto ratio) {
    double R, D;
    sum_and_products<A, false>(x, dy, n, ratio, [sums_scale, zero](B r, B g) {
      return mul_summable<A, T>(r, mul_normal<A, T>(xsimd::select(r > zero, g, zero), sums_scale));
    }, R, D);
    if (deep_ratios) {
      // (terms at least 2^mantissa_bits min: multiples of min, as
      // mul_summable's; the tail's padding lanes, x = 0, are not deep)
      const B sm(m >= T(0) ? m + T(1) : T(1)), omm(m >= T(0) ? T(1) : T(1) - m);
      const B summable(std::ldexp(std::numeric_limits<T>::min(), exp_constants<T>::mantissa_bits));
      double unused, deep_sum;
      two_sums_of_pairs<A>(x, dy, n, [&](B v, B g, B&, B& acc) {
        const auto deep = (ratio(v) == zero) & (v < zero) & (v > neg_inf);
        if (!xsimd::any(deep)) return;
        // (1 - x on the deep lanes only: quotient_normal forms d min, a
        // subnormal for d below 1; found in review)
        const B w = xsimd::select(deep, one - v, one);
        const B t = quotient_normal<A, T>(quotient_normal<A, T>(mul_normal<A, T>(g, sums_scale), w), sm);
        const B u = m >= T(0) ? t : mul_normal<A, T>(t, omm);
        acc += xsimd::select(deep & (xsimd::abs(u) >= summable), u, zero);
      }, unused, deep_sum);
      D += deep_sum;
    }
    const T mh = half_mean_normal<T>(quotient_normal_or_zero(D, R, Kout - K));
    const B mean_half(mh), invR(static_cast<T>(1.0 / R));
    const bool plain_difference = difference_always_normal(mh);
    const auto h_of = [=](B g) {
      const B gh = mul_normal<A, T>(g * out_scale, half);
      return plain_difference ? gh - mean_half : difference_normal_or_zero<A, T>(gh, mean_half);
    };
    const auto finish = [=](B q) { return Kout == 0 ? q * two : ldexp_flush<A, T>(q, back); };
    if (m >= T(0)) {
      const B sm(m + T(1));
      map_pairs<A>(x, dy, dx, n, [=](B v, B g) {
        const B w = xsimd::select(v >= zero, one, one - v);
        const B q = quotient_normal<A, T>(quotient_normal<A, T>(quotient_normal<A, T>(h_of(xsimd::select(v > neg_inf, g, zero)), w), w), sm);
        return finish(mul_normal<A, T>(q, invR));
      });
    } else {
      map_pairs<A>(x, dy, dx, n, [=](B v, B g) {
        const B q = mul_normal<A, T>(quotient_normal<A, T>(h_of(xsimd::select(v > neg_inf, g, zero)), one - v), ratio(v));
        return finish(mul_normal<A, T>(q, invR));
      });
    }
  });
  return true;
}

// stablemax_backward on a row whose dy holds an infinity (x finite): the
// IEEE results of the ratios form, r = s / s(m) <= 1 with R = sum r: mean
// = (sum dy r) / R and s'(x) / S = 1 / (s(m) R) for x >= 0, r s(x) / R
// for x < 0, the sums on r 2^-k with 2^k > n, h divided by s(m) and by R
// in turn (1 / S is never formed).
template <class A, class T>
SMAX_FLATTEN void stablemax_backward_ratios(const T* x, const T* dy, T* dx, std::size_t n, T m) noexcept {
  using B = xsimd::batch<T, A>;
  const B one(T(1)), zero(T(0)), half(T(0.5)), two(T(2));
  const double scale = std::ldexp(1.0, -std::ilogb(static_cast<double>(n)) - 1);
  with_stable_ratio<A, T>(m, [&](auto ratio) {
    double R, DR;
    const B scb(static_cast<T>(scale));
    sum_and_dot<A>(x, dy, n, [&](B v) { return ratio(v) * scb; }, R, DR);
    const B mean_half(finite_mean<T>(DR / R) * T(0.5)), Rb(static_cast<T>(R / scale));
    const B sm(m >= T(0) ? m + T(1) : T(1));
    if (m >= T(0)) {
      // x < 0: r h / (1 - x) with r = 1 / ((1 - x) s(m)), applied as
      // divisions one at a time: r itself is subnormal (precision lost) when
      // s(m) is near the largest T (found by fuzz_variants: m = DBL_MAX,
      // x = -1.6e6 lost 3 digits).
      map_pairs<A>(x, dy, dx, n, [=](B v, B g) {
        const B h = g * half - mean_half;
        const B pos = div_<A, T>(div_<A, T>(h, sm), Rb);
        const B w = one - v;
        const B neg = div_<A, T>(div_<A, T>(div_<A, T>(div_<A, T>(h, w), w), sm), Rb);
        return xsimd::select(v >= zero, pos, neg) * two;
      });
    } else {
      // Every x < 0: r = (1 - m) / (1 - x) is in (0, 1], never subnormal
      // unless the result is negligible.
      map_pairs<A>(x, dy, dx, n, [=](B v, B g) {
        const B h = g * half - mean_half;
        return div_<A, T>(ratio(v) * div_<A, T>(h, one - v), Rb) * two;
      });
    }
  });
}

template <class A, class T>
void stablemax_backward(const T* x, const T* dy, T* dx, std::size_t n) noexcept {
  if (n == 0) return;
  double S, mean;
  T hcut;
  const stable_sums sums = stablemax_backward_sums<A>(x, dy, n, S, mean, hcut);
  if (sums == stable_sums::in_range) return stablemax_backward_plain<A>(x, dy, dx, n, S, mean);
  if (sums == stable_sums::checked) return stablemax_backward_plain<A, T, true>(x, dy, dx, n, S, mean, hcut);
  const stablemax_scan sc = stablemax_special(x, n);
  // NaN anywhere (x or dy) wins over every other rule, as in the forward.
  if (sc.nan || stablemax_special(dy, n).nan) return fill(dx, n, std::numeric_limits<T>::quiet_NaN());
  if (sc.n_posinf) return fill(dx, n, T(0));
  const T m = reduce_max<A>(x, n);
  if (m == -std::numeric_limits<T>::infinity()) return fill(dx, n, T(0));
  if (!stablemax_backward_careful<A>(x, dy, dx, n, m)) stablemax_backward_ratios<A>(x, dy, dx, n, m);
}

}  // namespace detail
}  // namespace smax
