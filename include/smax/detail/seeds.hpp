// smax — the seed papers' other softmax replacements, each with its
// vector-Jacobian product:
//
//   sigmoid_attention  Ramapuram et al. 2024 (apple/ml-sigmoid-attention):
//                      y = sigmoid(x + b), elementwise; b = -log n is the
//                      paper's default (the caller passes it). Not a
//                      normalisation: y does not sum to one.
//   sa_softmax         Self-Adjust Softmax (Zheng et al. 2025, arXiv
//                      2502.18277): y = x softmax(x), or, normalized,
//                      y = (x - lo) / (hi - lo) softmax(x) with
//                      lo = min(min x, 0), hi = max(max x, 0). Not a
//                      normalisation (the first form can be negative).
//   multimax           MultiMax (Zhou et al. 2024, ICML; the official code,
//                      ZhouYuxuanYX/MultiMax, SeLU in vision_transformer.py):
//                      y = softmax(sigma(x)) with the modulator
//                        sigma(x) = x + t0 relu(r0 - x) + t1 relu(x - r1)
//                                     + t2 relu(r2 - x)^2 + t3 relu(x - r3)^2
//                      (ranges r, ts t: multimax_params). The code squares
//                      the second-order terms with no 1/n factor; we follow
//                      the code. It adds the attention mask after the
//                      modulator, so -inf entries of x are masked (and +inf
//                      entries share), not fed through sigma.
//   asentmax           Adaptive-Scalable Entmax (Vasylenko, Pitorro, Martins
//                      & Treviso 2025, arXiv 2506.16640): alpha-entmax of
//                      c x, c = s log n + b. The paper's scale is
//                      delta + beta (log n)^gamma with beta from the query;
//                      the caller passes beta as s and delta as b (gamma = 1).
//
// Kernels reuse softmax's passes (two_pass_sum with a `pre` map, exp_ref,
// softmax_three_pass, or softmax_three_pass_from after loops.hpp's
// transform_max) and entmax_bisect's (with its `scale`), with the
// elementwise factor fused into the write pass. No kernel here forms a
// subnormal from normal operands: products that may land below the normal
// range go through mul_normal (exp.hpp), and sigmoid's exp is clamped.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "backward.hpp"
#include "../types.hpp"
#include "softmax.hpp"
#include "sparse.hpp"
#include "ssmax.hpp"

