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
// max error of shifted_exp and extexp ~1 ulp for float and double; see
// docs/guarantees.md, "Accuracy".
//
// No function here forms a subnormal number, as a result or as an operand:
// results that would lie below (a few times) the smallest normal number are
// exactly +0, and every other one is built from normal numbers. Intel cores
// take a microcode assist (~100x a multiply) for each multiply, FMA or
// vscalefps that produces or consumes a subnormal, or underflows to 0,
// unless FTZ/DAZ is set, and a library cannot assume it is (measured:
// docs/tuning.md, "Subnormals"). Additions of subnormals cost nothing extra.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "../types.hpp"
#include "config.hpp"

namespace smax {
namespace detail {

template <class T>
struct exp_constants;

template <>
struct exp_constants<float> : float_layout<float> {
  static constexpr float log2e = 0x1.715476p+0f;
  // ln2 = ln2_hi + ln2_mid + ln2_lo; hi and mid have 11 significant bits, so
  // K * hi and K * mid are exact for |K| < 2^13.
  static constexpr float ln2_hi = 0x1.63p-1f;
  static constexpr float ln2_mid = -0x1.bdp-13f;
  static constexpr float ln2_lo = -0x1.05c61p-29f;
  // Where the ISA has a fused multiply-add, two parts suffice:
  // fnma(K, ln2_f1, x) is exact (see cody_waite) and K * ln2_f2 only needs to
  // be rounded once. ln2_f1 = ln2 rounded to float, ln2_f2 = ln2 - ln2_f1.
  static constexpr float ln2_f1 = 0x1.62e430p-1f;
  static constexpr float ln2_f2 = -0x1.05c610p-29f;
  // Round-to-integer by adding and subtracting 1.5 * 2^23: exact for
  // |v| < 2^22, and it leaves the integer in the low mantissa bits.
  static constexpr float round_magic = 0x1.8p+23f;
  // round_magic + exponent_bias: v + bias_magic rounds v to an integer K and
  // leaves K + 127 in the low mantissa bits, which shifted left by 23 are the
  // bits of 2^K (pow2_biased) for K + 127 in [1, 254], +0 for K + 127 = 0.
  static constexpr float bias_magic = 0x1.8000fep+23f;
  // |m| (or |x| for extexp) up to which the split reduction is exact:
  // |K| <= 4096 * log2e + 150 < 2^13.
  static constexpr float split_limit = 4096.0f;
  // e^d coefficients c2..c6 (c0 = c1 = 1): tools/fit_exp.cpp.
  static constexpr int degree = 6;
  static constexpr float c[] = {0x1p-1f, 0x1.5554cap-3f, 0x1.55551p-5f, 0x1.121f3p-7f, 0x1.6d24c8p-10f};
  // The smallest k for which ldexp_normal keeps p 2^k (p >= 1/2): the result
  // is then at least 2^-125, a normal float; below it the result is 0.
  static constexpr float min_k_normal = -124.0f;
  // How far below a reference shifted_exp clamps its argument: e^-110.9 is
  // far under 2^-124 (so the clamp changes no result) and the clamped
  // argument still range-reduces exactly.
  static constexpr float clamp_depth = 160 * 0.6931471805599453f;
};

template <>
struct exp_constants<double> : float_layout<double> {
  static constexpr double log2e = 0x1.71547652b82fep+0;
  // hi and mid have 32 significant bits: K * hi, K * mid exact for |K| < 2^21.
  static constexpr double ln2_hi = 0x1.62e42ffp-1;
  static constexpr double ln2_mid = -0x1.718432a2p-35;
  static constexpr double ln2_lo = 0x1.3c7673007e5edp-69;
  static constexpr double ln2_f1 = 0x1.62e42fefa39efp-1;
  static constexpr double ln2_f2 = 0x1.abc9e3b39803fp-56;
  static constexpr double round_magic = 0x1.8p+52;
  static constexpr double bias_magic = 0x1.80000000003ffp+52;
  // |K| <= 2^20 * log2e + 1100 < 2^21.
  static constexpr double split_limit = 1048576.0;
  static constexpr int degree = 11;
  static constexpr double c[] = {0x1.0000000000001p-1,  0x1.5555555555556p-3, 0x1.55555555534e5p-5,
                                 0x1.11111111106ffp-7,  0x1.6c16c17bbb0b3p-10, 0x1.a01a01a9c5439p-13,
                                 0x1.a019ad27fde88p-16, 0x1.71de063aaaaf7p-19, 0x1.289f213e8f877p-22,
                                 0x1.af49a8496b5b7p-26};
  static constexpr double min_k_normal = -1020.0;
  static constexpr double clamp_depth = 1085 * 0.6931471805599453;
};

// How closely e^d is evaluated. full: the float / double contract (about an
// ulp). The other two serve float terms that are rounded once to a 16-bit
// output (softmax to bf16 / fp16), whose half-ulp is at least 2^-9 / 2^-12
// relative: a polynomial of degree 3 / 4 (tools/fit_exp.cpp) and ln2 in one
// part fewer (up to 1.1e-5 more at |x| = split_limit). Measured relative
// error of a term (tests/test_exp.cpp, every ISA): 3.8e-4 / 2.2e-5; an
// output (term over sum) stays within twice that before its rounding, well
// inside the half-ulp. Four (bf16) and three (fp16) FMAs fewer per exp: the
// 16-bit softmax is compute-bound on cores whose AVX-512 runs at AVX2's
// rate. Float only.
enum class exp_accuracy { full, fp16_output, bf16_output };

template <class T, exp_accuracy Acc>
struct exp_poly_coeffs {
  static_assert(Acc == exp_accuracy::full, "the 16-bit accuracies are float only");
  static constexpr int degree = exp_constants<T>::degree;
  static constexpr const T* c = exp_constants<T>::c;
};
template <>
struct exp_poly_coeffs<float, exp_accuracy::fp16_output> {
  static constexpr int degree = 4;
  static constexpr float c[] = {0x1p-1f, 0x1.56fefep-3f, 0x1.5670fp-5f};
};
template <>
struct exp_poly_coeffs<float, exp_accuracy::bf16_output> {
  static constexpr int degree = 3;
  static constexpr float c[] = {0x1.0162a8p-1f, 0x1.5670e2p-3f};
};

// The x86 levels (each includes the ones below it).
template <class A>
constexpr bool is_avx512_v = std::is_base_of<xsimd::avx512f, A>::value;
template <class A>
constexpr bool is_x86_avx_v = std::is_base_of<xsimd::avx, A>::value;
template <class A>
constexpr bool is_x86_sse2_v = std::is_base_of<xsimd::sse2, A>::value;

// Whether A has a fused multiply-add that fma_/fnma_ below compile to (one
// rounding). The two-part Cody-Waite reduction and the fused rounding need
// it; SSE2 keeps the three-part split whose products are exact unfused.
template <class A>
constexpr bool has_fma_v = is_avx512_v<A> || std::is_base_of<xsimd::fma3<xsimd::avx2>, A>::value
#if XSIMD_WITH_NEON64
                           || std::is_base_of<xsimd::neon64, A>::value
#endif
    ;

// a * b + c and c - a * b, fused where has_fma_v<A>. xsimd 8.1 has no
// a * b + c (fma_) and -a * b + c (fnma_), fused on every ISA with FMA.
// AVX-512: the intrinsics (xsimd's generic form fuses only if the compiler
// contracts it, which clang does not across xsimd's operators). NEON:
// xsimd 8.1's fnma is the generic -a * b + c, fused only when the compiler
// happens to contract it (not at -O0, not in constant-folded code), and
// cody_waite's exact step needs the fused vfms.
template <bool Negated, class A, class T>
SMAX_INLINE xsimd::batch<T, A> fused_multiply_add(xsimd::batch<T, A> a, xsimd::batch<T, A> b,
                                                  xsimd::batch<T, A> c) noexcept {
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    if constexpr (std::is_same<T, float>::value)
      return Negated ? _mm512_fnmadd_ps(a, b, c) : _mm512_fmadd_ps(a, b, c);
    else
      return Negated ? _mm512_fnmadd_pd(a, b, c) : _mm512_fmadd_pd(a, b, c);
  }
#endif
#if XSIMD_WITH_NEON64
  if constexpr (Negated && std::is_base_of<xsimd::neon64, A>::value) {
    if constexpr (std::is_same<T, float>::value)
      return vfmsq_f32(c, a, b);
    else
      return vfmsq_f64(c, a, b);
  }
#endif
  if constexpr (Negated)
    return xsimd::fnma(a, b, c);
  else
    return xsimd::fma(a, b, c);
}
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> fma_(xsimd::batch<T, A> a, xsimd::batch<T, A> b, xsimd::batch<T, A> c) noexcept {
  return fused_multiply_add<false, A, T>(a, b, c);
}
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> fnma_(xsimd::batch<T, A> a, xsimd::batch<T, A> b, xsimd::batch<T, A> c) noexcept {
  return fused_multiply_add<true, A, T>(a, b, c);
}
// a * b - c, fused where has_fma_v<A> (xsimd 8.1's AVX-512 fms is the
// generic product and difference, which clang does not contract).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> fms_(xsimd::batch<T, A> a, xsimd::batch<T, A> b, xsimd::batch<T, A> c) noexcept {
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    if constexpr (std::is_same<T, float>::value)
      return _mm512_fmsub_ps(a, b, c);
    else
      return _mm512_fmsub_pd(a, b, c);
  }
