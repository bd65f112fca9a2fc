// smax — vectorized natural logarithm, for the variants that need one:
// gumbel_noise (-log(-log u)), log_stablemax (log1p |x|) and the powers of
// the entmax family (positive_power).
//
// Reduction: x = 2^k m with m in [sqrt(1/2), sqrt(2)), so f = m - 1 is exact
// (Sterbenz) and |f| <= 0.4143; then with s = f / (2 + f), |s| <= 0.1716,
//     log1p(f) = 2 atanh(s) = 2s + s R(s^2),  R(z) = sum_{j>=1} 2 z^j / (2j+1)
// evaluated in the rearrangement (Kahan's, as in fdlibm's analysis)
//     log1p(f) = f - (hf - s (hf + R)),  hf = f^2 / 2
// whose rounding errors all sit in a correction that is small against f.
// R is the Taylor series itself (no fitted coefficients): 4 terms for float
// (truncation below 2e-9 relative), 10 for double (below 7e-19). k ln2 is
// added as k ln2_hi + k ln2_lo.
// Measured (tests/test_gumbel.cpp, against long double): below 0.75 ulp
// for float and double.
//
// Two evaluation orders of that formula:
//  * fused (log_fused): every product that meets an add is an explicit fma
//    (fma_ of exp.hpp: AVX2, AVX-512, NEON). With Identical = true it is
//    bit-identical on every ISA: SSE2 (no FMA) computes each fma exactly
//    (fma_exact below), and no product is left where the compiler could
//    contract it (-ffp-contract=fast, the GCC default in GNU mode, fuses
//    a * b + c across inlined intrinsics on AVX2, AVX-512 and NEON, never
//    on SSE2). gumbel_noise<float> uses it; log1p_nonneg (log_stablemax)
//    uses Identical = false (SSE2 then rounds twice: same accuracy).
//  * strict (log_strict): no fma at all, every product rounded on its own
//    behind an optimization barrier, so that the compiler cannot fuse it:
//    only correctly rounded IEEE add, sub, mul, div, identical everywhere
//    without emulation. gumbel_noise<double> uses it (SSE2 has no cheap
//    exact double fma; double has no speed target).
#pragma once

#include <cmath>
#include <limits>

#include "../types.hpp"
#include "config.hpp"
#include "exp.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace smax {
namespace detail {

// Returns v unchanged, but through an empty asm the optimizer cannot see
// into: a product passed through it cannot be contracted with a following
// add. (Compilers without GNU asm get no barrier; smax's build uses GCC or
// Clang.)
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> opaque(xsimd::batch<T, A> v) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  typename xsimd::batch<T, A>::register_type r = v;
#if defined(__x86_64__) || defined(__i386__)
  __asm__("" : "+x"(r));
#elif defined(__aarch64__) || defined(__arm__)
  __asm__("" : "+w"(r));
#endif
  return xsimd::batch<T, A>(r);
#else
  return v;
#endif
}

#if defined(__SSE2__)
// Exact fma of two float lanes held as doubles: a * b is exact in double
// (24 + 24 bits), the sum is rounded to odd (round to nearest, then, if the
// TwoSum error is not zero and the last bit is even, one ulp towards the
// exact value), and rounding that to float is the correctly rounded fma
// (Boldo & Melquiond 2008: 53 >= 24 + 2 bits).
SMAX_INLINE __m128d fma_round_odd_pd(__m128d a, __m128d b, __m128d c) noexcept {
  const __m128d p = _mm_mul_pd(a, b);
  const __m128d s = _mm_add_pd(p, c);
  const __m128d bb = _mm_sub_pd(s, p);
  const __m128d e = _mm_add_pd(_mm_sub_pd(p, _mm_sub_pd(s, bb)), _mm_sub_pd(c, bb));
  const __m128i sb = _mm_castpd_si128(s);
  const __m128i one = _mm_set1_epi64x(1);
  // +1 in the bits moves |s| up: towards e when e and s have the same sign.
  const __m128i same = _mm_xor_si128(_mm_srli_epi64(_mm_xor_si128(sb, _mm_castpd_si128(e)), 63), one);
  const __m128i step = _mm_sub_epi64(_mm_slli_epi64(same, 1), one);  // +1 or -1
  const __m128i even = _mm_sub_epi64(_mm_setzero_si128(), _mm_xor_si128(_mm_and_si128(sb, one), one));
  const __m128i inexact = _mm_castpd_si128(_mm_cmpneq_pd(e, _mm_setzero_pd()));
  return _mm_castsi128_pd(_mm_add_epi64(sb, _mm_and_si128(step, _mm_and_si128(even, inexact))));
}