namespace smax {

namespace detail {

template <class T>
struct seed_limits;
template <>
struct seed_limits<float> {
  // e^v below 2^-150: exp_ref's power of two is then +0 (sigmoid_exp)
  static constexpr float flush_depth = -104.0f;
  // 0.7 e^v at least 2^-125 (sa_softmax_reload's kept terms)
  static constexpr float weight_depth = -86.0f;
};
template <>
struct seed_limits<double> {
  static constexpr double flush_depth = -746.0;
  static constexpr double weight_depth = -707.0;  // 0.7 e^v >= 2^-1021
};

inline void check_multimax(const char* fn, const multimax_params& p) {
  for (int i = 0; i < 4; ++i)
    if (!std::isfinite(p.ranges[i]) || !std::isfinite(p.ts[i]))
      throw std::invalid_argument(std::string(fn) + ": multimax_params ranges and ts must be finite");
}

template <class T>
void check_asentmax(const char* fn, T alpha, T s, T b, std::size_t n) {
  if (!(alpha >= T(1)) || !is_finite(alpha)) throw std::invalid_argument(std::string(fn) + ": alpha must be finite and >= 1");
  if (!is_finite(s)) throw std::invalid_argument(std::string(fn) + ": s must be finite");
  if (!is_finite(b)) throw std::invalid_argument(std::string(fn) + ": b must be finite");
  if (n && !is_finite(static_cast<T>(ssmax_scale(s, b, n))))
    throw std::invalid_argument(std::string(fn) + ": the scale s * log(n) + b overflows");
}

// ------------------------------------------------------------- sigmoid --

// sigmoid(z) = 1 / (1 + t) (z >= 0), t / (1 + t) (z < 0), t = e^-|z|.
// t is +0 where e^-|z| < 2.8 * 2^-126 (|z| above about 86.3 for float;
// 2.8 * 2^-1022 and 707.4 for double: exp_ref's flush), so that t / (1 + t) and
// t / (1 + t)^2 (1 + t near 1 there) are 0 or normal without a select.
template <class A, class T>
exp_ref<A, T> sigmoid_exp() noexcept {
  return exp_ref<A, T>(seed_limits<T>::flush_depth, T(0), T(1));
}

// e^-|z|: z with the sign bit set (one operation; NaN stays NaN), clamped
// by ex at flush_depth (its max keeps a NaN, see softmax_online). `ex` is
// built once per call (built per vector, its constants went through the
// stack: AVX2 took 3 ns per element).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> exp_neg_abs(const exp_ref<A, T>& ex, xsimd::batch<T, A> z) noexcept {
  return ex(z | xsimd::batch<T, A>(T(-0.0)));
}

// sigmoid(x + b) of one vector (the 16-bit forms map it too). Captured by
// value: map's copy then holds the constants (loops.hpp).
template <class A, class T>
auto sigmoid_attention_map(T b) noexcept {
  using B = xsimd::batch<T, A>;
  const B bv(b), zero(T(0));
  const exp_ref<A, T> ex = sigmoid_exp<A, T>();
  return [=](B v) {
    const B z = v + bv;
    const B t = exp_neg_abs<A, T>(ex, z);
    // 1 / (1 + t) or t / (1 + t): one division, one rounding
    return div_<A, T>(xsimd::select(z >= zero, B(T(1)), t), B(T(1)) + t);
  };
}

template <class A, class T>
void sigmoid_attention(const T* x, T* y, std::size_t n, T b) noexcept {
  map<A>(x, y, n, sigmoid_attention_map<A, T>(b));
}

// dx = dy sigmoid(z) sigmoid(-z) = dy t r^2, r = 1 / (1 + t), from x
// (1 - y would cancel for y near 1).
template <class A, class T>
auto sigmoid_attention_backward_map(T b) noexcept {
  using B = xsimd::batch<T, A>;
  const B bv(b);
  const exp_ref<A, T> ex = sigmoid_exp<A, T>();
  return [=](B v, B g) {
    const B t = exp_neg_abs<A, T>(ex, v + bv);
    const B r = div_<A, T>(B(T(1)), B(T(1)) + t);
    return mul_normal<A, T>(g, (t * r) * r);
  };
}

template <class A, class T>
void sigmoid_attention_backward(const T* x, const T* dy, T* dx, std::size_t n, T b) noexcept {
  map_pairs<A>(x, dy, dx, n, sigmoid_attention_backward_map<A, T>(b));
}

// -------------------------------------------------------------- helpers --

// Min and max of x and 0 in one pass (sum_map's padding lanes read 0).
template <class A, class T>
void min_max0(const T* x, std::size_t n, T& lo, T& hi) noexcept {
  using B = xsimd::batch<T, A>;
  B mn(T(0)), mx(T(0));
  sum_map<A>(x, static_cast<T*>(nullptr), n, [&](B v) {
    mn = xsimd::min(mn, v);
    mx = xsimd::max(mx, v);
    return B(T(0));
  });
  lo = -hmax<A>(-mn);
  hi = hmax<A>(mx);
}

// Calls f(term) with term(v) = e^(v - m) / sum_j e^(x_j - m) for a finite
// max m: the three-pass form of softmax_three_pass (recompute), for inputs
// two_pass_sum declined. False (f not called) when x holds a NaN, which
// reduce_max may miss but the sum does not.
template <class A, class T, class F>
bool with_softmax_term(const T* x, std::size_t n, T m, F&& f) {
  if (use_split(m)) {
    double r;
    const T E = ref_exponent(m, r);
    const T lo = clamp_floor(m);
    const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, exp_ref<A, T>(lo, E, T(1)));
    if (!(s == s)) return false;
    f(exp_ref<A, T>(lo, E, static_cast<T>(1.0 / s)));
  } else {
    const shifted_exp<A, T, false> ex(m);
    const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, ex);
    if (!(s == s)) return false;
    f(scaled_shifted_exp<A, T, false>(ex, static_cast<T>(1.0 / s)));
  }
  return true;
}

// ---------------------------------------------------------- sa_softmax --

// The factor g(x) that multiplies softmax(x): x itself (g(-inf) = 0: the
// limit of x e^x), or the normalized (x - lo) / (hi - lo), taken in its
// limits where lo or hi is infinite (1 for finite x when lo = -inf, 1 at
// x = +inf and 0 elsewhere when hi = +inf) and 0 when hi = lo (x all 0:
// the formula is 0/0). Normalized, x and lo are scaled by a power of two h
// first, so that the range (hi - lo) h lies in [1, 2^65] (or below 1 where
// h is capped: hi - lo under 2^-100, double 2^-996), its inverse normal; and g is
// +0 where it would be below 2^-100 (outputs below 1e-30), so that g is
// never formed below the normal range. Where h >= 1 and lo is 0 or at
// most -2^-100, the numerator c = x h - lo h is 0 or normal for every x
// (x - lo is then a multiple of ulp(lo) / 2 or above |lo| / 2): the cut is on c
// (mode finite: one compare and a masked multiply more than the bare
// formula). Otherwise (mode careful: a range beyond 2^64, h < 1, or a tiny
// negative lo) the cut is on x and c is formed only where it holds.
template <class A, class T>
struct sa_factor {
  using B = xsimd::batch<T, A>;
  enum kind { plain, finite, careful, lo_inf, hi_inf } mode = plain;
  // g = c inv, c = x h - lo h, where c >= cut_c (finite) or x >= cut
  // (careful), else 0; dg/dx = h inv
  T h = T(1), loh = T(0), inv = T(0), cut = T(0), cut_c = T(0), top = T(0);
  // The smallest |x| whose x h is normal where h < 1 (h is 2^-64 there), 0
  // where h >= 1. (A constant, not min / h: compilers evaluate both arms of
  // a scalar select, and min / h with h > 1 would be formed.)
  T small_x = T(0);