#endif
  return xsimd::fms(a, b, c);
}

// a / b correctly rounded on every ISA. xsimd 8.1 divides float vectors on
// NEON, aarch64 included, by a reciprocal estimate and two Newton steps (up
// to an ulp off, found by gumbel_noise's cross-ISA bit test under QEMU);
// aarch64 has the IEEE division (vdivq_f32). Every float vector division in
// smax goes through here.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> div_(xsimd::batch<T, A> a, xsimd::batch<T, A> b) noexcept {
#if XSIMD_WITH_NEON64
  if constexpr (std::is_same<T, float>::value && std::is_base_of<xsimd::neon64, A>::value) return vdivq_f32(a, b);
#endif
  return a / b;
}

#if defined(__AVX512F__)
// num / den in the lanes of k, r elsewhere; the other lanes never divide.
// In asm: clang turns _mm512_mask_div_* into a division of every lane and
// a blend, which forms the subnormals the mask is there to avoid.
template <class A, class T, class K>
SMAX_INLINE xsimd::batch<T, A> div_where(K k, xsimd::batch<T, A> r, xsimd::batch<T, A> num,
                                         xsimd::batch<T, A> den) noexcept {
  auto v = r.data;
  constexpr bool f32 = std::is_same<T, float>::value;
#if defined(__GNUC__)
  if constexpr (f32)
    __asm__("vdivps %[d], %[n], %[r]%{%[k]%}" : [r] "+v"(v) : [d] "v"(den.data), [n] "v"(num.data), [k] "Yk"(k));
  else
    __asm__("vdivpd %[d], %[n], %[r]%{%[k]%}" : [r] "+v"(v) : [d] "v"(den.data), [n] "v"(num.data), [k] "Yk"(k));
#else
  if constexpr (f32)
    v = _mm512_mask_div_ps(v, k, num, den);
  else
    v = _mm512_mask_div_pd(v, k, num, den);
#endif
  return xsimd::batch<T, A>(v);
}
#endif

// round(v) for |v| < 2^22 (float) / 2^51 (double); larger |v| come back as an
// integer-valued number near v, which every caller treats as "far out of
// range" through its own limit check.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> round_to_int(xsimd::batch<T, A> v) noexcept {
  using C = exp_constants<T>;
  const xsimd::batch<T, A> magic(C::round_magic);
  return (v + magic) - magic;
}

// round(v * c): with FMA the product is rounded to an integer directly
// (one fused op instead of a multiply and an add).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> round_mul(xsimd::batch<T, A> v, xsimd::batch<T, A> c) noexcept {
  using C = exp_constants<T>;
  using B = xsimd::batch<T, A>;
  if constexpr (has_fma_v<A>)
    return fma_<A, T>(v, c, B(C::round_magic)) - B(C::round_magic);
  else
    return round_to_int<A, T>(v * c);
}

// v * c + magic in one rounding where A has FMA: with magic = round_magic
// (+ an integer offset) the result is round(v * c) + magic exactly.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> mul_add_magic(xsimd::batch<T, A> v, xsimd::batch<T, A> c,
                                             xsimd::batch<T, A> magic) noexcept {
  if constexpr (has_fma_v<A>)
    return fma_<A, T>(v, c, magic);
  else
    return v * c + magic;
}