SMAX_INLINE __m128 fma_exact_sse2(__m128 a, __m128 b, __m128 c) noexcept {
  const __m128d lo = fma_round_odd_pd(_mm_cvtps_pd(a), _mm_cvtps_pd(b), _mm_cvtps_pd(c));
  const __m128d hi = fma_round_odd_pd(_mm_cvtps_pd(_mm_movehl_ps(a, a)), _mm_cvtps_pd(_mm_movehl_ps(b, b)),
                                      _mm_cvtps_pd(_mm_movehl_ps(c, c)));
  return _mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi));
}
#endif

// a * b + c rounded once, on every ISA, for float: the FMA instruction where
// there is one, the emulation above on SSE2, std::fma per lane elsewhere.
template <class A>
SMAX_INLINE xsimd::batch<float, A> fma_exact(xsimd::batch<float, A> a, xsimd::batch<float, A> b,
                                             xsimd::batch<float, A> c) noexcept {
  if constexpr (has_fma_v<A>) {
    return fma_<A, float>(a, b, c);
  } else {
#if defined(__SSE2__)
    if constexpr (std::is_same<A, xsimd::sse2>::value || std::is_same<A, xsimd::sse3>::value ||
                  std::is_same<A, xsimd::ssse3>::value || std::is_same<A, xsimd::sse4_1>::value ||
                  std::is_same<A, xsimd::sse4_2>::value)
      return fma_exact_sse2(a, b, c);
#endif
    constexpr std::size_t W = xsimd::batch<float, A>::size;
    alignas(64) float pa[W], pb[W], pc[W];
    a.store_aligned(pa);
    b.store_aligned(pb);
    c.store_aligned(pc);
    for (std::size_t i = 0; i < W; ++i) pa[i] = std::fma(pa[i], pb[i], pc[i]);
    return xsimd::batch<float, A>::load_aligned(pa);
  }
}

template <class T>
struct log_constants;

template <>
struct log_constants<float> : float_layout<float> {
  static constexpr uint_type one_bits = 0x3f800000u;        // 1.0f
  static constexpr uint_type sqrt_half_bits = 0x3f3504f3u;  // sqrt(1/2), rounded
  static constexpr uint_type magic_bits = 0x4b000000u;      // 2^23
  static constexpr float magic = 0x1p23f;
  // ln2_hi has 15 significant bits: k * ln2_hi is exact for |k| < 2^9.
  static constexpr float ln2_hi = 0x1.62e4p-1f;
  static constexpr float ln2_lo = 0x1.7f7d1cp-20f;
  static constexpr int terms = 4;  // R = z (2/3 + z (2/5 + z (2/7 + z 2/9)))
};

template <>
struct log_constants<double> : float_layout<double> {
  static constexpr uint_type one_bits = 0x3ff0000000000000ull;
  static constexpr uint_type sqrt_half_bits = 0x3fe6a09e667f3bcdull;
  static constexpr uint_type magic_bits = 0x4330000000000000ull;  // 2^52
  static constexpr double magic = 0x1p52;
  // 42 significant bits: k * ln2_hi exact for |k| < 2^11.
  static constexpr double ln2_hi = 0x1.62e42fefa38p-1;
  static constexpr double ln2_lo = 0x1.ef35793c7673p-45;
  static constexpr int terms = 10;
};