  sa_factor(bool normalized, T lo, T hi) noexcept {
    constexpr T inf = std::numeric_limits<T>::infinity();
    if (!normalized) return;
    if (hi == inf) {
      mode = hi_inf;
    } else if (lo == -inf) {
      mode = lo_inf;
    } else {
      mode = finite;
      const T raw = hi - lo;
      if (!is_finite(raw) || raw > T(0x1p64)) {
        mode = careful;
        h = T(0x1p-64);
        small_x = std::numeric_limits<T>::min() * T(0x1p64);
      } else if (raw > T(0) && raw < T(1)) {
        // (exact; |x| <= range, so x h stays below 2)
        const int cap = std::numeric_limits<T>::max_exponent - 28;
        h = std::ldexp(T(1), std::min(-std::ilogb(raw), cap));
      }
      const long double lo_l = lo, hi_l = hi, tiny = std::numeric_limits<T>::min();  // (x86: no overflow, no subnormal)
      loh = to_normal<T>(lo_l * h);
      // (hi h is dropped where subnormal (h < 1): beside |lo h| >= 2^63 it
      // cannot move the rounded range)
      const T hih = hi >= small_x ? std::max(hi, small_x) * h : T(0);
      const T range = hih - loh;
      inv = range > T(0) ? T(1) / range : T(0);
      top = hih > T(0) ? hi : T(0);
      // g >= 2^-100 exactly where x - lo >= (hi - lo) 2^-100; below the
      // smallest normal the cut is lo (then every x - lo is 0 or a
      // multiple of the smallest subnormal, times h >= 2^26: normal).
      const long double c = lo_l + (hi_l * 0x1p-100L - lo_l * 0x1p-100L);
      cut = (hi_l - lo_l) * 0x1p-100L < tiny ? lo : to_normal<T>(c);
      cut_c = static_cast<T>(std::max(static_cast<long double>(range) * 0x1p-100L, tiny));
      if (lo < T(0) && lo > -T(0x1p-100)) mode = careful;
    }
  }
  // h inv, or 0 where that is below the normal range (hi - lo beyond
  // 2^126 / 2^1022: the slope's share of any result is below min |dy|)
  T slope() const noexcept {
    return is_finite_range() && inv >= small_x ? h * std::max(inv, small_x) : T(0);
  }
  bool is_finite_range() const noexcept { return mode == finite || mode == careful; }

  // x h - lo h for the lanes of keep (x >= cut; normal there), 0 or a
  // normal number elsewhere. With h < 1, x h is taken as 0 where it would
  // be subnormal (|x| < 2^-62: a kept lane then has |lo h| >= 2^-100, the
  // error is within an ulp of g).
  SMAX_INLINE B careful_numerator(xsimd::batch_bool<T, A> keep, B v) const noexcept {
    if (h < T(1)) v = xsimd::select(xsimd::abs(v) >= B(small_x), v, B(T(0)));
    return fms_where<A, T>(keep, v, B(h), B(loh), B(top));
  }

  // dg/dx + g(x), the backward's factor, given slope_v = slope(): in mode
  // finite (c + h) inv, at least h inv (normal: hi - lo <= 2^64), one
  // rounding fewer than h inv + c inv and with no compare
  SMAX_INLINE B slope_plus(B v, B slope_v) const noexcept {
    if (mode == finite) return (xsimd::fms(v, B(h), B(loh)) + B(h)) * B(inv);
    return slope_v + (*this)(v);
  }

  SMAX_INLINE B operator()(B v) const noexcept {
    constexpr T inf = std::numeric_limits<T>::infinity();
    switch (mode) {
      case plain:
        return xsimd::select(v == B(-inf), B(T(0)), v);
      case lo_inf:
        return xsimd::select(v == B(-inf), B(T(0)), B(T(1)));
      case hi_inf:
        return xsimd::select(v == B(inf), B(T(1)), B(T(0)));
      case finite: {
        const B c = xsimd::fms(v, B(h), B(loh));
        return mul_where<A, T>(c >= B(cut_c), c, B(inv));
      }
      default: {  // careful
        const auto keep = v >= B(cut);
        return mul_where<A, T>(keep, careful_numerator(keep, v), B(inv));
      }
    }
  }
};

// The special inputs of sa_softmax (NaN, +inf; m = max x not finite):
// NaN -> all NaN; +inf entries get g(+inf) / count (+inf, or 1 normalized),
// the rest 0; all -inf -> all 0. Elementwise, so x may be y.
template <class T>
void sa_softmax_nonfinite(const T* x, T* y, std::size_t n, bool normalized) noexcept {
  constexpr T inf = std::numeric_limits<T>::infinity();
  std::size_t count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] != x[i]) return fill(y, n, std::numeric_limits<T>::quiet_NaN());
    count += (x[i] == inf);
  }
  const T share = normalized ? static_cast<T>(1.0 / static_cast<double>(count)) : inf;
  for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] == inf) ? share : T(0);
}

// The running min and max of a pass, as a two_pass_sum `pre`. Its state by
// value: two_pass_sum runs a local copy and hands it back, so that mn and mx
// stay in registers (through references to the caller's frame they were
// stored every vector: a vector type may alias any store).
template <class A, class T>
struct min_max_tracker {
  using B = xsimd::batch<T, A>;
  static constexpr bool light = true;  // (two_pass_sum: the halves may interleave)
  B mn = B(T(0)), mx = B(T(0));
  SMAX_INLINE B operator()(B v) noexcept {
    mn = xsimd::min(mn, v);
    mx = xsimd::max(mx, v);
    return v;
  }
};
// two_pass_sum over x; normalized, it also takes lo = min(min x, 0) and
// hi = max(max x, 0) on the way (else both 0). Its result as two_pass_sum's:
// true means a finite max and no NaN.
// (S: T, or a 16-bit type widened as loaded)
template <class A, class T, class S>
bool sa_two_pass_sum(const S* x, std::size_t n, bool normalized, double& s, T& Emax, T& lo, T& hi) noexcept {
  min_max_tracker<A, T> track;
  const bool ok = normalized ? two_pass_sum<A>(x, n, s, Emax, track) : two_pass_sum<A>(x, n, s, Emax);
  lo = -hmax<A>(-track.mn);
  hi = hmax<A>(track.mx);
  return ok;
}