// 2^K from Kb = K + bias_magic (+ any offset folded into the magic), an
// exact integer-valued T: the low mantissa bits K + bias moved into the
// exponent field. Valid for K + bias in [1, 2 bias]; K + bias = 0 gives +0.
// One shift; the callers clamp Kb first so that the field never goes below 0.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> pow2_biased(xsimd::batch<T, A> Kb) noexcept {
  using C = exp_constants<T>;
  using BI = xsimd::batch<typename C::int_type, A>;
  return xsimd::bitwise_cast<xsimd::batch<T, A>>(xsimd::bitwise_cast<BI>(Kb) << C::mantissa_bits);
}

// x - K * ln2, within one rounding of the true remainder, for integer-valued
// |K| < 2^13 (float) / 2^21 (double) and x the argument K was rounded from.
//  * without FMA, ln2 in three parts whose first two products with K are
//    exact, so the unfused SSE2 path gets the same d;
//  * with FMA, two parts: r = fnma(K, ln2_f1, x) is exact, because x and
//    K * ln2_f1 are both multiples of 2^-24 (float; |x| >= 1/2, else |K| <= 1
//    and the same holds with 2^-25) and |r| < 1/2 fits in 24 bits; the
//    second product K * ln2_f2 is below 2^-16 and is rounded once.
// For Acc other than full the last part is left out (exp_accuracy).
template <class A, class T, exp_accuracy Acc = exp_accuracy::full>
SMAX_INLINE xsimd::batch<T, A> cody_waite(xsimd::batch<T, A> x, xsimd::batch<T, A> K) noexcept {
  using C = exp_constants<T>;
  using B = xsimd::batch<T, A>;
  constexpr bool full = Acc == exp_accuracy::full;
  if constexpr (has_fma_v<A>) {
    const B r = fnma_<A, T>(K, B(C::ln2_f1), x);
    return full ? fnma_<A, T>(K, B(C::ln2_f2), r) : r;
  } else {
    B r = xsimd::fnma(K, B(C::ln2_hi), x);
    r = xsimd::fnma(K, B(C::ln2_mid), r);
    return full ? xsimd::fnma(K, B(C::ln2_lo), r) : r;
  }
}

// Where two_pass_sum forms its terms from sixteenths of a power of two:
// AVX-512, float, full accuracy. There q = round(16 x log2e) splits as
// 16 k + j, e^x = 2^k 2^(j/16) e^r with |r| <= ln2/32, and e^r needs a
// cubic (error below 3e-9) instead of the degree-6 polynomial: 7 FMA-pipe
// operations per vector instead of 10, plus a 16-entry table lookup
// (vpermps) and two integer operations (docs/tuning.md, "Sixteenths").
template <class A, class T, exp_accuracy Acc>
constexpr bool sixteenths_v = is_avx512_v<A> && std::is_same<T, float>::value && Acc == exp_accuracy::full;

// e^x 2^-E = p scale given Kq = 16 x log2e + (1.5 2^23 - 16 E) rounded to
// an integer (so that q - 16 E = Kq - 1.5 2^23 and k - E = floor of that /
// 16), for k - E in [-126, 127]: scale is T[j] with k - E added to its
// exponent field (normal), p the cubic of r = x - q ln2/16.
template <class A>
SMAX_INLINE xsimd::batch<float, A> sixteenths_term(xsimd::batch<float, A> x, xsimd::batch<float, A> Kq,
                                                   xsimd::batch<float, A> magic,
                                                   xsimd::batch<float, A>& scale_out) noexcept {
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    using C = exp_constants<float>;
    using B = xsimd::batch<float, A>;
    // 2^(j/16), j = 0..15, each rounded to nearest
    const __m512 table = _mm512_set_ps(0x1.ea4afap+0f, 0x1.d5818ep+0f, 0x1.c199bep+0f, 0x1.ae89fap+0f,
                                       0x1.9c4918p+0f, 0x1.8ace54p+0f, 0x1.7a1148p+0f, 0x1.6a09e6p+0f,
                                       0x1.5ab07ep+0f, 0x1.4bfdaep+0f, 0x1.3dea64p+0f, 0x1.306fep+0f,
                                       0x1.2387a6p+0f, 0x1.172b84p+0f, 0x1.0b5586p+0f, 0x1p+0f);
    const B q = Kq - magic;  // q - 16 E + 16 E: exact
    B r = fnma_<A, float>(q, B(C::ln2_f1 * 0x1p-4f), x);
    r = fnma_<A, float>(q, B(C::ln2_f2 * 0x1p-4f), r);
    // (1 + r + c2 r^2 + c3 r^3 fitted to e^r on |r| <= ln2/32: relative
    // error 2.6e-9, the rounding of c2 and c3 included; Taylor's: 9.3e-9)
    B p = fma_<A, float>(B(0x1.55547cp-3f), r, B(0x1.0001dap-1f));
    p = fma_<A, float>(p, r, B(1.0f));
    p = fma_<A, float>(p, r, B(1.0f));
    const __m512i bits = _mm512_castps_si512(Kq);
    const __m512i scale = _mm512_add_epi32(_mm512_castps_si512(_mm512_permutexvar_ps(bits, table)),
                                           _mm512_slli_epi32(_mm512_srli_epi32(bits, 4), 23));
    scale_out = B(_mm512_castsi512_ps(scale));
    return p;
  }
#endif
  (void)Kq, (void)magic, (void)scale_out;
  return x;  // (never used: sixteenths_v)
}

// Without FMA, the polynomials' unfused products p d (|p| >= 2^-26) would
// be subnormal for a d near 0 (x near 0 reduced with K = 0): d is replaced by
// d + c, c = 2^-60 (double 2^-900), which is 0 or at least c 2^-24 (double
// c 2^-53) in magnitude (where |d| is within a factor 2 of c the sum is
// exact, a multiple of that; elsewhere it is above c / 2). The sum is d
// itself where |d| > c 2^25 (double 2^54) and within 2c of d below, so e^d
// moves by less than 2^-58 relative. One addition, no compare.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> poly_argument(xsimd::batch<T, A> d) noexcept {
  if constexpr (has_fma_v<A>) {
    return d;
  } else {
    return d + xsimd::batch<T, A>(static_cast<T>(sizeof(T) == 4 ? 0x1p-60 : 0x1p-900));
  }
}

