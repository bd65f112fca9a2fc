// smax — stablemax and log_stablemax (Prieto et al. 2025, "Grokking at the
// edge of numerical stability"): s(x) = x + 1 for x >= 0, 1 / (1 - x) for
// x < 0, y_i = s(x_i) / sum_j s(x_j). s is positive and increasing, but the
// map is not shift-invariant, so nothing is max-subtracted.
//
// Out of cache the fast path reads x twice and writes y once: pass 1 sums
// s(x) (per-lane blocks, compensated: error flat in n), pass 2 writes
// s(x) / sum with one division (x < 0: (1/sum) / (1 - x); x >= 0:
// (x + 1) * (1/sum)). It is exact to rounding while the sum lies in
// [sum_lo, sum_hi]: below sum_hi no partial sum overflowed and 1/sum is a
// normal number; above sum_lo every s(x) that underflowed to a subnormal
// (x < -2^126 in float) has an output below 1e-30 (the accuracy floor).
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

template <class T>
struct stablemax_limits;
template <>
struct stablemax_limits<float> {
  static constexpr double sum_lo = 0x1p-26;
  static constexpr double sum_hi = 0x1p100;
};
template <>
struct stablemax_limits<double> {
  static constexpr double sum_lo = 0x1p-922;
  static constexpr double sum_hi = 0x1p1000;
};

// s(x); NaN stays NaN, s(-inf) = 0, s(+inf) = +inf.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> stable_s(xsimd::batch<T, A> v) noexcept {
  using B = xsimd::batch<T, A>;
  const B one(T(1));
  return xsimd::select(v >= B(T(0)), v + one, div_<A, T>(one, one - v));
}

// s(x) * f in one rounding for x < 0 (f / (1 - x)).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> stable_s_times(xsimd::batch<T, A> v, xsimd::batch<T, A> f) noexcept {
  using B = xsimd::batch<T, A>;
  const B one(T(1));
  return xsimd::select(v >= B(T(0)), (v + one) * f, div_<A, T>(f, one - v));
}

// Sum of s(x) when the fast path may use it, else a negative number.
template <class A, class T>
double stablemax_fast_sum(const T* x, std::size_t n) noexcept {
  using Lim = stablemax_limits<T>;
  const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, [](xsimd::batch<T, A> v) { return stable_s<A>(v); });
  return (s >= Lim::sum_lo && s <= Lim::sum_hi) ? s : -1.0;
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
// Every form is in (0, 1] or underflows harmlessly to 0 (an output far
// below 1e-30): no overflow for any finite x.
template <class A, class T, class F>
SMAX_INLINE void with_stable_ratio(T m, F&& f) {
  using B = xsimd::batch<T, A>;
  const B one(T(1));
  if (m >= T(0)) {
    const B mp1(m + T(1)), inv_mp1(T(1) / (m + T(1)));
    f([=](B v) { return xsimd::select(v >= B(T(0)), div_<A, T>(v + one, mp1), div_<A, T>(inv_mp1, one - v)); });
  } else {
    const B omm(T(1) - m);
    f([=](B v) { return div_<A, T>(omm, one - v); });
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

template <class A, class T>
void stablemax(const T* x, T* y, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  if (n == 0) return;
  const double s = stablemax_fast_sum<A>(x, n);
  if (s < 0) return stablemax_robust<A>(x, y, n);
  const B inv(static_cast<T>(1.0 / s));
  map<A>(x, y, n, [inv](B v) { return stable_s_times<A>(v, inv); });
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

template <class A, class T>
void log_stablemax(const T* x, T* y, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  using Lim = stablemax_limits<T>;
  if (n == 0) return;
  double lse;
  // Pass 1 also keeps the largest s(x) (an overestimate: tail padding reads
  // as x = 0), enough to tell that no entry dominates the sum.
  B top(T(0));
  const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, [&top](B v) {
    const B e = stable_s<A>(v);
    top = xsimd::max(top, e);
    return e;
  });
  if (s >= Lim::sum_lo && s <= Lim::sum_hi) {
    if (!(1.5 * static_cast<double>(hmax<A>(top)) <= s)) return log_stablemax_dominated<A>(x, y, n);
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
// Pass 1: s1 = sum f(x_i) and s2 = sum f(x_i) dy_i in one read.
template <class A, class T, class F>
SMAX_INLINE void sum_and_dot(const T* x, const T* dy, std::size_t n, F&& f, double& s1, double& s2) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t block = 2 * W * loop_shape<A>::block_chunks;
  compensated<A, T> t1, t2;
  std::size_t i = 0;
  while (i + 2 * W <= n) {
    B a0(T(0)), a1(T(0)), b0(T(0)), b1(T(0));
    const std::size_t end = (n - i >= block) ? i + block : i + ((n - i) / (2 * W)) * (2 * W);
    for (; i < end; i += 2 * W) {
      const B r0 = f(B::load_unaligned(x + i)), r1 = f(B::load_unaligned(x + i + W));
      a0 += r0;
      a1 += r1;
      b0 += r0 * B::load_unaligned(dy + i);
      b1 += r1 * B::load_unaligned(dy + i + W);
    }
    t1.add(a0 + a1);
    t2.add(b0 + b1);
  }
  B ra(T(0)), rb(T(0));
  for (; i + W <= n; i += W) {
    const B r = f(B::load_unaligned(x + i));
    ra += r;
    rb += r * B::load_unaligned(dy + i);
  }
  if (i < n) {
    const auto live = lane_index<A, T>() < B(static_cast<T>(n - i));
    const B r = xsimd::select(live, f(load_partial<A>(x + i, n - i, T(0))), B(T(0)));
    ra += r;
    rb += r * load_partial<A>(dy + i, n - i, T(0));
  }
  t1.add(ra);
  t2.add(rb);
  s1 = hsum<A>(t1.value());
  s2 = hsum<A>(t2.value());
}

// stablemax_backward where S and D are in range: dx = s'(x) / S * (dy - mean),
// mean = D / S, formed as 2 * (h * ...) with h = (dy - mean) / 2 (no
// overflow: |mean| <= max |dy|) and the small factors applied to h one at a
// time, never multiplied together first: s'(x) = s(x)^2 underflows for x
// below -2^63 (float) while s(x)^2 h may still be a normal number.
template <class A, class T>
SMAX_FLATTEN void stablemax_backward_plain(const T* x, const T* dy, T* dx, std::size_t n, double S, double D) noexcept {
  using B = xsimd::batch<T, A>;
  const B one(T(1)), zero(T(0)), half(T(0.5)), two(T(2));
  const B invS(static_cast<T>(1.0 / S)), mean_half(finite_mean<T>(D / S) * T(0.5));
  map_pairs<A>(x, dy, dx, n, [=](B v, B g) {
    const B h = g * half - mean_half;
    const B sv = div_<A, T>(one, one - v);
    // x < 0: invS before the second s(x): h s(x)^2 alone can underflow
    // where the result is normal (double, S near 2^-539; found in review).
    return xsimd::select(v >= zero, h * invS, ((h * sv) * invS) * sv) * two;
  });
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
  using B = xsimd::batch<T, A>;
  using Lim = stablemax_limits<T>;
  if (n == 0) return;
  double S, D;
  sum_and_dot<A>(x, dy, n, [](B v) { return stable_s<A>(v); }, S, D);
  if (S >= Lim::sum_lo && S <= Lim::sum_hi && D - D == 0) return stablemax_backward_plain<A>(x, dy, dx, n, S, D);
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
