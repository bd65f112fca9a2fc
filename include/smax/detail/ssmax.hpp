// smax — Scalable-Softmax (Nakanishi 2025): y = softmax(c x) with the
// effective scale c = s log(n) + b, and the scaled-softmax kernel that
// gumbel_softmax shares (softmax((logits + g) / tau) is the scale 1/tau).
//
// No temporary is written: the scale is folded into the exponent.
//
//   two-pass (always tried first; reads 2n, writes n): pass 1 sums e^(c v)
//   as (p, 2^K) pairs against a per-lane power-of-two reference, with no max
//   pass (Dukhan & Ablavatski 2020, as softmax's two_pass); pass 2 writes
//   p 2^(K - Kmax) / sum. The reduced argument is d = c v - K ln2_hi - ...,
//   and its first step is one fma(c, v, -K ln2_hi): where the ISA has FMA the
//   product c v is never rounded on its own, so the error stays flat in |c v|
//   (~1e-6 relative, like softmax two_pass); SSE2 emulates fma as c * v + .,
//   which adds the rounding of c v (|c v_i| 2^-24 relative).
//
//   three-pass fallback (special values, |c v| beyond the two-pass range):
//   max (min for c < 0), sum e^(c (v - m)), write: exponent <= 0, never
//   overflows; error |c (v_i - m)| 2^-23 from the two roundings of c (v - m).
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>

#include "exp.hpp"
#include "loops.hpp"
#include "softmax.hpp"

namespace smax {
namespace detail {

// The lane references' starting value (pass 1).
template <class T>
SMAX_INLINE T scaled_e0() noexcept {
  return static_cast<T>(std::nearbyint(-single_pass_limits<T>::limit / 2 * exp_constants<T>::log2e));
}

// e^(c v) = p 2^K for the two-pass kernel. K = round(v (c log2e)), an
// integer-valued T (NaN for NaN v, +-inf where c v is); terms with K below
// kmin (c v below about -limit: -inf input with c > 0, the tail padding,
// and terms the accepted range makes negligible) are dropped (p = 0).
// (c log2e is rounded, so K may differ by one from round(c v log2e) at a
// tie: d then exceeds ln2/2 by at most |K| 2^-24 ln2, inside the range the
// exp polynomial is fitted on.)
template <class A, class T>
struct scaled_extexp {
  using B = xsimd::batch<T, A>;
  using C = exp_constants<T>;
  using L = single_pass_limits<T>;
  // ln2 - ln2_hi in one T (for the FMA path): K times it is computed
  // exactly inside the fma; its own rounding is 2^-p of 2^-12 ln2, i.e. at
  // most |K| 2^-37 (float) absolute in d, below 2^-24 for every |K| < 5909.
  static constexpr T ln2_rest = C::ln2_mid + C::ln2_lo;
  // K range of the accepted (exact) two-pass result: max c v in about
  // [-limit/2, limit], as softmax two_pass.
  static constexpr T kmin = -static_cast<T>(static_cast<long>(L::limit * C::log2e));
  static constexpr T khi = static_cast<T>(static_cast<long>(L::limit * C::log2e)) - 1;
  static constexpr T klo = kmin / 2 + 1;
  B c, clog2e;
  // Where `clampable` (c > 0 and -limit / c finite in T): v clamped at lo
  // gives c v >= -limit (about: lo is rounded), so K >= kmin - 1 with no
  // select (`clamped` below). Not for a tinier c: c (-max) is then above
  // -limit, and a -inf input clamped there would not give a 0 term.
  bool clampable;
  B lo;
  explicit scaled_extexp(T c_scalar) noexcept
      : c(c_scalar),
        clog2e(static_cast<T>(static_cast<double>(c_scalar) * 1.4426950408889634)),
        clampable(c_scalar > T(0) && -static_cast<double>(L::limit) / static_cast<double>(c_scalar) >=
                                         -static_cast<double>(std::numeric_limits<T>::max())),
        lo(clampable ? static_cast<T>(-static_cast<double>(L::limit) / static_cast<double>(c_scalar)) : T(0)) {}