// e^d for |d| <= 0.36 as 1 + d + d^2 q(d), all in Horner form.
template <class A, class T, exp_accuracy Acc = exp_accuracy::full>
SMAX_INLINE xsimd::batch<T, A> exp_poly(xsimd::batch<T, A> d) noexcept {
  using C = exp_poly_coeffs<T, Acc>;
  using B = xsimd::batch<T, A>;
  constexpr int nc = C::degree - 1;  // c2 .. c_degree
  d = poly_argument<A, T>(d);
  B p(C::c[nc - 1]);
  for (int i = nc - 2; i >= 0; --i) p = fma_<A, T>(p, d, B(C::c[i]));
  p = fma_<A, T>(p, d, B(T(1)));
  return fma_<A, T>(p, d, B(T(1)));
}

// s * e^d for |d| <= 0.36 with the scale folded into the coefficients (no
// extra multiply per vector): the final normalizing pass of a softmax
// computes e^(x - m) / sum this way. Every scaled coefficient is rounded
// once, an error below 2^-24 of its term (the terms beyond 1 + d are under
// 0.07), so the result is as accurate as s rounded times exp_poly(d).
template <class A, class T, exp_accuracy Acc = exp_accuracy::full>
struct scaled_poly {
  using B = xsimd::batch<T, A>;
  using C = exp_poly_coeffs<T, Acc>;
  static constexpr int nc = C::degree - 1;
  B c[nc];
  B s;
  explicit scaled_poly(T scale) noexcept : s(scale) {
    for (int i = 0; i < nc; ++i) c[i] = B(static_cast<T>(static_cast<double>(C::c[i]) * scale));
  }
  SMAX_INLINE B operator()(B d) const noexcept {
    d = poly_argument<A, T>(d);
    B p = c[nc - 1];
    for (int i = nc - 2; i >= 0; --i) p = fma_<A, T>(p, d, c[i]);
    p = fma_<A, T>(p, d, s);
    return fma_<A, T>(p, d, s);
  }
};

// A positive scale s = mantissa * 2^exponent, mantissa in [1, 2): the
// kernels fold the mantissa into the polynomial (scaled_poly) and the
// exponent into the power of two, so that s * e^d * 2^k is formed as one
// product of normal numbers whatever s is.
template <class T>
struct split_scale {
  T mantissa, exponent;
  explicit split_scale(T s) noexcept {
    int e = 0;
    const T f = std::frexp(s, &e);  // s = f 2^e, f in [0.5, 1)
    mantissa = 2 * f;
    exponent = static_cast<T>(e - 1);
  }
};

// p * 2^k for integer-valued k <= bias - 2 (127 - 2 for float) and |p| in
// [1/2, 2) (or 0, inf, NaN), with the result +0 where k < min_k_normal:
// every other result is at least 2^-125 (float), so no subnormal is formed
// (and no product underflows). A NaN p gives NaN.
//  * AVX-512: vscalefps with the lanes below min_k_normal masked off
//    (masked lanes cost nothing, however small their result would be).
//  * elsewhere: (4 p) * 2^(k - 2), the power built from its bits with the
//    exponent field k - 2 + bias clamped at 0, which reads as +0.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> ldexp_normal(xsimd::batch<T, A> p, xsimd::batch<T, A> k) noexcept {
  using C = exp_constants<T>;
  using B = xsimd::batch<T, A>;
  using I = typename C::int_type;
  using BI = xsimd::batch<I, A>;
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    // Not less than (unordered true): a NaN k keeps its lane.
    if constexpr (std::is_same<T, float>::value)
      return _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(k, B(C::min_k_normal - T(0.5)), _CMP_NLT_UQ), p, k);
    else
      return _mm512_maskz_scalef_pd(_mm512_cmp_pd_mask(k, B(C::min_k_normal - T(0.5)), _CMP_NLT_UQ), p, k);
  }
#endif
  // max(c, k), not max(k, c): x86 max returns its second operand for NaN.
  const B kk = xsimd::max(B(C::min_k_normal - T(1)), k);
  const BI bits = xsimd::bitwise_cast<BI>(kk + B(C::round_magic));
  const BI pow2 = (bits << C::mantissa_bits) + BI(I(C::exponent_bias - 2) << C::mantissa_bits);
  return (p * B(T(4))) * xsimd::bitwise_cast<B>(pow2);
}

// The biased exponent field of each lane, as an integer: 0 for zero and
// subnormals, 2 bias + 1 for inf and NaN.
template <class A, class T>
SMAX_INLINE xsimd::batch<typename float_layout<T>::int_type, A> exponent_field(xsimd::batch<T, A> v) noexcept {
  using L = float_layout<T>;
  using I = typename L::int_type;
  using BI = xsimd::batch<I, A>;
  return (xsimd::bitwise_cast<BI>(v) & BI(I(2 * L::exponent_bias + 1) << L::mantissa_bits)) >> L::mantissa_bits;
}

// a with the lanes zeroed where a * b may fall below 2^(1 - bias), the
// smallest normal number, judged by the exponents alone (their sum is the
// product's within one): the kernel's products of a then form no subnormal.
// Zero operands zero the lane, and so do subnormal ones on AVX-512 (getexp
// sees their true exponent); the integer fields read a subnormal as 2^-bias,
// so there it is kept beside |b| >= 2 (a subnormal product of a subnormal
// input: docs/guarantees.md). NaN and inf operands keep the lane.
//  * AVX-512: vgetexpps on both (-inf for 0), a masked move.
//  * elsewhere: the biased exponent fields as integers, an integer select.
// (Above: the bound raised by that many binades.)
template <class A, class T, int Above = 0>
SMAX_INLINE xsimd::batch<T, A> keep_if_normal_product(xsimd::batch<T, A> a, xsimd::batch<T, A> b) noexcept {
  using C = exp_constants<T>;
  using B = xsimd::batch<T, A>;
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    // getexp(a) + getexp(b) >= 1 - bias; unordered (NaN, inf + -inf) keeps.
    if constexpr (std::is_same<T, float>::value)
      return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(_mm512_add_ps(_mm512_getexp_ps(a), _mm512_getexp_ps(b)),
                                                    B(T(1 + Above - C::exponent_bias)), _CMP_NLT_UQ),
                                 a);
    else
      return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(_mm512_add_pd(_mm512_getexp_pd(a), _mm512_getexp_pd(b)),
                                                    B(T(1 + Above - C::exponent_bias)), _CMP_NLT_UQ),
                                 a);
  }
#endif
  using I = typename C::int_type;
  using BI = xsimd::batch<I, A>;
  const BI ia = xsimd::bitwise_cast<BI>(a);
  const BI ea = exponent_field<A>(a), eb = exponent_field<A>(b);
  // Fields e_a + e_b - bias >= 1 (a NaN or inf field is 2 bias + 1).
  return xsimd::bitwise_cast<B>(xsimd::select((ea + eb) >= BI(I(C::exponent_bias + 1 + Above)), ia, BI(I(0))));
}