// x = 2^k m with m in [sqrt(1/2), sqrt(2)): f = m - 1 and k (as T), exactly.
// Adding (1 - sqrt(1/2)) in the bit domain moves the exponent boundary to
// sqrt(1/2): the exponent field of `shifted` is then k + bias, and its
// mantissa field added back to sqrt(1/2)'s bits gives m.
template <class A, class T>
SMAX_INLINE void log_reduce(xsimd::batch<T, A> x, xsimd::batch<T, A>& f, xsimd::batch<T, A>& k) noexcept {
  using B = xsimd::batch<T, A>;
  using C = log_constants<T>;
  using U = typename C::uint_type;
  using BU = xsimd::batch<U, A>;
  const BU shifted = xsimd::bitwise_cast<BU>(x) + BU(U(C::one_bits - C::sqrt_half_bits));
  const BU mbits = (shifted & BU((U(1) << C::mantissa_bits) - 1)) + BU(C::sqrt_half_bits);
  f = xsimd::bitwise_cast<B>(mbits) - B(T(1));
  // (2^p + k + bias) - (2^p + bias)
  k = xsimd::bitwise_cast<B>((shifted >> C::mantissa_bits) | BU(C::magic_bits)) - B(C::magic + T(C::exponent_bias));
}

// log(x) + extra for x positive, normal and finite (the callers guarantee
// it; other x give garbage, not a trap); `extra` is a term small against
// the result added before the last roundings (log1p's correction).
// Negate = true returns -log(x) at no cost (the sign folded into the last
// fma; the bits are exactly those of -log(x), RN being symmetric).
// (log_fused after the reduction: f and k from log_reduce)
template <class A, class T, bool Identical, bool Extra, bool Negate = false>
SMAX_INLINE xsimd::batch<T, A> log_fused_reduced(xsimd::batch<T, A> f, xsimd::batch<T, A> k,
                                                 xsimd::batch<T, A> extra) noexcept {
  using B = xsimd::batch<T, A>;
  using C = log_constants<T>;
  const auto fma = [](B a, B b, B c) {
    if constexpr (Identical)
      return fma_exact<A>(a, b, c);
    else
      return fma_<A, T>(a, b, c);
  };
  static_assert(!Identical || std::is_same<T, float>::value, "fma_exact is for float (double: log_strict)");
  const B s = div_<A, T>(f, f + B(T(2)));
  const B z = s * s;  // only ever a multiplicand: never contracted
  // R(z) / z by Horner: 2/3 + z (2/5 + ...)
  B r(T(2) / T(2 * C::terms + 1));
  for (int j = C::terms - 1; j >= 1; --j) r = fma(r, z, B(T(2) / T(2 * j + 1)));
  const B half_f = f * B(T(0.5));  // exact
  const B hf = half_f * f;         // only an fma addend below
  const B q = fma(r, z, hf);       // hf + R
  B klo = k * B(C::ln2_lo);        // only an fma addend
  if (Extra) klo = klo + extra;
  const B t = fma(s, q, klo);         // s (hf + R) + k ln2_lo
  const B a = fma(half_f, f, -t);  // hf - t
  if constexpr (Negate)
    return fma(k, B(-C::ln2_hi), a - f);  // -(k ln2_hi + (f - (hf - t)))
  else
    return fma(k, B(C::ln2_hi), f - a);  // k ln2_hi + (f - (hf - t))
}

template <class A, class T, bool Identical, bool Extra, bool Negate = false>
SMAX_INLINE xsimd::batch<T, A> log_fused(xsimd::batch<T, A> x, xsimd::batch<T, A> extra) noexcept {
  xsimd::batch<T, A> f, k;
  log_reduce<A, T>(x, f, k);
  return log_fused_reduced<A, T, Identical, Extra, Negate>(f, k, extra);
}

template <class A, class T, bool Strict>
SMAX_INLINE xsimd::batch<T, A> log_mul(xsimd::batch<T, A> a, xsimd::batch<T, A> b) noexcept {
  if (Strict) return opaque<A, T>(a * b);
  return a * b;
}