// sa_softmax in cache: three-pass reload, g folded into the stored terms.
// Pass 2 sums t = e^x 2^-E 2^99 / R and stores u = c(x) t, c(x) being g's
// numerator: x (R = 1) or x h - lo h (normalized: R = (hi - lo) h,
// g = c / R). Where x lies within weight_depth of the max m, t is in
// [2^-125, 2^0.5] 2^99 / R, so keeping only |c| >= R 2^-100 (the rest:
// |g| < 2^-100) keeps each product at least 2^-126 without forming the
// others, and none overflows (|c| <= max(R, 2^13)). Below that depth
// (e^(x - m) < 2^-124: outputs below 1e-30) the plain form stores +0; the
// normalized one clamps x there in the exp, its c being at most R (its
// output stays below 2^-124). Pass 3: y = u / (2^99 sum e^x 2^-E), normal
// or +0. The powers of two change no bit of a normal output. False
// (nothing written) where m is beyond split_limit (or not finite), a bound
// is infinite, R lies outside [1, 2^64] (hi - lo beyond 2^64 or below
// 2^-100), the min is a tiny negative number (sa_factor's mode careful)
// or n exceeds 2^24: the caller's
// general path takes those. Here the passes up to the sum: the terms u to
// `terms` (y, or a 16-bit form's float buffer; x may be 16-bit, T float),
// then finish(the sum is not NaN, pass 3's factor).
template <class A, class T, class S, class Finish>
bool sa_softmax_reload_sum(const S* x, T* terms, std::size_t n, bool normalized, Finish&& finish) noexcept {
  using B = xsimd::batch<T, A>;
  using F = sa_factor<A, T>;
  constexpr double lift = 0x1p99, drop = 0x1p-100;
  // (the sum of e^x 2^-E is at most 1.42 n: pass 3's factor 2^-99 / sum
  // stays normal to n = 2^24; the ISAs that never take two passes (SSE2,
  // NEON) send longer rows to the general path)
  if (n > (std::size_t(1) << 24)) return false;
  T m, mn = T(0);
  if (normalized)
    reduce_max_min<A>(x, n, m, mn);
  else
    m = reduce_max<A>(x, n);
  if (!use_split(m)) return false;  // (also inf and NaN)
  const F g(normalized, std::min(mn, T(0)), std::max(m, T(0)));
  // (R in [1, 2^64]: below 1, sa_factor's capped h on a range under
  // 2^-100, the lift 2^99 / R could overflow the terms or their sum)
  if (normalized && !(g.mode == F::finite && g.inv >= static_cast<T>(drop) && g.inv <= T(1))) return false;
  const double inv_range = normalized ? static_cast<double>(g.inv) : 1.0;
  double r;
  const T E = ref_exponent(m, r);
  const T near = m + seed_limits<T>::weight_depth;
  const exp_ref<A, T> term(normalized ? near : clamp_floor(m), E, static_cast<T>(lift * inv_range));
  const B cut(static_cast<T>(drop / inv_range)), nearv(near), h(g.h), loh(g.loh);
  const auto store_cu = [=](B v, B t) SMAX_LAMBDA_INLINE {
    if (normalized) {
      const B c = xsimd::fms(v, h, loh);  // >= 0, and 0 or normal (mode finite)
      return mul_where<A, T>(c >= cut, c, t);
    }
    return mul_where<A, T>((xsimd::abs(v) >= cut) & (v >= nearv), v, t);
  };
  const double s = sum_map<A>(x, terms, n, term, store_cu);
  // (inv_range / s = 2^-99 / sum e^x 2^-E: below 2 and normal)
  finish(s == s, static_cast<T>(inv_range / s));
  return true;
}
template <class A, class T>
bool sa_softmax_reload(const T* x, T* y, std::size_t n, bool normalized) noexcept {
  return sa_softmax_reload_sum<A>(x, y, n, normalized, [&](bool sum_is_number, T factor) {
    if (!sum_is_number) return fill(y, n, std::numeric_limits<T>::quiet_NaN());
    map<A>(y, y, n, mul_normal_by<A, T>(factor));
  });
}