// a * b, or +0 where that product may be below the smallest normal number
// (never formed). For the rare rescaling steps of the single-pass sums and
// the products of small outputs in the backward passes.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> mul_normal(xsimd::batch<T, A> a, xsimd::batch<T, A> b) noexcept {
  return keep_if_normal_product<A, T>(a, b) * b;
}

// d - m for one vector with no subnormal formed, for an m with
// 0 < |m| < 2^(digits) min (below, m = 0 and m at least that bound take
// d - m as it is: two values of ulp >= min, or one far larger than the
// other, differ by 0 or a normal number). Entries with |d| < 2^(digits + 1)
// min are subtracted scaled by 2^digits, where their difference is a
// multiple of min, and give 0 where it lies below the normal range (the
// contract's outputs below FLT_MIN); the others take d - m (normal).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> difference_normal_or_zero(xsimd::batch<T, A> d, xsimd::batch<T, A> m) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr int p = exp_constants<T>::mantissa_bits + 1;
  const B up(std::ldexp(T(1), p)), down(std::ldexp(T(1), -p));
  const auto small = xsimd::abs(d) < B(std::ldexp(std::numeric_limits<T>::min(), p + 1));
  const B large = xsimd::select(small, B(T(0)), d) - m;
  B scaled = xsimd::select(small, d, B(T(0))) * up - m * up;
  scaled = xsimd::select(xsimd::abs(scaled) >= B(std::numeric_limits<T>::min() * std::ldexp(T(1), p)), scaled, B(T(0)));
  return xsimd::select(small, scaled * down, large);
}

// Whether a lane of d0 or d1 is nonzero and below `floor` in magnitude.
// The loop's test is min(|d0|, |d1|) < floor; zeros, which pass it too,
// are told apart only in the rare vectors that do.
template <class A, class T>
SMAX_INLINE bool any_tiny_nonzero(xsimd::batch<T, A> d0, xsimd::batch<T, A> d1, xsimd::batch<T, A> floor) noexcept {
  using B = xsimd::batch<T, A>;
  B least;
#if defined(__AVX512DQ__)
  if constexpr (is_avx512_v<A>) {  // (vrangeps: the lesser magnitude, sign cleared, in one)
    if constexpr (std::is_same<T, float>::value)
      least = _mm512_range_ps(d0, d1, 0x0A);
    else
      least = _mm512_range_pd(d0, d1, 0x0A);
  } else
#endif
    least = xsimd::min(xsimd::abs(d0), xsimd::abs(d1));
  if (__builtin_expect(!xsimd::any(least < floor), 1)) return false;
  const B zero(T(0));
  return xsimd::any(((xsimd::abs(d0) < floor) & (d0 != zero)) | ((xsimd::abs(d1) < floor) & (d1 != zero)));
}

// Whether d - m is 0 or normal (or not finite) for every normal d, so
// that difference_normal_or_zero is not needed (NaN and inf m too).
template <class T>
bool difference_always_normal(T m) noexcept {
  return m == T(0) || !(std::fabs(m) < std::ldexp(std::numeric_limits<T>::min(), exp_constants<T>::mantissa_bits + 1));
}

// a * t for a term t (+0 or a normal number, as the exps give), or +0 where
// that product may fall below the smallest normal number (never formed).
// a: normal, +-0 or -inf (-inf beside t = 0, an exp's flushed term, gives
// +0: the limit of x e^x); with NonnegFinite, normal or +-0 with a >= 0
// (one step less: no cap). A subnormal a, an input already below the
// normal range, is kept only beside t >= 1 and its product may then be
// subnormal, as with mul_normal beside |b| >= 2. Judged on the bit patterns
// as integers: with a' = min(|a|, 1), bits(t) > bits(1) + bits(min) - 1 -
// bits(a') holds exactly where the exponents' sum, carried by the
// mantissas' sum, reaches the normal range, and (1 + f)(1 + g) >= 1 + f + g
// makes every kept product normal (where |a| > 1 the test is t >= min,
// enough as |a t| > t; without the cap no difference wraps either, |a|
// having a clear sign bit). What it drops is below 1.125 times the smallest
// normal number. Five or six operations on AVX2 (four or five on AVX-512)
// where mul_normal with a select for -inf takes ten (eight): sa_softmax's
// write pass out of cache.
// (SSE2 has no 64-bit integer compare: double keeps mul_normal there,
// which drops up to twice the smallest normal number)
template <class A, class T>
constexpr bool mul_term_by_bits_v =
    !(std::is_same<T, double>::value && is_x86_sse2_v<A> && !std::is_base_of<xsimd::sse4_2, A>::value);
template <class A, class T, bool NonnegFinite = false>
SMAX_INLINE xsimd::batch<T, A> mul_term_normal(xsimd::batch<T, A> a, xsimd::batch<T, A> t) noexcept {
  using B = xsimd::batch<T, A>;
  using L = float_layout<T>;
  using I = typename L::int_type;
  using BI = xsimd::batch<I, A>;
  if constexpr (!mul_term_by_bits_v<A, T>) {
    if constexpr (NonnegFinite) return mul_normal<A, T>(a, t);
    return mul_normal<A, T>(xsimd::select(a == B(-std::numeric_limits<T>::infinity()), B(T(0)), a), t);
  } else {
    const T one = T(1), tiny = std::numeric_limits<T>::min();
    I one_bits, tiny_bits;
    std::memcpy(&one_bits, &one, sizeof one);
    std::memcpy(&tiny_bits, &tiny, sizeof tiny);
    // (min(|a|, 1), not min(1, |a|): a NaN a is outside the contract)
    const B capped = NonnegFinite ? xsimd::abs(a) : xsimd::min(xsimd::abs(a), B(one));  // (abs: -0 is +0)
    const BI room = BI(I(one_bits + tiny_bits - 1)) - xsimd::bitwise_cast<BI>(capped);
    const BI tb = xsimd::bitwise_cast<BI>(t);
#if defined(__AVX512F__)
    if constexpr (is_avx512_v<A>) {
      if constexpr (std::is_same<T, float>::value)
        return _mm512_maskz_mul_ps(_mm512_cmpgt_epi32_mask(tb, room), a, t);
      else
        return _mm512_maskz_mul_pd(_mm512_cmpgt_epi64_mask(tb, room), a, t);
    }
#endif
    return xsimd::bitwise_cast<B>(xsimd::select(tb > room, xsimd::bitwise_cast<BI>(a), BI(I(0)))) * t;
  }
}