  // d = c v - K ln2 for K = max(kmin, K): Cody-Waite, K ln2_hi exact; the
  // first step in one fma, so the product c v is not rounded by itself
  // where the ISA has FMA (fma_: also on AVX-512, where xsimd 8.1 has none).
  SMAX_INLINE B reduce(B v, B K) const noexcept {
    B d = fma_<A, T>(c, v, K * B(-C::ln2_hi));
    if constexpr (has_fma_v<A>) {
      d = fnma_<A, T>(K, B(ln2_rest), d);
    } else {
      d = xsimd::fnma(K, B(C::ln2_mid), d);
      d = xsimd::fnma(K, B(C::ln2_lo), d);
    }
    return d;
  }

  // Returns p; K = max(kmin, K) (NaN stays NaN: x86 max returns its second
  // operand when either is NaN; +inf stays +inf).
  SMAX_INLINE B operator()(B v, B& K) const noexcept {
    const B Kr = round_mul<A, T>(v, clog2e);
    K = xsimd::max(B(kmin), Kr);
    return xsimd::select(Kr < B(kmin), B(T(0)), exp_poly<A, T>(reduce(v, K)));
  }

  // The same where clampable, by the clamp at lo instead of the select: K >=
  // kmin - 1, and a clamped term is at most e^-limit of its lane's share,
  // which ldexp_normal flushes (K - E < -2900). NaN stays NaN in p (max
  // keeps its second operand), so no K guard is needed.
  SMAX_INLINE B clamped(B v, B& K) const noexcept {
    v = xsimd::max(lo, v);
    K = round_mul<A, T>(v, clog2e);
    return exp_poly<A, T>(reduce(v, K));
  }
};

// Whether pass 1's result r is the exact two-pass one (no NaN, max c v in
// the accepted range, a finite nonzero sum); sets the normalizer sum 2^emax.
template <class A, class T>
SMAX_INLINE bool scaled_accept(const pow2_sum& r, double& sum, T& emax) noexcept {
  using E = scaled_extexp<A, T>;
  sum = r.sum;
  emax = static_cast<T>(r.emax);
  return !r.nan && r.kmax >= E::klo && r.kmax <= E::khi && sum > 0 && sum < std::numeric_limits<double>::infinity();
}

// Pass 1 of softmax(c v) where ex.clampable (the clamped term), over the
// chunks that get(i, v) gives (see pow2_rescaled_sum): true if the two-pass
// result is exact, with the normalizer sum * 2^emax.
template <class A, class T, class Get>
SMAX_INLINE bool scaled_pass1_clamped(std::size_t n, const scaled_extexp<A, T>& ex, Get&& get, double& sum,
                                      T& emax) noexcept {
  using B = xsimd::batch<T, A>;
  using E = scaled_extexp<A, T>;
  // A copy: constants read through a reference to the caller's object are
  // reloaded after every store (a vector store may alias anything).
  const E e = ex;
  return scaled_accept<A, T>(
      pow2_rescaled_sum<A, T, nan_shows::in_term>(n, scaled_e0<T>(), E::kmin - 1, get, [e](B v, B& K) { return e.clamped(v, K); }), sum,
      emax);
}

// The same for any finite c.
template <class A, class T, class Get>
SMAX_INLINE bool scaled_pass1(std::size_t n, const scaled_extexp<A, T>& ex, Get&& get, double& sum, T& emax) noexcept {
  using B = xsimd::batch<T, A>;
  using E = scaled_extexp<A, T>;
  if (ex.clampable) return scaled_pass1_clamped<A, T>(n, ex, get, sum, emax);
  const E e = ex;
  return scaled_accept<A, T>(pow2_rescaled_sum<A, T>(n, scaled_e0<T>(), E::kmin, get, [e](B v, B& K) { return e(v, K); }),
                             sum, emax);
}

// Pass 1 over x; x may be 16-bit (T float: each vector widened as loaded).
template <class A, class S, class T>
bool scaled_two_pass_sum(const S* x, std::size_t n, const scaled_extexp<A, T>& ex, double& sum, T& emax) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  return scaled_pass1<A, T>(
      n, ex,
      [x, n](std::size_t i, B& v0, B& v1, B& v2, B& v3) {
        if (i + 4 * W <= n) {
          v0 = load_as<A, T>(x + i);
          v1 = load_as<A, T>(x + i + W);
          v2 = load_as<A, T>(x + i + 2 * W);
          v3 = load_as<A, T>(x + i + 3 * W);
        } else {
          const std::size_t r = n - i;
          const auto part = [&](std::size_t u) {
            return load_as_partial<A, T>(x + i + u * W, live_lanes(r, u, W), T(0));
          };
          v0 = part(0);
          v1 = part(1);
          v2 = part(2);
          v3 = part(3);
        }
      },
      sum, emax);
}

// p 2^k with the result 0 where k < cut: one masked vscalefps on AVX-512.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> ldexp_or_zero(xsimd::batch<T, A> p, xsimd::batch<T, A> k,
                                             xsimd::batch<T, A> cut) noexcept {
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    if constexpr (std::is_same<T, float>::value)
      return _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(k, cut, _CMP_GE_OQ), p, k);
    else
      return _mm512_maskz_scalef_pd(_mm512_cmp_pd_mask(k, cut, _CMP_GE_OQ), p, k);
  }