// sa_softmax's write pass after sa_two_pass_sum took x (true): put(f)
// writes y = f(x) (map; 16-bit forms, map_half). Every f gives 0 or a
// normal number.
template <class A, class T, class Put>
SMAX_INLINE void sa_softmax_two_pass_write(bool normalized, double s, T Emax, T lo, T hi, Put&& put) {
  using B = xsimd::batch<T, A>;
  const sa_factor<A, T> g(normalized, lo, hi);
  // Normalized, on a range R up to 2^23 (mode finite): 1 / R joins the
  // exp's scale, y = c(x) t' with one guard and no compare on c; a term t'
  // the exp flushes was below 11.4 2^-127 (its largest mantissa times the
  // smallest power of two it drops), so y below R 2^-123.5 <= 2^-100.5.
  if (normalized && g.mode == sa_factor<A, T>::finite && g.inv >= T(0x1p-23)) {
    const exp_ref<A, T> t(-single_pass_limits<T>::limit, Emax, static_cast<T>(static_cast<double>(g.inv) / s));
    // (c = x h - lo h >= 0: normal or +-0, or subnormal where x is, beside
    // t' <= 1, which drops it)
    const B h(g.h), loh(g.loh);
    return put([=](B v) { return mul_term_normal<A, T, true>(xsimd::fms(v, h, loh), t(v)); });
  }
  const exp_ref<A, T> term(-single_pass_limits<T>::limit, Emax, static_cast<T>(1.0 / s));
  // (g(v) in [0, 1] normalized; plain, v itself: -inf meets a term of 0)
  if (normalized) return put([=](B v) { return mul_term_normal<A, T>(g(v), term(v)); });
  put([=](B v) { return mul_term_normal<A, T>(v, term(v)); });
}

template <class A, class T>
void sa_softmax(const T* x, T* y, std::size_t n, bool normalized) {
  using B = xsimd::batch<T, A>;
  if (n == 0) return;
  if (!automatic_takes_two_pass<A, T>(n) && sa_softmax_reload<A>(x, y, n, normalized)) return;
  // Two reads: two_pass_sum (also taking min and max), then the fused write.
  // (Out of cache, and the rows the reload declines: the same path in place
  // or not.)
  double s;
  T Emax, lo, hi;
  const bool ok = sa_two_pass_sum<A>(x, n, normalized, s, Emax, lo, hi);
  if (ok) return sa_softmax_two_pass_write<A>(normalized, s, Emax, lo, hi, [&](auto f) { map<A, staged>(x, y, n, f); });
  const auto write = [&](auto&& term) {
    const sa_factor<A, T> g(normalized, lo, hi);
    if (normalized) return map<A, staged>(x, y, n, [=](B v) { return mul_term_normal<A, T>(g(v), term(v)); });
    map<A, staged>(x, y, n, [=](B v) { return mul_term_normal<A, T>(v, term(v)); });
  };
  const T m = reduce_max<A>(x, n);
  if (!is_finite(m)) return sa_softmax_nonfinite(x, y, n, normalized);
  if (normalized) min_max0<A>(x, n, lo, hi);
  if (!with_softmax_term<A>(x, n, m, write)) fill(y, n, std::numeric_limits<T>::quiet_NaN());
}