// a * b where `keep`, else +0: for a caller whose own bounds make every
// kept product normal (one or two compares, where mul_normal judges both
// exponents). AVX-512 never multiplies the other lanes; elsewhere they are
// 0 * b, so b must be finite and not subnormal there.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> mul_where(xsimd::batch_bool<T, A> keep, xsimd::batch<T, A> a,
                                         xsimd::batch<T, A> b) noexcept {
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    if constexpr (std::is_same<T, float>::value)
      return _mm512_maskz_mul_ps(keep.data, a, b);
    else
      return _mm512_maskz_mul_pd(keep.data, a, b);
  }
#endif
  return xsimd::select(keep, a, xsimd::batch<T, A>(T(0))) * b;
}

// a * b - c where `keep`; the other lanes are never computed on AVX-512
// (+0 there) and are computed on `other` elsewhere, which the caller picks
// so that no subnormal is formed (what those lanes hold is the caller's to
// discard, e.g. by a mul_where on the same mask).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> fms_where(xsimd::batch_bool<T, A> keep, xsimd::batch<T, A> a, xsimd::batch<T, A> b,
                                         xsimd::batch<T, A> c, xsimd::batch<T, A> other) noexcept {
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    (void)other;
    if constexpr (std::is_same<T, float>::value)
      return _mm512_maskz_fmsub_ps(keep.data, a, b, c);
    else
      return _mm512_maskz_fmsub_pd(keep.data, a, b, c);
  }
#endif
  return xsimd::fms(xsimd::select(keep, a, other), b, c);
}

// a * b, or +0 where it may lie below 2^mantissa_bits times the smallest
// normal number (float 2^-103, double 2^-970; judged by the exponents, so
// some up to twice that are dropped too): every kept product is a multiple
// of the smallest normal, and so is any sum of them, which is then 0 or
// normal. For sums of products of either sign in T lanes, where
// cancellation could otherwise leave a subnormal; each dropped product is
// below 2^-102 (float).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> mul_summable(xsimd::batch<T, A> a, xsimd::batch<T, A> b) noexcept {
  return keep_if_normal_product<A, T, exp_constants<T>::mantissa_bits>(a, b) * b;
}

// r * 2^k for any r and integer-valued k <= 0, +0 where the result would
// fall below 2^(2 - bias) (float 2^-125), never forming a subnormal. NaN
// and inf stay. For the rescaling of a combined result back from a shifted
// range (softpick_backward's deep lanes).
//  * AVX-512: vscalefps with the lanes below masked off (getexp(r) + k).
//  * elsewhere: integer arithmetic on r's exponent field alone.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> ldexp_flush(xsimd::batch<T, A> r, xsimd::batch<T, A> k) noexcept {
  using C = exp_constants<T>;
  using B = xsimd::batch<T, A>;
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    const B lowest(T(2 - C::exponent_bias) - T(0.5));
    if constexpr (std::is_same<T, float>::value)
      return _mm512_maskz_scalef_ps(_mm512_cmp_ps_mask(_mm512_add_ps(_mm512_getexp_ps(r), k), lowest, _CMP_NLT_UQ), r, k);
    else
      return _mm512_maskz_scalef_pd(_mm512_cmp_pd_mask(_mm512_add_pd(_mm512_getexp_pd(r), k), lowest, _CMP_NLT_UQ), r, k);
  }
#endif
  using I = typename C::int_type;
  using BI = xsimd::batch<I, A>;
  const BI bits = xsimd::bitwise_cast<BI>(r);
  const BI er = exponent_field<A>(r);
  // k as an integer: the low bits of k + round_magic, less the magic's own
  // (k >= -2^22 float; below that, 0 anyway).
  const B kc = xsimd::max(B(T(-(I(1) << 20))), k);
  const BI ki = xsimd::bitwise_cast<BI>(kc + B(C::round_magic)) - xsimd::bitwise_cast<BI>(B(C::round_magic));
  const BI scaled = bits + (ki << C::mantissa_bits);
  const BI special(I(2 * C::exponent_bias + 1));
  const BI out = xsimd::select(er == special, bits, xsimd::select((er + ki) >= BI(I(2)), scaled, BI(I(0))));
  return xsimd::bitwise_cast<B>(out);
}

// e * s for e >= 0 (an exp, a ratio) and a positive finite scale s, +0
// where that product would fall below the smallest normal number: e is
// compared with min / s first, and those lanes are never multiplied. The
// normalizing pass of a kernel that stored or recomputes unnormalized terms.
// NaN stays NaN.
template <class A, class T>
struct scale_normal {
  using B = xsimd::batch<T, A>;
  B s, cut;
  explicit scale_normal(T scale) noexcept
      : s(scale),
        // (1 + 2^-20): the rounded cut must not let a product land just below
        // min. A scale >= 1 keeps every normal e normal: the cut is min itself
        // (min / s would be subnormal, and so would every compare with it).
        cut(scale >= T(1) ? std::numeric_limits<T>::min()
                          : static_cast<T>(static_cast<double>(std::numeric_limits<T>::min()) /
                                           static_cast<double>(scale) * (1 + 0x1p-20))) {}
  SMAX_INLINE B operator()(B e) const noexcept {
#if defined(__AVX512F__)
    if constexpr (is_avx512_v<A>) {
      if constexpr (std::is_same<T, float>::value)
        return _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(e, cut, _CMP_NLT_UQ), e, s);
      else
        return _mm512_maskz_mul_pd(_mm512_cmp_pd_mask(e, cut, _CMP_NLT_UQ), e, s);
    }
#endif
    return xsimd::select(e < cut, B(T(0)), e) * s;
  }
};