// The same formula with no fma: each product rounded on its own behind a
// barrier.
template <class A, class T, bool Negate = false>
SMAX_INLINE xsimd::batch<T, A> log_strict(xsimd::batch<T, A> x) noexcept {
  using B = xsimd::batch<T, A>;
  using C = log_constants<T>;
  B f, k;
  log_reduce<A, T>(x, f, k);
  const B s = div_<A, T>(f, f + B(T(2)));
  const B z = log_mul<A, T, true>(s, s);
  B r(T(2) / T(2 * C::terms + 1));
  for (int j = C::terms - 1; j >= 1; --j) r = log_mul<A, T, true>(r, z) + B(T(2) / T(2 * j + 1));
  r = log_mul<A, T, true>(r, z);
  const B hf = log_mul<A, T, true>(log_mul<A, T, true>(B(T(0.5)), f), f);  // 0.5 f is exact
  const B klo = log_mul<A, T, true>(k, B(C::ln2_lo));
  const B khi = log_mul<A, T, true>(k, B(C::ln2_hi));
  const B rest = (hf - (log_mul<A, T, true>(s, hf + r) + klo)) - f;
  if constexpr (Negate)
    return rest - khi;
  else
    return khi - rest;
}

// The log gumbel_noise uses, bit-identical on every ISA; Negate: -log(x).
template <class A, class T, bool Negate = false>
SMAX_INLINE xsimd::batch<T, A> log_identical(xsimd::batch<T, A> x) noexcept {
  if constexpr (std::is_same<T, float>::value)
    return log_fused<A, T, true, false, Negate>(x, x);
  else
    return log_strict<A, T, Negate>(x);
}

// log_identical of N independent vectors, in place, statement by statement
// across the N (so that their dependent chains run side by side).
template <class A, class T, bool Negate, std::size_t N>
SMAX_INLINE void log_identical_n(xsimd::batch<T, A> (&x)[N]) noexcept {
  // (Interleaving the statements across all N measured slower on AVX-512:
  // the temporaries of 16 vectors spill. Out-of-order execution overlaps
  // neighbouring logs well enough once they are independent.)
#pragma GCC unroll 16
  for (std::size_t j = 0; j < N; ++j) x[j] = log_identical<A, T, Negate>(x[j]);
}

// log(1 + t) for t >= 0 finite (log_stablemax's log s(x) = +-log1p|x|):
// u = 1 + t is rounded, and (t - (u - 1)) / u restores what the rounding
// lost (u - 1 is exact while u < 2^p; beyond, the term is below an ulp).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> log1p_nonneg(xsimd::batch<T, A> t) noexcept {
  using B = xsimd::batch<T, A>;
  const B u = t + B(T(1));
  return log_fused<A, T, false, true>(u, div_<A, T>(t - (u - B(T(1))), u));
}

// log(x) for any positive finite x, subnormal included (sparse.hpp's
// powers take the users' y): a subnormal x is scaled by 2^(p + 1) into the
// normal range first (exact), and its k takes the scale back (k ln2_hi
// stays exact). About an ulp (log_fused). (xsimd 8.1's double log falls
// back to scalar code on x86: 3-4 ns per element on AVX-512.)
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> log_positive(xsimd::batch<T, A> x) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr int p = std::numeric_limits<T>::digits;
  const auto sub = x < B(std::numeric_limits<T>::min());
  B f, k;
  log_reduce<A, T>(x * xsimd::select(sub, B(std::ldexp(T(1), p + 1)), B(T(1))), f, k);  // (no overflow)
  return log_fused_reduced<A, T, false, false>(f, xsimd::select(sub, k - B(T(p + 1)), k), B(T(0)));
}

// u^p = e^(p ln u) for u > 0 finite (subnormal included) and p finite:
// +inf above the largest T, +0 below the normal range (never a subnormal:
// shifted_exp's clamp). Built once, outside the loop (the exp's constants).
template <class A, class T>
struct positive_power {
  using B = xsimd::batch<T, A>;
  // Just past the largest T's log, where the power of two is still a
  // finite 2^(k - 2).
  static constexpr T top = std::is_same<T, float>::value ? T(89) : T(710);
  shifted_exp<A, T, false> ex{T(0)};

  SMAX_INLINE B operator()(B u, B p) const noexcept { return ex(xsimd::min(p * log_positive<A, T>(u), B(top))); }
};

}  // namespace detail
}  // namespace smax