// The normalized backward's two end entries, exactly, on a row of range
// R = hi - lo below 1. There the general form's terms of size |dy| p / R
// cancel at the first minimum and maximum to a result of size |dy| p (its
// error about an ulp of |dy| p / R: {-1, +inf} where {-1, 1} is exact, float
// x = {0, 1e-38}, dy = {0, 4}). Taken apart, each end's own term cancels
// exactly and what is left are sums over the other entries:
//   dx[imax] = p (dy - D) - sum_k dy_k p_k (x_k - lo) / R^2
//   dx[imin] = -p D + sum_k dy_k p_k (x_k - hi) / R^2
// (k over every entry but imin and imax, where the terms are 0 or the
// cancelled ones: their p is zeroed in the block buffer). The sums are
// formed in double from x - lo and x - hi (exact in double for float x):
// one more read of x and dy, taken only on such rows: x86 float in double
// lanes, double in its own lanes (products below the normal range dropped,
// negligible for ranges above 2^-900), NEON float element by element.
struct sa_end_sums {
  double to_lo = 0, to_hi = 0;  // the two sums above, divided by R once
  double p_lo = 0, p_hi = 0, dy_hi = 0;
};
template <class A, class T, class Term>
sa_end_sums sa_ends(const T* x, const T* dy, std::size_t n, std::size_t imin, std::size_t imax, T lo, T hi,
                    const Term& term) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size, block = 512;
  alignas(64) T p[block];
  const double lo_d = static_cast<double>(lo), hi_d = static_cast<double>(hi), inv = 1.0 / (hi_d - lo_d);
  neumaier_sum to_lo, to_hi;
  for (std::size_t s = 0; s < n; s += block) {
    const std::size_t len = std::min(block, n - s);
    map<A>(x + s, p, len, term);
    for (std::size_t i : {imin, imax})
      if (i >= s && i < s + len) p[i - s] = T(0);
    const T *xs = x + s, *ds = dy + s;
    double a = 0, b = 0;
    // add(p, dy, x) over the block's vectors, the last one partial
    const auto over_block = [&](auto&& add) {
      std::size_t j = 0;
      for (; j + W <= len; j += W) add(B::load_aligned(p + j), B::load_unaligned(ds + j), B::load_unaligned(xs + j));
      if (j < len) {
        const std::size_t r = len - j;
        add(load_partial<A>(p + j, r, T(0)), load_partial<A>(ds + j, r, T(0)), load_partial<A>(xs + j, r, T(0)));
      }
    };
    if constexpr (dot_in_double_v<A, T>) {
      using D = xsimd::batch<double, A>;
      const D lov(lo_d), hiv(hi_d), invv(inv);
      D a0(0.0), a1(0.0), b0(0.0), b1(0.0);
      const auto add = [&](B pv, B dv, B xv) SMAX_LAMBDA_INLINE {
        D p0, p1, d0, d1, x0, x1;
        widen_halves<A>(pv, p0, p1);
        widen_halves<A>(dv, d0, d1);
        widen_halves<A>(xv, x0, x1);
        const D w0 = d0 * p0, w1 = d1 * p1;  // (exact)
        a0 = xsimd::fma(w0, (x0 - lov) * invv, a0);
        a1 = xsimd::fma(w1, (x1 - lov) * invv, a1);
        b0 = xsimd::fma(w0, (x0 - hiv) * invv, b0);
        b1 = xsimd::fma(w1, (x1 - hiv) * invv, b1);
      };
      over_block(add);
      a = xsimd::hadd(a0 + a1);
      b = xsimd::hadd(b0 + b1);
    } else if constexpr (std::is_same<T, double>::value) {
      // (products normal or 0, and terms below 2^52 times the smallest
      // normal dropped, as sum_of_pairs_normal does: no lane sum cancels to
      // a subnormal; for ranges above 2^-900 what is dropped is negligible)
      const B lov(lo), hiv(hi), invv(inv), cut(std::numeric_limits<T>::min() * 0x1p52);
      B a0(0.0), b0(0.0);
      const auto add = [&](B pv, B dv, B xv) SMAX_LAMBDA_INLINE {
        const B w = mul_normal<A, T>(dv, pv);
        const B ta = mul_normal<A, T>(w, (xv - lov) * invv), tb = mul_normal<A, T>(w, (xv - hiv) * invv);
        a0 += xsimd::select(xsimd::abs(ta) >= cut, ta, B(0.0));
        b0 += xsimd::select(xsimd::abs(tb) >= cut, tb, B(0.0));
      };
      over_block(add);
      a = xsimd::hadd(a0);
      b = xsimd::hadd(b0);
    } else {
      constexpr double tiny = 0x1p-400;
      for (std::size_t j = 0; j < len; ++j) {
        const double d = static_cast<double>(ds[j]), pk = static_cast<double>(p[j]);
        if (!(std::fabs(d) >= tiny && pk >= tiny)) continue;
        const double w = d * pk, v = static_cast<double>(xs[j]);
        a += w * ((v - lo_d) * inv);  // ((v - lo) inv in [0, 1])
        b += w * ((v - hi_d) * inv);
      }
    }
    to_lo.add(a);
    to_hi.add(b);
  }
  sa_end_sums e;
  e.to_lo = to_lo.value();
  e.to_hi = to_hi.value();
  const auto p_at = [&](std::size_t i) { return i < n ? static_cast<double>(hmax<A>(term(B(x[i])))) : 0.0; };
  e.p_lo = p_at(imin);
  e.p_hi = p_at(imax);
  e.dy_hi = imax < n ? static_cast<double>(dy[imax]) : 0.0;
  return e;
}

// How sa_softmax_backward's gradient forms a = dy_k f_k - D, f = g' + g
// (normal or 0), with no subnormal (chosen per row by with_sa_gradient):
//   fused (ISAs with FMA): one rounding, for |D| >= 2^(2 digits + 2) min,
//     where dy f - D is a multiple of min (0 or normal);
//   guarded (SSE2): dy f rounded, then - D, for D = 0 or |D| >= 2^digits
//     min; a vector with a dy below min / (f's least nonzero value) takes
//     dy f by mul_normal;
//   tiny: the other rows, dy f by mul_normal and - D by
//     difference_normal_or_zero.
enum class sa_difference { fused, guarded, tiny };

// sa_softmax_backward's dx_k = p_k (dy_k (g'(x_k) + g(x_k)) - D) on the
// vectors v of x and d of dy, p = term(v) (below), before the end
// entries' corrections; lane by lane (the 16-bit form maps it on vectors
// widened as loaded, and on one entry broadcast).
template <class A, class T, sa_difference K, class Term>
SMAX_INLINE auto sa_softmax_backward_gradient(bool normalized, const sa_factor<A, T>& g, T D, const Term& term) noexcept {
  using B = xsimd::batch<T, A>;
  const B slope(g.slope()), Dv(D);
  // f's least nonzero value: v + 1 is 0 or at least 2^-digits; normalized,
  // f >= the slope (rounded) where that is not 0, else f = g, 0 or at least
  // about 2^-100 (sa_factor's cut), or 0 or 1 beside an infinite end
  constexpr int digits = std::numeric_limits<T>::digits;
  const T f_least = std::min(T(1), !normalized         ? std::ldexp(T(1), -digits - 1)
                                   : g.slope() > T(0) ? g.slope() * T(0.5)
                                                      : T(0x1p-102));
  const B small_dy(std::numeric_limits<T>::min() / f_least);
  return [=](B v, B d) {
    const B f = normalized ? g.slope_plus(v, slope) : g(v) + B(T(1));
    B a;
    if constexpr (K == sa_difference::fused) {
      a = fms_<A, T>(d, f, Dv);
    } else if constexpr (K == sa_difference::guarded) {
      const bool any_small = xsimd::any((xsimd::abs(d) < small_dy) & (d != B(T(0))));
      a = (any_small ? mul_normal<A, T>(d, f) : d * f) - Dv;
    } else {
      a = difference_normal_or_zero<A, T>(mul_normal<A, T>(d, f), Dv);
    }
    return xsimd::select(v == B(-std::numeric_limits<T>::infinity()), B(T(0)), mul_normal<A, T>(term(v), a));
  };
}

