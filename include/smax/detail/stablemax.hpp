// smax — stablemax and log_stablemax (Prieto et al. 2025, "Grokking at the
// edge of numerical stability"): s(x) = x + 1 for x >= 0, 1 / (1 - x) for
// x < 0, y_i = s(x_i) / sum_j s(x_j). s is positive and increasing, but the
// map is not shift-invariant, so nothing is max-subtracted.
//
// Out of cache the fast path reads x twice and writes y once: pass 1 sums
// s(x) 2^k (per-lane blocks, compensated: error flat in n; the lift 2^k,
// k = 32 float, 64 double, keeps 2^k / (1 - x) normal for every finite x
// at no cost: the same bits, scaled, as s(x) where that is normal); pass 2
// writes s(x) / sum with one division (x < 0: (1/sum) / (1 - x); x >= 0:
// (x + 1) * (1/sum)), +0 where the quotient would be below the normal
// range (never formed; not on SSE2: docs/guarantees.md). It is exact to
// rounding while the sum lies in [sum_lo, sum_hi]: below sum_hi no partial
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
  // (2^-60, double 2^-500): beside s(x) >= 2^-43 (double 2^-470, x above
  // -2^43) every product s(x) dy is 0 or a multiple of the smallest normal
  // number, and so is every lane sum; dy / 2 is normal. A row with a
  // smaller one takes stablemax_backward_scaled.
  static constexpr double dy_floor = f32 ? 0x1p-60 : 0x1p-500;
};

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

// The forward's lift: none without a fused multiply-add (SSE2), where
// fma(x, c, c) is two instructions, and pass 2 is not guarded either.
template <class A, class T>
constexpr int stablemax_lift = has_fma_v<A> ? stablemax_limits<T>::lift_exp : 0;

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
template <class A, class S>
double stablemax_fast_sum(const S* x, std::size_t n) noexcept {
  using T = compute_t<S>;
  using Lim = stablemax_limits<T>;
  using B = xsimd::batch<T, A>;
  constexpr int lift = stablemax_lift<A, T>;
  const double lifted =
      sum_map<A>(x, static_cast<T*>(nullptr), n, [](B v) { return stable_s_lifted<A, T, lift>(v); });
  const double s = std::ldexp(lifted, -lift);
  return (s >= Lim::sum_lo && s <= (lift ? Lim::lifted_sum_hi : Lim::sum_hi)) ? s : -1.0;
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
    f([=](B v) {
      const B up = v + one;
      return xsimd::select(v >= zero, div_<A, T>(xsimd::select(up >= small, up, zero), mp1),
                           div_normal<A, T>(inv_mp1, one - v, limit));
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
// widened as loaded.
template <class A, class T>
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
      const B d = one - v;
      if constexpr (std::is_same<T, float>::value)
        return B(_mm256_blendv_ps((v + one) * inv, div_<A, T>(inv, B(_mm256_blendv_ps(d, inf, lim - d))), v));
      else
        return B(_mm256_blendv_pd((v + one) * inv, div_<A, T>(inv, B(_mm256_blendv_pd(d, inf, lim - d))), v));
    };
  } else
#endif
  if constexpr (is_x86_sse2_v<A> && !is_x86_avx_v<A>) {
    // Open (docs/guarantees.md): without a blend, the guard (a compare, an
    // and and a max) cost SSE2 1.17x here (AMD EPYC Zen 5, 2026-12-05);
    // pass 1 forms 1 / (1 - x) below the normal range for |x| > 2^126.
    return [inv](B v) { return stable_s_times<A>(v, inv); };
  } else {
    const B lim(normal_quotient_limit<T>(static_cast<double>(inv_t)));
    return [=](B v) { return xsimd::select(v >= B(T(0)), (v + one) * inv, div_normal<A, T>(inv, one - v, lim)); };
  }
}