#endif
  return xsimd::select(k < cut, xsimd::batch<T, A>(T(0)), ldexp_normal<A, T>(p, k));
}

// Writes p 2^(K - emax) * scale for p in [0.7, 1.42] without subnormal
// arithmetic: results below the normal range are flushed to 0 (they are
// below 1e-37, under every accuracy floor) and everything else is formed
// from normal numbers. (A multiply by a subnormal p 2^(K - emax) costs a
// microcode assist on x86: ssmax with a large scale, a quarter of whose
// outputs were subnormal, ran 3.4x slower.) The scale's mantissa goes into
// the polynomial's coefficients (scaled_poly), its exponent into the power
// of two: p * mantissa is in [0.7, 2.9) (value's t * mantissa in
// [0.35, 4)), so k >= min_k_normal gives a normal result.
template <class A, class T>
struct normal_scale {
  using B = xsimd::batch<T, A>;
  using C = exp_constants<T>;
  scaled_poly<A, T> poly;
  B mant, shift, cut;
  static T mantissa(double scale) noexcept {
    int e = 0;
    return static_cast<T>(2 * std::frexp(scale, &e));  // scale = m 2^e, m in [0.5, 1)
  }
  normal_scale(double scale, T emax) noexcept
      : poly(mantissa(scale)), mant(mantissa(scale)), shift(T(0)), cut(T(C::min_k_normal)) {
    int e = 0;
    std::frexp(scale, &e);
    shift = B(static_cast<T>(e - 1) - emax);
  }
  // e^d 2^(K - emax) * scale
  SMAX_INLINE B operator()(B d, B K) const noexcept { return ldexp_or_zero<A, T>(poly(d), K + shift, cut); }
  // t 2^(K - emax) * scale, for t in [0.35, 2)
  SMAX_INLINE B value(B t, B K) const noexcept { return ldexp_or_zero<A, T>(t * mant, K + shift, cut); }
};

// Pass 2: y = e^(c x) / (sum 2^emax). x == y allowed. Only after an
// accepted pass 1 (no NaN, c x <= limit): lanes below kmin come out 0
// through normal_scale's cut (their K + shift is far below it).
// The functor holds copies of everything (passed to map as a temporary):
// constants reached through a reference to the caller's objects are
// reloaded after every store to y (a vector store may alias anything).
template <class A, class T>
struct scaled_writer {
  using B = xsimd::batch<T, A>;
  using E = scaled_extexp<A, T>;
  E ex;
  normal_scale<A, T> out;
  scaled_writer(const E& e, double sum, T emax) noexcept : ex(e), out(1.0 / sum, emax) {}
  SMAX_INLINE B operator()(B v) const noexcept {
    const B K = xsimd::max(B(E::kmin), round_mul<A, T>(v, ex.clog2e));
    return out(ex.reduce(v, K), K);
  }
};