// f(gradient) with sa_softmax_backward_gradient's form for this row's D
// (a double, NaN excluded): rounded to T, or 0 where below the normal range
// (its share of each dx is then below min).
template <class A, class T, class Term, class F>
SMAX_INLINE void with_sa_gradient(bool normalized, const sa_factor<A, T>& g, double D, const Term& term, F&& f) {
  const T Dt = finite_mean<T>(opaque(std::fabs(D) < static_cast<double>(std::numeric_limits<T>::min()) ? 0.0 : D));
  constexpr int p = exp_constants<T>::mantissa_bits + 1;
  // (two forms per ISA: a third one cost the fused rows 1.05-1.1x in cache)
  constexpr sa_difference usual = has_fma_v<A> ? sa_difference::fused : sa_difference::guarded;
  const bool usual_row = has_fma_v<A> ? Dt != T(0) && !(std::fabs(Dt) < std::ldexp(std::numeric_limits<T>::min(), 2 * p + 2))
                                      : difference_always_normal(Dt);
  if (usual_row)
    f(sa_softmax_backward_gradient<A, T, usual>(normalized, g, Dt, term));
  else
    f(sa_softmax_backward_gradient<A, T, sa_difference::tiny>(normalized, g, Dt, term));
}

// With p = softmax(x), y = g p, D = sum dy y, P = sum dy p:
//   dx_k = p_k (dy_k (g'(x_k) + g(x_k)) - D)
// plus, normalized (g depends on lo and hi), (D - P) / R at the first
// minimum when min x < 0 (lo is that entry) and -D / R at the first
// maximum when max x > 0, R = hi - lo. NaN in x or dy -> all NaN; +inf in
// x -> all 0 (saturated); -inf entries get 0.
template <class A, class T>
SMAX_FLATTEN void sa_softmax_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, bool normalized) {
  using B = xsimd::batch<T, A>;
  if (n == 0) return;
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  // The softmax sum first, with lo and hi: a sum it accepts means a finite
  // max and no NaN, so the max and min passes are needed only where it
  // declines.
  double s;
  T Emax, lo, hi;
  const bool ok = sa_two_pass_sum<A>(x, n, normalized, s, Emax, lo, hi);
  T m = T(0);
  if (!ok) {
    m = reduce_max<A>(x, n);
    if (m != m) return fill(dx, n, nan);
    if (!is_finite(m)) {  // +inf somewhere (y holds +inf: no dot), or all -inf
      for (std::size_t i = 0; i < n; ++i)
        if (dy[i] != dy[i]) return fill(dx, n, nan);
      return fill(dx, n, T(0));
    }
    if (normalized) min_max0<A>(x, n, lo, hi);
  }
  const double D = dot_normal<A>(y, dy, n);  // (no subnormal product or lane sum)
  if (!(D == D)) return fill(dx, n, nan);
  const sa_factor<A, T> g(normalized, lo, hi);
  // The entries lo and hi are (first occurrences), before dx overwrites x.
  std::size_t imin = n, imax = n;
  if (normalized && g.is_finite_range()) {
    if (lo < T(0)) imin = first_index_of<A>(x, n, lo);
    if (hi > T(0)) imax = first_index_of<A>(x, n, hi);
  }
  // (before the pass below, which may overwrite x or dy)
  const bool exact_ends = (imin < n || imax < n) && g.slope() > T(1);
  sa_end_sums ends;
  double P = 0;
  const auto run = [&](auto&& term) {
    if (exact_ends) ends = sa_ends<A>(x, dy, n, imin, imax, lo, hi, term);
    with_sa_gradient<A, T>(normalized, g, D, term, [&](const auto& gradient) {
      // (normalized: P = sum dy p in the pass that writes dx, from the same loads)
      if (normalized)
        P = sum_of_pairs_normal<A>(x, dy, n, [&](B v, B d) { return mul_normal<A, T>(d, term(v)); },
                                   write_pairs(dx, gradient));
      else
        map_pairs<A>(x, dy, dx, n, gradient);
    });
  };
  if (ok)
    run(exp_ref<A, T>(-single_pass_limits<T>::limit, Emax, static_cast<T>(1.0 / s)));
  else if (!with_softmax_term<A>(x, n, m, run))
    return fill(dx, n, nan);
  // (rounded to T with no subnormal: 0 below the normal range)
  if (exact_ends) {
    const double R = static_cast<double>(hi) - static_cast<double>(lo);
    if (imin < n) dx[imin] = to_normal<T>(ends.to_hi / R - ends.p_lo * D);
    if (imax < n) dx[imax] = to_normal<T>(ends.p_hi * (ends.dy_hi - D) - ends.to_lo / R);
    return;
  }
  const double R = g.slope() > T(0) ? 1.0 / static_cast<double>(g.slope()) : 0.0;
  if (imin < n && g.slope() > T(0)) dx[imin] = to_normal<T>(dx[imin] + (D - P) / R);
  if (imax < n && g.slope() > T(0)) dx[imax] = to_normal<T>(dx[imax] - D / R);
}

// ------------------------------------------------------------- multimax --