template <class A, class T>
void stablemax(const T* x, T* y, std::size_t n) noexcept {
  if (n == 0) return;
  const double s = stablemax_fast_sum<A>(x, n);
  if (s < 0) return stablemax_robust<A>(x, y, n);
  map<A>(x, y, n, stablemax_quotient<A>(static_cast<T>(1.0 / s)));
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
  const double s = std::ldexp(lifted, -Lim::lift_exp);
  if (!(s >= Lim::sum_lo && s <= Lim::lifted_sum_hi)) return log_stable_sum::out_of_range;
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
  const double s = std::ldexp(lifted, -Lim::lift_exp);
  if (s >= Lim::sum_lo && s <= Lim::lifted_sum_hi) {
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
// mean = D / S, formed as 2 * (h * ...) with h = (dy - mean) / 2 (no
// overflow: |mean| <= max |dy|) and the small factors applied to h one at a
// time, never multiplied together first: s'(x) = s(x)^2 underflows for x
// below -2^63 (float) while s(x)^2 h may still be a normal number.
template <class A, class T>
auto stablemax_backward_term(double S, double D) noexcept {
  using B = xsimd::batch<T, A>;
  const B one(T(1)), zero(T(0)), half(T(0.5)), two(T(2));
  const B invS(static_cast<T>(1.0 / S)), mean_half(half_mean_normal<T>(D / S));
  return [=](B v, B g) {
    const B h = g * half - mean_half;
    const B sv = div_<A, T>(one, one - v);
    // x < 0: invS before the second s(x): h s(x)^2 alone can underflow
    // where the result is normal (double, S near 2^-539; found in review).
    return xsimd::select(v >= zero, h * invS, ((h * sv) * invS) * sv) * two;
  };
}
template <class A, class T>
SMAX_FLATTEN void stablemax_backward_plain(const T* x, const T* dy, T* dx, std::size_t n, double S, double D) noexcept {
  map_pairs<A>(x, dy, dx, n, stablemax_backward_term<A, T>(S, D));
}

// S and D of stablemax_backward's pass 1: in_range where they are in the
// plain form's range, tiny_dy where the row holds a nonzero |dy| below
// dy_floor (pass 1 stopped there). x and dy may be 16-bit.
enum class stable_sums { in_range, tiny_dy, out_of_range };
template <class A, class S>
stable_sums stablemax_backward_sums(const S* x, const S* dy, std::size_t n, double& s, double& d) noexcept {
  using T = compute_t<S>;
  using B = xsimd::batch<T, A>;
  using Lim = stablemax_limits<T>;
  // (s(x) and its products are formed below the normal range for x beyond
  // -2^126, and the ratios beyond +2^126: open, docs/guarantees.md)
  if (!sum_and_products<A, true>(x, dy, n, [](B v) { return stable_s<A>(v); }, [](B r, B g) { return r * g; }, s, d))
    return stable_sums::tiny_dy;
  return s >= Lim::sum_lo && s <= Lim::sum_hi && d - d == 0 ? stable_sums::in_range : stable_sums::out_of_range;
}

// stablemax_backward on a row with a nonzero |dy| below dy_floor: dy scaled
// by 2^K (K >= 0, the largest |dy| 2^K at least 1; exact), the products of
// pass 1 kept where they are multiples of the smallest normal number
// (mul_summable: those dropped are below 2^-102 against a largest |dy| of
// 1), each product of pass 2 kept where normal (mul_normal) and the result
// scaled back by 2^-K, +0 below the normal range: no subnormal is formed.
// False (nothing written) where S or the dot leaves the plain range or dy
// holds NaN or inf: the ratios path then.
template <class A, class T>
SMAX_FLATTEN bool stablemax_backward_scaled(const T* x, const T* dy, T* dx, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  using Lim = stablemax_limits<T>;
  T hi, lo;
  reduce_max_min<A>(dy, n, hi, lo);
  const T M = std::max(hi, -lo);
  if (!(M <= std::numeric_limits<T>::max()) || M == T(0)) return false;
  // (2^K normal: K <= 126, double 1022, reached by subnormal dy alone)
  const int K = M >= T(1) ? 0 : std::min(-std::ilogb(M), std::numeric_limits<T>::max_exponent - 2);
  const B up(std::ldexp(T(1), K)), half(T(0.5)), one(T(1)), zero(T(0)), two(T(2));
  double S, D;
  sum_and_products<A, false>(x, dy, n, [](B v) { return stable_s<A>(v); },
                             [up](B r, B g) { return mul_summable<A, T>(r, g * up); }, S, D);
  if (!(S >= Lim::sum_lo && S <= Lim::sum_hi && D - D == 0)) return false;
  const T mh = half_mean_normal<T>(D / S);
  const B invS(static_cast<T>(1.0 / S)), mean_half(mh), back(T(1 - K));
  const auto term = [=](B h, B v) {
    const B sv = div_<A, T>(one, one - v);
    const B r = xsimd::select(v >= zero, mul_normal<A, T>(h, invS),
                              mul_normal<A, T>(mul_normal<A, T>(mul_normal<A, T>(h, sv), invS), sv));
    return K == 0 ? r * two : ldexp_flush<A, T>(r, back);
  };
  // (h = g 2^K / 2 - mean / 2: 0 or normal, by difference_normal_or_zero
  // beside a mean below 2^digits min)
  if (difference_always_normal(mh))
    map_pairs<A>(x, dy, dx, n, [=](B v, B g) { return term(mul_normal<A, T>(g * up, half) - mean_half, v); });
  else
    map_pairs<A>(x, dy, dx, n, [=](B v, B g) {
      return term(difference_normal_or_zero<A, T>(mul_normal<A, T>(g * up, half), mean_half), v);
    });
  return true;
}

// stablemax_backward where S or D is out of range, on the ratios
// r = s / s(m) <= 1 with R = sum r: mean = (sum dy r) / R and
// s'(x) / S = 1 / (s(m) R) for x >= 0, r s(x) / R for x < 0. The sums run
// on r 2^-k with 2^k > n, so sum dy r 2^-k cannot overflow even for dy
// near the largest T; 1 / S, which may be subnormal here (s(m) near the
// largest T), is never formed: h is divided by s(m) and by R in turn.
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
  double S, D;
  const stable_sums sums = stablemax_backward_sums<A>(x, dy, n, S, D);
  if (sums == stable_sums::in_range) return stablemax_backward_plain<A>(x, dy, dx, n, S, D);
  if (sums == stable_sums::tiny_dy && stablemax_backward_scaled<A>(x, dy, dx, n)) return;
  const stablemax_scan sc = stablemax_special(x, n);
  // NaN anywhere (x or dy) wins over every other rule, as in the forward.
  if (sc.nan || stablemax_special(dy, n).nan) return fill(dx, n, std::numeric_limits<T>::quiet_NaN());
  if (sc.n_posinf) return fill(dx, n, T(0));
  const T m = reduce_max<A>(x, n);
  if (m == -std::numeric_limits<T>::infinity()) return fill(dx, n, T(0));
  stablemax_backward_ratios<A>(x, dy, dx, n, m);
}

}  // namespace detail
}  // namespace smax