// mul_normal<A, T>(a, c) for a constant c in (0, 2) and an a that is
// normal, zero, infinite or NaN: the same lanes kept (|a| >= 2^(1 - bias -
// ilogb c), as the exponents judge it), the same bits, with one compare
// instead of the exponent fields' integer arithmetic. For the normalizing pass over signed
// terms (docs/tuning.md, "Signed normalizing pass").
template <class A, class T>
struct mul_normal_by {
  using B = xsimd::batch<T, A>;
  B c, cut;
  explicit mul_normal_by(T factor) noexcept : c(factor), cut(cut_for(factor)) {}
  // 2^(1 - bias - ilogb c), built from c's exponent field f: bias + 1 - f.
  static T cut_for(T factor) noexcept {
    using L = float_layout<T>;
    typename L::uint_type bits;
    std::memcpy(&bits, &factor, sizeof bits);
    const auto field = (bits >> L::mantissa_bits) & ((typename L::uint_type(1) << (8 * sizeof(T) - 1 - L::mantissa_bits)) - 1);
    bits = (typename L::uint_type(L::exponent_bias + 1) - field) << L::mantissa_bits;
    T cut;
    std::memcpy(&cut, &bits, sizeof cut);
    return cut;
  }
  SMAX_INLINE B operator()(B a) const noexcept {
    // (AVX-512, float: a masked compare and multiply, 3-5% faster in
    // sa_softmax on Zen 5, where Zen 4 had measured no difference; double
    // keeps the getexp form, 4-5% faster on Zen 5: docs/tuning.md)
#if defined(__AVX512F__)
    if constexpr (is_avx512_v<A>) {
      if constexpr (std::is_same<T, float>::value)
        return _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(xsimd::abs(a), cut, _CMP_NLT_UQ), a, c);
      else
        return mul_normal<A, T>(a, c);
    }
#endif
    return xsimd::select(xsimd::abs(a) < cut, B(T(0)), a) * c;
  }
};

// s * e^(x - m) for x <= m (x may be -inf, NaN, or far below m). Build once
// per pass with the reference m (and the scale s, 1 by default), call per
// vector. Results below 2^-125 (float) are +0: the argument is clamped at
// clamp_depth below m, and the power of two is built with the scale's
// exponent (split_scale) and a factor 4 folded in, its exponent field
// clamped at 0 (+0), so the one product p * 2^k is of normal numbers.
template <class A, class T, bool Split>
struct shifted_exp {
  using B = xsimd::batch<T, A>;
  using C = exp_constants<T>;
  static constexpr bool split = Split;
  B m, km, rm;
  B lo;     // Split: x is clamped here; else x - m is
  B magic;  // bias_magic - 2 + exponent of the scale
  scaled_poly<A, T> poly;  // 4 * mantissa of the scale

  explicit shifted_exp(T m_scalar, T scale = T(1)) noexcept
      : m(m_scalar), km(T(0)), rm(T(0)), lo(Split ? m_scalar - C::clamp_depth : -C::clamp_depth),
        magic(T(0)), poly(T(4)) {
    if (Split) {
      // m = km ln2 + rm exactly up to the rounding of rm.
      km = round_mul<A, T>(m, B(C::log2e));
      rm = cody_waite<A, T>(m, km);
    }
    set_scale(scale);
  }
  // The online algorithm keeps a per-lane reference.
  shifted_exp(B m_vec, B km_vec, B rm_vec) noexcept
      : m(m_vec), km(km_vec), rm(rm_vec), lo(m_vec - B(C::clamp_depth)), magic(T(0)), poly(T(4)) {
    set_scale(T(1));
  }
  // e with its results multiplied by scale (> 0, or any finite scale for
  // the backward passes: the sign goes into the polynomial).
  shifted_exp(const shifted_exp& e, T scale) noexcept : shifted_exp(e) { set_scale(scale); }

  void set_scale(T scale) noexcept {
    const split_scale<T> s(scale < T(0) ? -scale : scale);
    magic = B(static_cast<T>(C::bias_magic - T(2) + s.exponent));
    poly = scaled_poly<A, T>(T(4) * (scale < T(0) ? -s.mantissa : s.mantissa));
    // A scale above 1 lifts the clamped term by its exponent: the clamp goes
    // as much deeper, so that it still gives 0 (log_softmax_backward's
    // e^-DBL_MAX times a sum of 6e250 came out 1.5e-76: fuzz_backward). The
    // reduction stays exact: |K| <= 160 + 128 (float), 1085 + 1024 (double).
    if (s.exponent > T(0)) lo = lo - B(s.exponent * T(0.6931471805599453));
  }

  // e^(x - m) = e^d * 2^k, d in [-ln2/2, ln2/2] (slightly more where the
  // rounding of x - m moves k by one: exp_poly covers |d| <= 0.36), with
  // kb = k + magic, the bits of the power of two.
  SMAX_INLINE void reduce(B x, B& d, B& kb) const noexcept {
    if (Split) {
      const B xc = xsimd::max(lo, x);  // keeps NaN (x86 max returns its second operand)
      kb = mul_add_magic<A, T>(xc - m, B(C::log2e), magic);
      d = cody_waite<A, T>(xc, (kb - magic) + km) - rm;
    } else {
      const B t = xsimd::max(lo, x - m);
      kb = mul_add_magic<A, T>(t, B(C::log2e), magic);
      d = cody_waite<A, T>(t, kb - magic);
    }
  }

  SMAX_INLINE B operator()(B x) const noexcept {
    B d, kb;
    reduce(x, d, kb);
    // Field k + bias - 2 + exponent, clamped at 0: +0 (x86 max returns
    // round_magic for a NaN kb, and p is NaN then).
    return poly(d) * pow2_biased<A, T>(xsimd::max(kb, B(C::round_magic)));
  }
};

// s * e^(x - m): shifted_exp with the scale folded into the polynomial and
// the power of two, for the pass that writes a normalized output (s = 1 / sum).
template <class A, class T, bool Split>
struct scaled_shifted_exp : shifted_exp<A, T, Split> {
  scaled_shifted_exp(const shifted_exp<A, T, Split>& e, T scale) noexcept : shifted_exp<A, T, Split>(e, scale) {}
};