// sigma(x) in T, in the official code's order of operations; +-inf and NaN
// pass through (the mask is applied after the modulator).
template <class A, class T>
struct multimax_modulator {
  using B = xsimd::batch<T, A>;
  B r0, r1, r2, r3, t0, t1, t2, t3;
  explicit multimax_modulator(const multimax_params& p) noexcept
      : r0(static_cast<T>(p.ranges[0])), r1(static_cast<T>(p.ranges[1])), r2(static_cast<T>(p.ranges[2])),
        r3(static_cast<T>(p.ranges[3])), t0(static_cast<T>(p.ts[0])), t1(static_cast<T>(p.ts[1])),
        t2(static_cast<T>(p.ts[2])), t3(static_cast<T>(p.ts[3])) {}

  SMAX_INLINE B operator()(B v) const noexcept {
    const B zero(T(0));
    const B a = xsimd::max(r0 - v, zero), b = xsimd::max(v - r1, zero);
    const B c = xsimd::max(r2 - v, zero), d = xsimd::max(v - r3, zero);
    const B s = (((v + t0 * a) + t1 * b) + t2 * (c * c)) + t3 * (d * d);
    return xsimd::select(xsimd::abs(v) == B(std::numeric_limits<T>::infinity()), v, s);
  }
  // d sigma / dx, with relu'(0) = 0 (PyTorch's); 0 at +-inf.
  SMAX_INLINE B slope(B v) const noexcept {
    const B zero(T(0)), one(T(1)), two(T(2));
    const B lin = (one - xsimd::select(v < r0, t0, zero)) + xsimd::select(v > r1, t1, zero);
    const B quad = two * (t3 * xsimd::max(v - r3, zero) - t2 * xsimd::max(r2 - v, zero));
    return xsimd::select(xsimd::abs(v) == B(std::numeric_limits<T>::infinity()), zero, lin + quad);
  }
};

template <class A, class T>
SMAX_FLATTEN void multimax(const T* x, T* y, std::size_t n, const multimax_params& p) {
  using B = xsimd::batch<T, A>;
  if (n == 0) return;
  const multimax_modulator<A, T> sig(p);
  // In cache: sigma(x) into y with its max (one pass), then softmax's
  // three-pass reload there from its sum pass on.
  if (!automatic_takes_two_pass<A, T>(n)) {
    const T m = transform_max<A, T, false>(x, static_cast<const T*>(nullptr), y, n,
                                           [&](B v, B) SMAX_LAMBDA_INLINE { return sig(v); });
    return softmax_three_pass_from<A>(m, y, y, n, exp_terms::reload);
  }
  double s;
  T Emax;
  if (two_pass_sum<A>(x, n, s, Emax, sig)) {
    const exp_ref<A, T> ex(-single_pass_limits<T>::limit, Emax, static_cast<T>(1.0 / s));
    return map<A, staged>(x, y, n, [=](B v) { return ex(sig(v)); });
  }
  map<A>(x, y, n, sig);
  softmax_three_pass<A>(y, y, n, exp_terms::recompute);
}

// Three inputs, one output (any may alias): out[i] = f(a[i], b[i], c[i]).
template <class A, class T, class F>
void map3(const T* a, const T* b, const T* c, T* out, std::size_t n, F&& f_arg) noexcept {
  local_copy_t<F> f(f_arg);  // (loops.hpp)
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  for (; i + W <= n; i += W)
    f(B::load_unaligned(a + i), B::load_unaligned(b + i), B::load_unaligned(c + i)).store_unaligned(out + i);
  if (i < n)
    store_partial<A>(out + i, n - i,
                     f(load_partial<A>(a + i, n - i, T(0)), load_partial<A>(b + i, n - i, T(0)),
                       load_partial<A>(c + i, n - i, T(0))));
}

// dx = sigma'(x) softmax_backward(y, dy) = sigma'(x) (y dy - y D).
template <class A, class T>
SMAX_FLATTEN void multimax_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, const multimax_params& p) {
  using B = xsimd::batch<T, A>;
  if (n == 0) return;
  const multimax_modulator<A, T> sig(p);
  with_backward_term<A, T>(softmax_backward_term<A, T>::dot_of(y, dy, n), [&](const auto& term) {
    map3<A>(x, y, dy, dx, n, [=](B v, B yv, B d) { return mul_normal<A, T>(sig.slope(v), term(yv, d)); });
  });
}

// ------------------------------------------------------------- asentmax --

template <class A, class T>
void asentmax(const T* x, T* y, std::size_t n, T alpha, T s, T b) {
  if (n == 0) return;
  const T c = static_cast<T>(ssmax_scale(s, b, n));
  if (alpha == T(1)) return ssmax<A, T>(x, y, n, s, b);
  entmax_bisect<A, T>(x, y, n, alpha, 50, nullptr, c);
}

// dx = c entmax_backward(y, dy).
template <class A, class T>
void asentmax_backward(const T* y, const T* dy, T* dx, std::size_t n, T alpha, T s, T b) {
  using B = xsimd::batch<T, A>;
  if (n == 0) return;
  const B c(static_cast<T>(ssmax_scale(s, b, n)));
  entmax_backward<A, T>(y, dy, dx, n, alpha);
  map<A>(dx, dx, n, [=](B g) { return mul_normal<A, T>(g, c); });
}

}  // namespace detail
}  // namespace smax
