// smax — the vectorized exp primitive every softmax-family kernel uses.
//
// Two forms, one range reduction:
//
//  * shifted_exp<Split>: e^(x - m) for x <= m, the normalizer of every
//    max-subtracted kernel. With Split = true the subtraction x - m is never
//    rounded: x and m are range-reduced separately,
//        k = round((x - m) / ln2)          (any rounding of x - m is harmless here)
//        K = k + k_m                       (k_m = round(m / ln2), exact integers)
//        d = (x - K ln2) - r_m             (r_m = m - k_m ln2, computed once)
//        e^(x - m) = 2^k * e^d,  d in [-ln2/2, ln2/2]
//    so the result's error does not grow with |x - m| (a plain float x - m is
//    off by up to |x - m| * 2^-24, i.e. 6e-6 relative at x - m = -100).
//    Split needs |m| <= split_limit (the Cody-Waite products stay exact); when
//    |m| is larger every x with a non-negligible e^(x - m) lies within a factor
//    two of m, so x - m is exact (Sterbenz) and Split = false is just as good.
//
//  * extexp: e^x as (p, K) with e^x = p * 2^K, p in [0.7, 1.42], K an
//    integer-valued T: the "extended exponent" form of Dukhan & Ablavatski
//    (2020) that the two-pass softmax sums without overflow. Valid for
//    |x| <= split_limit; callers clamp or fall back outside.
//
// e^d = 1 + d + d^2 q(d): q is a Chebyshev fit (tools/fit_exp.cpp derives the
// coefficients) of degree 4 (float) / 9 (double) on [-0.36, 0.36], whose own
// error is 0.11 ulp (float) / 0.16 ulp (double). ln2 is split in three parts
// (Cody-Waite) whose first two products with K are exact with or without FMA,
// so SSE2 (no FMA) computes the same d as AVX2/AVX-512/NEON.
//
// Measured (tests/test_exp.cpp, dense sweep against long double, every ISA):
// max error of shifted_exp and extexp ~1 ulp for float and double; see README.
//
// Results below the smallest normal number are flushed to +0, except on
// AVX-512 where vscalefps produces the correctly rounded subnormal.
#pragma once

#include "config.hpp"

namespace smax {
namespace detail {

template <class T>
struct exp_constants;

template <>
struct exp_constants<float> {
  using int_type = std::int32_t;
  static constexpr int mantissa_bits = 23;
  static constexpr int exponent_bias = 127;
  static constexpr float log2e = 0x1.715476p+0f;
  // ln2 = ln2_hi + ln2_mid + ln2_lo; hi and mid have 11 significant bits, so
  // K * hi and K * mid are exact for |K| < 2^13.
  static constexpr float ln2_hi = 0x1.63p-1f;
  static constexpr float ln2_mid = -0x1.bdp-13f;
  static constexpr float ln2_lo = -0x1.05c61p-29f;
  // Round-to-integer by adding and subtracting 1.5 * 2^23: exact for
  // |v| < 2^22, and it leaves the integer in the low mantissa bits.
  static constexpr float round_magic = 0x1.8p+23f;
  // |m| (or |x| for extexp) up to which the split reduction is exact:
  // |K| <= 4096 * log2e + 150 < 2^13.
  static constexpr float split_limit = 4096.0f;
  // e^d coefficients c2..c6 (c0 = c1 = 1): tools/fit_exp.cpp.
  static constexpr int degree = 6;
  static constexpr float c[] = {0x1p-1f, 0x1.5554cap-3f, 0x1.55551p-5f, 0x1.121f3p-7f, 0x1.6d24c8p-10f};
  // Below this k, 2^k * e^d is under the smallest normal float (flushed).
  static constexpr float min_k = -126.0f;
  // With vscalefps subnormals are exact; below this k the result is 0.
  static constexpr float min_k_scalef = -151.0f;
};

template <>
struct exp_constants<double> {
  using int_type = std::int64_t;
  static constexpr int mantissa_bits = 52;
  static constexpr int exponent_bias = 1023;
  static constexpr double log2e = 0x1.71547652b82fep+0;
  // hi and mid have 32 significant bits: K * hi, K * mid exact for |K| < 2^21.
  static constexpr double ln2_hi = 0x1.62e42ffp-1;
  static constexpr double ln2_mid = -0x1.718432a2p-35;
  static constexpr double ln2_lo = 0x1.3c7673007e5edp-69;
  static constexpr double round_magic = 0x1.8p+52;
  // |K| <= 2^20 * log2e + 1100 < 2^21.
  static constexpr double split_limit = 1048576.0;
  static constexpr int degree = 11;
  static constexpr double c[] = {0x1.0000000000001p-1,  0x1.5555555555556p-3, 0x1.55555555534e5p-5,
                                 0x1.11111111106ffp-7,  0x1.6c16c17bbb0b3p-10, 0x1.a01a01a9c5439p-13,
                                 0x1.a019ad27fde88p-16, 0x1.71de063aaaaf7p-19, 0x1.289f213e8f877p-22,
                                 0x1.af49a8496b5b7p-26};
  static constexpr double min_k = -1022.0;
  static constexpr double min_k_scalef = -1076.0;
};

template <class A>
constexpr bool is_avx512_v = std::is_base_of<xsimd::avx512f, A>::value;

// round(v) for |v| < 2^22 (float) / 2^51 (double); larger |v| come back as an
// integer-valued number near v, which every caller treats as "far out of
// range" through its own limit check.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> round_to_int(xsimd::batch<T, A> v) noexcept {
  using C = exp_constants<T>;
  const xsimd::batch<T, A> magic(C::round_magic);
  return (v + magic) - magic;
}

// x - K * ln2 with the three-part split; exact products, so the result is
// within one rounding of the true remainder for |K| < 2^13 (float) / 2^21.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> cody_waite(xsimd::batch<T, A> x, xsimd::batch<T, A> K) noexcept {
  using C = exp_constants<T>;
  using B = xsimd::batch<T, A>;
  B r = xsimd::fnma(K, B(C::ln2_hi), x);
  r = xsimd::fnma(K, B(C::ln2_mid), r);
  return xsimd::fnma(K, B(C::ln2_lo), r);
}