// s * e^x * 2^-E for x in [lo, (E + 17) ln2], with lo >= -split_limit and E
// an integer: the one exp of smax's softmax kernels. x itself is range
// reduced (d = x - K ln2, exact), so the error does not depend on how far x
// lies below the reference, and the scale s is folded into the polynomial.
//   two-pass, pass 2:    E = Emax, s = 1 / sum
//   three-pass, m = max: E = round(m log2e), e^(x - m) = e^x 2^-E e^-(m - E ln2);
//                        the last factor, in (0.7, 1.42), is applied to the
//                        sum in double (it cancels in the normalized output)
// x below lo (-inf included) is clamped to lo, which gives 0 wherever
// lo < (E - 150) ln2 (x = NaN stays NaN). Results below 2.8 * 2^-126 (float)
// are +0; no subnormal is formed.
template <class A, class T, exp_accuracy Acc = exp_accuracy::full>
struct exp_ref {
  using B = xsimd::batch<T, A>;
  using C = exp_constants<T>;
  B lo, magic;
  scaled_poly<A, T, Acc> poly;
  // s = mantissa 2^exponent: the polynomial carries 4 * mantissa, the power
  // of two 2^(K - E + exponent - 2), whose exponent field clamps at 0 (+0):
  // every nonzero result is at least 2.8 * 2^-126, a normal number.
  exp_ref(T lo_scalar, T E_scalar, T scale) noexcept : exp_ref(lo_scalar, E_scalar, split_scale<T>(scale)) {}
  exp_ref(T lo_scalar, T E_scalar, split_scale<T> s) noexcept
      : lo(lo_scalar),
        magic(static_cast<T>(C::bias_magic - E_scalar + s.exponent - T(2))),
        poly(T(4) * s.mantissa) {}

  SMAX_INLINE B operator()(B x) const noexcept {
    const B v = xsimd::max(lo, x);  // keeps NaN (x86 max returns its second operand)
    // kb = K - E + exponent - 2 + bias_magic: the bits of the power of two.
    const B kb = mul_add_magic<A, T>(v, B(C::log2e), magic);
    const B p = poly(cody_waite<A, T, Acc>(v, kb - magic));
    return p * pow2_biased<A, T>(xsimd::max(kb, B(C::round_magic)));
  }
};

// The split form is exact for |m| <= split_limit; beyond it the plain form is
// (see the file comment).
template <class T>
SMAX_INLINE bool use_split(T m) noexcept {
  return m <= exp_constants<T>::split_limit && m >= -exp_constants<T>::split_limit;
}

// v, hidden from the optimizer. Clang assumes that nothing reads the FP
// flags: in `|v| < cut ? 0 : T(v)` it converts v before it selects, and a
// tiny v then raises underflow (and is a subnormal operation on Intel);
// an opaque copy of the flushed value leaves it nothing else to convert
// (found in sa_softmax_backward's end entries, clang -O3, AVX-512).
template <class F>
SMAX_INLINE F opaque(F v) noexcept {
#if defined(__GNUC__)
  __asm__("" : "+m"(v));
#endif
  return v;
}

// A cut c for a constant factor f: for normal (or zero) v with |v| >= c,
// v f is normal; below it, v is taken as 0. min / |f| with a margin for the
// roundings for |f| < 1 (inf for f = 0; NaN for NaN, which cuts nothing),
// else 0.
template <class T>
T product_cut(T f) noexcept {
  const double a = std::fabs(static_cast<double>(f));
  // (min(a, 1): clang evaluates both arms of a ?: and moves the conversion
  // into them, and min / a converted to float would be subnormal)
  const double c = static_cast<double>(std::numeric_limits<T>::min()) / std::min(a, 1.0) * (1 + 0x1p-20);
  return a >= 1 ? T(0) : static_cast<T>(c);
}

// v rounded to T, 0 where |v| < cut (cut at least T's smallest normal: no
// subnormal result). v (double or long double) is flushed before it is
// converted, through `opaque`: clamping it to the cut first, as this did,
// clang undid (it took the sign from v converted).
template <class T, class F = double>
T to_normal(F v, F cut = static_cast<F>(std::numeric_limits<T>::min())) noexcept {
  return static_cast<T>(opaque(std::fabs(v) < cut ? F(0) : v));
}

// The scalar combining steps (block sums, sinks, a target's probability) in
// double, 0 where the result would lie below double's normal range: libm
// forms that subnormal (and raises underflow), an assist on Intel. What
// they drop is below 2^-1021 beside sums of at least 1/2.
inline double exp_flushed(double a) noexcept { return a < -708.0 ? 0.0 : std::exp(a); }  // e^-708 > 2^-1022
inline double ldexp_flushed(double v, int e) noexcept {
  int k = 0;
  std::frexp(v, &k);  // |v| in [2^(k-1), 2^k) (finite, nonzero)
  return k + e >= -1021 || !(std::fabs(v) < std::numeric_limits<double>::infinity()) ? std::ldexp(v, e) : 0.0;
}

// e^x = e^d * 2^K for |x| <= split_limit: d in [-ln2/2, ln2/2], K integer.
template <class A, class T>
SMAX_INLINE void extexp_reduce(xsimd::batch<T, A> x, xsimd::batch<T, A>& d, xsimd::batch<T, A>& K) noexcept {
  using C = exp_constants<T>;
  using B = xsimd::batch<T, A>;
  K = round_mul<A, T>(x, B(C::log2e));
  d = cody_waite<A, T>(x, K);
}

// e^x = p * 2^K for |x| <= split_limit.
template <class A, class T>
SMAX_INLINE void extexp(xsimd::batch<T, A> x, xsimd::batch<T, A>& p, xsimd::batch<T, A>& K) noexcept {
  xsimd::batch<T, A> d;
  extexp_reduce<A, T>(x, d, K);
  p = exp_poly<A, T>(d);
}

// s e^v 2^-E with every non-zero result a normal T: v is clamped at
// lo = (E - bias + 3) ln2 (rounded up), where e^v 2^-E >= 2^-bias+2 * 0.7,
// and the result is exactly 0 for v < lo (NaN stays NaN). Needs s in
// [0.5, 2^28] (so s e^lo 2^-E stays normal and the scaled polynomial's
// coefficients too), |E| and lo within the range exp_ref reduces exactly
// (callers keep |E ln2| <= split_limit + a few hundred), and v <= (E + 17) ln2.
template <class A, class T>
struct normal_exp {
  using B = xsimd::batch<T, A>;
  using C = exp_constants<T>;
  B lo;
  exp_ref<A, T> e;
  static T floor_of(T E) noexcept {
    const double min_k = std::numeric_limits<T>::min_exponent - 1;  // -126 (float)
    const double lo_d = (static_cast<double>(E) + min_k + 2) * 0.6931471805599453;
    T l = static_cast<T>(lo_d);
    if (static_cast<double>(l) < lo_d) l = std::nextafter(l, std::numeric_limits<T>::infinity());
    return l;
  }
  normal_exp(T E, T s) noexcept : lo(floor_of(E)), e(floor_of(E), E, s) {}
  SMAX_INLINE B operator()(B v) const noexcept { return xsimd::select(v < lo, B(T(0)), e(v)); }
};

}  // namespace detail
}  // namespace smax