template <class A, class T>
void scaled_two_pass_write(const T* x, T* y, std::size_t n, const scaled_extexp<A, T>& ex, double sum,
                           T emax) noexcept {
  map<A, staged>(x, y, n, scaled_writer<A, T>(ex, sum, emax));
}

// The special-value rules for softmax(c x) when the extreme element (max
// for c > 0, min for c < 0) is not finite: NaN -> all NaN; the entries at
// the infinity that c maps to +inf share the mass; otherwise (every entry at
// the other infinity) all 0. c == 0 makes 0 * inf = NaN: all NaN.
template <class T>
void scaled_nonfinite(const T* x, T* y, std::size_t n, T c) noexcept {
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  if (c == T(0)) return fill(y, n, nan);
  const T top = c > T(0) ? inf : -inf;
  std::size_t count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] != x[i]) return fill(y, n, nan);
    count += (x[i] == top);
  }
  if (count == 0) return fill(y, n, T(0));
  const T share = static_cast<T>(1.0 / static_cast<double>(count));
  for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] == top) ? share : T(0);
}

// softmax(c x) by three passes with exponent c (x - m) <= 0.
template <class A, class T>
void scaled_softmax_three_pass(const T* x, T* y, std::size_t n, T c) noexcept {
  using B = xsimd::batch<T, A>;
  const T m = c < T(0) ? reduce_min<A>(x, n) : reduce_max<A>(x, n);
  if (!is_finite(m)) return scaled_nonfinite(x, y, n, c);
  if (c == T(0)) {
    // Every finite entry gets 1/n; an infinite one makes 0 * inf = NaN.
    for (std::size_t i = 0; i < n; ++i)
      if (!is_finite(x[i])) return fill(y, n, std::numeric_limits<T>::quiet_NaN());
    return fill(y, n, static_cast<T>(1.0 / static_cast<double>(n)));
  }
  const B mb(m), cb(c);
  const shifted_exp<A, T, false> ex(T(0));
  const auto f = [ex, cb, mb](B v) { return ex(cb * (v - mb)); };
  const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, f);
  if (!(s == s)) return fill(y, n, std::numeric_limits<T>::quiet_NaN());
  const scale_normal<A, T> inv(static_cast<T>(1.0 / s));
  map<A, staged>(x, y, n, [f, inv](B v) { return inv(f(v)); });
}

// softmax(c x) for any finite c.
template <class A, class T>
void scaled_softmax(const T* x, T* y, std::size_t n, T c) noexcept {
  if (n == 0) return;
  const scaled_extexp<A, T> ex(c);
  double sum;
  T emax;
  if (scaled_two_pass_sum<A>(x, n, ex, sum, emax)) return scaled_two_pass_write<A>(x, y, n, ex, sum, emax);
  scaled_softmax_three_pass<A>(x, y, n, c);
}

// The effective scale s log(n) + b, in double.
inline double ssmax_scale(double s, double b, std::size_t n) noexcept {
  return s * std::log(static_cast<double>(n)) + b;
}

// The checks of smax::ssmax (T: the type the scale is formed in); false
// for n = 0 (nothing to do).
template <class T>
bool check_ssmax(T s, T b, std::size_t n) {
  if (!is_finite(s)) throw std::invalid_argument("smax::ssmax: s must be finite");
  if (!is_finite(b)) throw std::invalid_argument("smax::ssmax: b must be finite");
  if (n == 0) return false;
  if (!is_finite(static_cast<T>(ssmax_scale(s, b, n))))
    throw std::invalid_argument("smax::ssmax: the scale s * log(n) + b overflows");
  return true;
}

template <class A, class T>
void ssmax(const T* x, T* y, std::size_t n, T s, T b) noexcept {
  if (n == 0) return;
  const T c = static_cast<T>(ssmax_scale(s, b, n));
  // One finite element: exactly [1] (the general path rounds e^(cx) and
  // 1 / sum separately and may give 1 - 1 ulp; found by fuzz_variants).
  if (n == 1 && is_finite(x[0])) {
    y[0] = T(1);
    return;
  }
  scaled_softmax<A>(x, y, n, c);
}

}  // namespace detail
}  // namespace smax