// e^d for |d| <= 0.36 as 1 + d + d^2 q(d), all in Horner form.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> exp_poly(xsimd::batch<T, A> d) noexcept {
  using C = exp_constants<T>;
  using B = xsimd::batch<T, A>;
  constexpr int nc = C::degree - 1;  // c2 .. c_degree
  B p(C::c[nc - 1]);
  for (int i = nc - 2; i >= 0; --i) p = xsimd::fma(p, d, B(C::c[i]));
  p = xsimd::fma(p, d, B(T(1)));
  return xsimd::fma(p, d, B(T(1)));
}

// p * 2^k for integer-valued k <= 0 (bits of k + magic), result 0 where k is
// below the normal range. NaN in p stays NaN.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> scale_pow2(xsimd::batch<T, A> p, xsimd::batch<T, A> k) noexcept {
  using C = exp_constants<T>;
  using B = xsimd::batch<T, A>;
  using I = typename C::int_type;
  using BI = xsimd::batch<I, A>;
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    // vscalefps: p * 2^floor(k) in one instruction, subnormals included.
    B r;
    if constexpr (std::is_same<T, float>::value)
      r = _mm512_maskz_scalef_ps(__mmask16(0xFFFF), p, k);
    else
      r = _mm512_maskz_scalef_pd(__mmask8(0xFF), p, k);
    return xsimd::select(k < B(C::min_k_scalef), B(T(0)), r);
  }
#endif
  // k + magic holds k in its low mantissa bits; shifting them into the
  // exponent field and adding the bias gives the bits of 2^k.
  const BI bits = xsimd::bitwise_cast<BI>(k + B(C::round_magic));
  const BI pow2 = (bits << C::mantissa_bits) + BI(I(C::exponent_bias) << C::mantissa_bits);
  return xsimd::select(k < B(C::min_k), B(T(0)), p * xsimd::bitwise_cast<B>(pow2));
}

// e^(x - m) for x <= m (x may be -inf, NaN, or far below m). Build once per
// pass with the reference m, call per vector.
template <class A, class T, bool Split>
struct shifted_exp {
  using B = xsimd::batch<T, A>;
  using C = exp_constants<T>;
  B m, km, rm;

  explicit shifted_exp(T m_scalar) noexcept : m(m_scalar), km(T(0)), rm(T(0)) {
    if (Split) {
      // m = km ln2 + rm exactly up to the rounding of rm.
      km = round_to_int<A, T>(m * B(C::log2e));
      rm = cody_waite<A, T>(m, km);
    }
  }
  // The online algorithm keeps a per-lane reference.
  shifted_exp(B m_vec, B km_vec, B rm_vec) noexcept : m(m_vec), km(km_vec), rm(rm_vec) {}

  SMAX_INLINE B operator()(B x) const noexcept {
    const B t = x - m;
    const B k = round_to_int<A, T>(t * B(C::log2e));
    B d;
    if (Split)
      d = cody_waite<A, T>(x, k + km) - rm;
    else
      d = cody_waite<A, T>(t, k);
    return scale_pow2<A, T>(exp_poly<A, T>(d), k);
  }
};

// The split form is exact for |m| <= split_limit; beyond it the plain form is
// (see the file comment).
template <class T>
SMAX_INLINE bool use_split(T m) noexcept {
  return m <= exp_constants<T>::split_limit && m >= -exp_constants<T>::split_limit;
}

// e^x = p * 2^K for |x| <= split_limit.
template <class A, class T>
SMAX_INLINE void extexp(xsimd::batch<T, A> x, xsimd::batch<T, A>& p, xsimd::batch<T, A>& K) noexcept {
  using C = exp_constants<T>;
  using B = xsimd::batch<T, A>;
  K = round_to_int<A, T>(x * B(C::log2e));
  p = exp_poly<A, T>(cody_waite<A, T>(x, K));
}

}  // namespace detail
}  // namespace smax
