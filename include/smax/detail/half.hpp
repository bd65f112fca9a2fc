// smax — the 16-bit storage types' conversions (bf16 and fp16 themselves are
// in types.hpp): the vector load-widen / narrow-store helpers per ISA the
// 16-bit kernels are built on. Everything is computed in float; a 16-bit
// value is only ever a storage format.
#pragma once

#include <cstdint>
#include <cstring>

#include "../types.hpp"
#include "config.hpp"

#if defined(__SSE2__) || defined(__AVX__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace smax {
namespace detail {

#if XSIMD_WITH_AVX512F
// The arch tag of the avx512 level's bf16 variant: AVX-512F code built with
// -mavx512bf16 -mavx512dq (src/smax_dynamic_isa.cpp,
// SMAX_DYNAMIC_ISA=avx512_bf16), whose narrow() rounds with vcvtneps2bf16
// (only for this tag, and only in a TU built with those flags). A tag of
// its own so that its instantiations never merge with the plain avx512
// ones at link time.
struct avx512_bf16 : xsimd::avx512f {
  static constexpr char const* name() noexcept { return "avx512_bf16"; }
};
#endif

}  // namespace detail
}  // namespace smax

#if XSIMD_WITH_AVX512F
namespace xsimd {
namespace types {
template <class T>
struct get_bool_simd_register<T, smax::detail::avx512_bf16> {
  using type = simd_avx512_bool_register<T>;
};
XSIMD_DECLARE_SIMD_REGISTER_ALIAS(smax::detail::avx512_bf16, avx512f);
}  // namespace types
}  // namespace xsimd
#endif

namespace smax {
namespace detail {

template <class H>
constexpr bool is_half_v = std::is_same<H, bf16>::value || std::is_same<H, fp16>::value;
template <class H>
using enable_if_half_t = std::enable_if_t<is_half_v<H>>;
// 16-bit x, y of the same type or float.
template <class H, class Y>
using enable_if_half_out_t = std::enable_if_t<is_half_v<H> && (std::is_same<Y, H>::value || std::is_same<Y, float>::value)>;
// float to 16-bit, or 16-bit to float.
template <class S, class D>
using enable_if_convert_t = std::enable_if_t<(std::is_same<S, float>::value && is_half_v<D>) ||
                                             (is_half_v<S> && std::is_same<D, float>::value)>;

SMAX_INLINE float to_float(bf16 h) noexcept { return static_cast<float>(h); }
SMAX_INLINE float to_float(fp16 h) noexcept { return static_cast<float>(h); }
SMAX_INLINE float to_float(float f) noexcept { return f; }
template <class Y>
SMAX_INLINE Y from_float(float f) noexcept {
  return Y(f);
}

// The vector helpers: W = batch<float, A>::size 16-bit values at p widened
// to a float batch, and a float batch rounded (RNE) and stored as W 16-bit
// values. x86 AVX-512F and F16C (compiled in with the avx2 TU's -mf16c)
// convert binary16 in hardware, NEON too; bfloat16 is a shift on load and
// integer rounding on store everywhere, and SSE2 converts binary16 with
// the scalar conversions' integer arithmetic per lane (and one float add,
// see narrow). Other ISAs go lane by lane through the exact scalar
// conversions above.
template <class A, class H>
SMAX_INLINE xsimd::batch<float, A> widen(const H* p) noexcept {
  using B = xsimd::batch<float, A>;
  constexpr bool bf = std::is_same<H, bf16>::value;
  if constexpr (std::is_same<H, float>::value) return B::load_unaligned(p);
#if defined(__AVX512F__)
  if constexpr (std::is_base_of<xsimd::avx512f, A>::value) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (bf) return B(_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    else return B(_mm512_cvtph_ps(h));
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_base_of<xsimd::avx2, A>::value) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (bf) return B(_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
#if defined(__F16C__)
    else return B(_mm256_cvtph_ps(h));
#endif
  }
#endif
#if defined(__SSE2__)
  if constexpr (bf && std::is_base_of<xsimd::sse2, A>::value && B::size == 4) {
    const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return B(_mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h)));
  }
  if constexpr (!bf && std::is_base_of<xsimd::sse2, A>::value && B::size == 4) {
    // fp16_to_bits per lane without F16C: the fields rebiased (exponent 31,
    // inf and NaN, to 255); a subnormal m 2^-24 as float(m) * 2^-24, a
    // product of normal numbers (m < 2^10), exact.
    const __m128i h = _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), _mm_setzero_si128());
    const __m128i mag = _mm_and_si128(h, _mm_set1_epi32(0x7fff));
    const __m128i sign = _mm_slli_epi32(_mm_xor_si128(h, mag), 16);
    const __m128i e = _mm_srli_epi32(mag, 10);
    const __m128i top = _mm_cmpeq_epi32(e, _mm_set1_epi32(31));
    const __m128i rebias = _mm_add_epi32(_mm_set1_epi32(112 << 23), _mm_and_si128(top, _mm_set1_epi32(112 << 23)));
    const __m128i normal = _mm_add_epi32(_mm_slli_epi32(mag, 13), rebias);
    const __m128i sub = _mm_castps_si128(_mm_mul_ps(_mm_cvtepi32_ps(mag), _mm_set1_ps(0x1p-24f)));
    const __m128i zero_e = _mm_cmpeq_epi32(e, _mm_setzero_si128());
    const __m128i r = _mm_or_si128(_mm_and_si128(zero_e, sub), _mm_andnot_si128(zero_e, normal));
    return B(_mm_castsi128_ps(_mm_or_si128(r, sign)));
  }
#endif
#if defined(__aarch64__)
  if constexpr (std::is_base_of<xsimd::neon64, A>::value) {
    const uint16x4_t h = vld1_u16(reinterpret_cast<const std::uint16_t*>(p));
    if constexpr (bf) return B(vreinterpretq_f32_u32(vshll_n_u16(h, 16)));
    else return B(vcvt_f32_f16(vreinterpret_f16_u16(h)));
  }
#endif
  alignas(64) float buf[B::size];
  for (std::size_t i = 0; i < B::size; ++i) buf[i] = to_float(p[i]);
  return B::load_aligned(buf);
}

// What narrow() may be given: any float, or only finite normal numbers and
// zeros (a kernel's probabilities: NaN and inf inputs are filled, not
// computed, and no subnormal is formed). The latter needs no NaN select
// and, with AVX512_BF16, no subnormal test.
enum class narrow_input { any, finite_normal };

// bf16_from_bits per lane. The NaN test compares as signed: both sides are
// below 2^31, and xsimd 8.1 has no SSE2/AVX2 kernel for an unsigned 32-bit
// compare (it takes its generic path).
template <class A, narrow_input In = narrow_input::any>
SMAX_INLINE xsimd::batch<std::uint32_t, A> bf16_round_bits(xsimd::batch<float, A> v) noexcept {
  using U = xsimd::batch<std::uint32_t, A>;
  using I = xsimd::batch<std::int32_t, A>;
  const U u = xsimd::bitwise_cast<U>(v);
  const U rounded = (u + U(0x7fffu) + ((u >> 16) & U(1u))) >> 16;
  if constexpr (In == narrow_input::finite_normal) return rounded;
  const U quiet = (u >> 16) | U(0x40u);
  const auto nan = xsimd::bitwise_cast<I>(u & U(0x7fffffffu)) > I(0x7f800000);
  return xsimd::bitwise_cast<U>(xsimd::select(nan, xsimd::bitwise_cast<I>(quiet), xsimd::bitwise_cast<I>(rounded)));
}

#if defined(__AVX512F__)
// bf16_round_bits in AVX-512 intrinsics: a compare to a mask, one blend
// (a template on A, as everything here: see avx512_bf16 above).
template <class A, narrow_input In>
SMAX_INLINE __m512i bf16_round_bits_avx512(__m512 v) noexcept {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i hi = _mm512_srli_epi32(u, 16);
  const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  if constexpr (In == narrow_input::any) {
    const __mmask16 nan =
        _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(hi, _mm512_set1_epi32(0x40)));
  }
  return r;
}
#endif

template <class A, narrow_input In = narrow_input::any, class H>
SMAX_INLINE void narrow(H* p, xsimd::batch<float, A> v) noexcept {
  using B = xsimd::batch<float, A>;
  constexpr bool bf = std::is_same<H, bf16>::value;
#if defined(__AVX512F__)
  if constexpr (std::is_base_of<xsimd::avx512f, A>::value) {
    __m256i h;
    if constexpr (bf) {
#if defined(__AVX512BF16__)
      // vcvtneps2bf16 rounds as bf16_round_bits does, NaN and overflow
      // included, but reads a subnormal float as 0: unless the caller rules
      // them out, a vector holding one takes the integer path below. The
      // test is on the bits (vfpclassps would obey DAZ and miss them); it
      // costs the in-cache softmax about 10% (Zen 5), hence finite_normal.
      // Only for the avx512_bf16 tag, never for a plain AVX-512 one built
      // with -mavx512bf16: instantiations of one tag from TUs with other
      // flags merge at link time (an avx512f copy with this instruction
      // could serve the dispatcher's avx512 level on a CPU without it).
      if constexpr (std::is_base_of<avx512_bf16, A>::value) {
        bool exact = true;
        if constexpr (In == narrow_input::any) {
          const __m512i bits = _mm512_castps_si512(v);
          exact = _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7f800000)), bits,
                                              _mm512_set1_epi32(0x007fffff)) == 0;
        }
        if (__builtin_expect(exact, 1))
          return _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), (__m256i)_mm512_cvtneps_pbh(v));
      }
#endif
      h = _mm512_cvtepi32_epi16(bf16_round_bits_avx512<A, In>(v));
    }
    else h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_base_of<xsimd::avx2, A>::value) {
    if constexpr (bf) {
      const __m256i r = bf16_round_bits<A, In>(v);  // each lane < 2^16: packus is exact
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
      return _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
    }
#if defined(__F16C__)
    else return _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
#endif
  }
#endif
#if defined(__SSE2__)
  if constexpr (std::is_base_of<xsimd::sse2, A>::value && B::size == 4) {
    __m128i bits;
    if constexpr (bf) {
      bits = bf16_round_bits<A, In>(v);
    } else {
      // fp16_from_bits per lane without F16C. Normal results: rebiased and
      // rounded to nearest even at bit 13. Below 2^-14: |v| + 1/2 rounds |v|
      // to a multiple of 2^-24 (the ulp of 1/2), to nearest even in the
      // default rounding mode, which the kernels' magic-number roundings
      // assume too (another mode moves these results, unlike the
      // integer-only scalar conversion); its low bits are the result
      // (0 .. 0x400, the last the smallest normal). A float subnormal |v|
      // gives 0 there, read as 0 (DAZ) or not.
      const __m128i u = _mm_castps_si128(v);
      const __m128i a = _mm_and_si128(u, _mm_set1_epi32(0x7fffffff));
      const __m128i w = _mm_sub_epi32(a, _mm_set1_epi32(0x38000000));
      const __m128i odd = _mm_and_si128(_mm_srli_epi32(w, 13), _mm_set1_epi32(1));
      const __m128i normal = _mm_srli_epi32(_mm_add_epi32(_mm_add_epi32(w, _mm_set1_epi32(0xfff)), odd), 13);
      const __m128i sub = _mm_sub_epi32(_mm_castps_si128(_mm_add_ps(_mm_castsi128_ps(a), _mm_set1_ps(0.5f))),
                                        _mm_set1_epi32(0x3f000000));
      const auto pick = [](__m128i c, __m128i t, __m128i f) { return _mm_or_si128(_mm_and_si128(c, t), _mm_andnot_si128(c, f)); };
      bits = pick(_mm_cmplt_epi32(a, _mm_set1_epi32(0x38800000)), sub, normal);
      bits = pick(_mm_cmpgt_epi32(a, _mm_set1_epi32(0x477fefff)), _mm_set1_epi32(0x7c00), bits);  // >= 65520: inf
      if constexpr (In == narrow_input::any) {
        const __m128i quiet = _mm_or_si128(_mm_set1_epi32(0x7e00), _mm_and_si128(_mm_srli_epi32(a, 13), _mm_set1_epi32(0x3ff)));
        bits = pick(_mm_cmpgt_epi32(a, _mm_set1_epi32(0x7f800000)), quiet, bits);
      }
      bits = _mm_or_si128(bits, _mm_and_si128(_mm_srli_epi32(u, 16), _mm_set1_epi32(0x8000)));
    }
    // sign-extend each 16-bit result so that the signed pack keeps it
    const __m128i r = _mm_srai_epi32(_mm_slli_epi32(bits, 16), 16);
    return _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi32(r, r));
  }
#endif
#if defined(__aarch64__)
  if constexpr (std::is_base_of<xsimd::neon64, A>::value) {
    if constexpr (bf) return vst1_u16(reinterpret_cast<std::uint16_t*>(p), vmovn_u32(bf16_round_bits<A, In>(v)));
    else return vst1_u16(reinterpret_cast<std::uint16_t*>(p), vreinterpret_u16_f16(vcvt_f16_f32(v)));
  }
#endif
  alignas(64) float buf[B::size];
  v.store_aligned(buf);
  for (std::size_t i = 0; i < B::size; ++i) p[i] = H(buf[i]);
}

// Two float batches rounded as narrow() rounds them, packed into one batch
// of 2W 16-bit values (lo's first), its bits returned as a float batch: one
// whole-vector store for two vectors' values. (Two narrow() stores read
// back as one vector fail store-to-load forwarding: map_half's staging of
// 16-bit outputs.) AVX-512F, and AVX2 (fp16 with F16C).
template <class A, class H>
constexpr bool has_narrow_pair_v =
#if defined(__AVX512F__)
    std::is_base_of<xsimd::avx512f, A>::value ||
#endif
#if defined(__AVX2__) && defined(__F16C__)
    std::is_base_of<xsimd::avx2, A>::value ||
#elif defined(__AVX2__)
    (std::is_base_of<xsimd::avx2, A>::value && std::is_same<H, bf16>::value) ||
#endif
    false;

// Where one narrow_pair store is also faster than two narrow() stores in
// cache: bf16 with vcvtne2ps2bf16 (the avx512_bf16 tag) and with AVX2's
// pack; not plain AVX-512F's two vpmovdw and an insert, nor fp16's two
// conversions and an insert (docs/half.md, "Streaming 16-bit outputs").
template <class A, class H>
constexpr bool narrow_pair_in_cache_v = std::is_same<H, bf16>::value && has_narrow_pair_v<A, H> &&
#if XSIMD_WITH_AVX512F
                                        (std::is_base_of<avx512_bf16, A>::value ||
                                         !std::is_base_of<xsimd::avx512f, A>::value);
#else
                                        true;
#endif

template <class A, narrow_input In, class H>
SMAX_INLINE xsimd::batch<float, A> narrow_pair(xsimd::batch<float, A> lo, [[maybe_unused]] xsimd::batch<float, A> hi) noexcept {
  static_assert(has_narrow_pair_v<A, H>, "narrow_pair: AVX-512F or AVX2");
  using B [[maybe_unused]] = xsimd::batch<float, A>;
  [[maybe_unused]] constexpr bool bf = std::is_same<H, bf16>::value;
#if defined(__AVX512F__)
  if constexpr (std::is_base_of<xsimd::avx512f, A>::value && !bf) {
    const __m256i a = _mm512_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i b = _mm512_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return B(_mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1)));
  }
  if constexpr (std::is_base_of<xsimd::avx512f, A>::value) {
#if defined(__AVX512BF16__)
    // (as narrow(): vcvtne2ps2bf16 reads a subnormal as 0; only this tag)
    if constexpr (std::is_base_of<avx512_bf16, A>::value) {
      bool exact = true;
      if constexpr (In == narrow_input::any) {
        const auto subnormal = [](__m512 v) {
          const __m512i bits = _mm512_castps_si512(v);
          return _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(bits, _mm512_set1_epi32(0x7f800000)), bits,
                                             _mm512_set1_epi32(0x007fffff));
        };
        exact = (subnormal(lo) | subnormal(hi)) == 0;
      }
      if (__builtin_expect(exact, 1)) return B(_mm512_castsi512_ps((__m512i)_mm512_cvtne2ps_pbh(hi, lo)));
    }
#endif
    // (AVX-512F has no 512-bit pack: two vpmovdw and an insert)
    const __m256i a = _mm512_cvtepi32_epi16(bf16_round_bits_avx512<A, In>(lo));
    const __m256i b = _mm512_cvtepi32_epi16(bf16_round_bits_avx512<A, In>(hi));
    return B(_mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1)));
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_base_of<xsimd::avx2, A>::value && !std::is_base_of<xsimd::avx512f, A>::value) {
    if constexpr (bf) {
      const __m256i packed = _mm256_packus_epi32(bf16_round_bits<A, In>(lo), bf16_round_bits<A, In>(hi));
      return B(_mm256_castsi256_ps(_mm256_permute4x64_epi64(packed, 0xd8)));
    }
#if defined(__F16C__)
    else {
      const __m128i a = _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT);
      const __m128i b = _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT);
      return B(_mm256_castsi256_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1)));
    }
#endif
  }
#endif
  return lo;  // (unreachable: the static_assert)
}

// Widens src[0..n) into the float buffer dst (same for float sources: a
// copy), and narrows back. The staging the 16-bit kernels run on.
template <class A, class H>
SMAX_INLINE void widen_block(const H* src, float* dst, std::size_t n) noexcept {
  if constexpr (std::is_same<H, float>::value) {
    std::memcpy(dst, src, n * sizeof(float));
  } else {
    constexpr std::size_t W = xsimd::batch<float, A>::size;
    const std::size_t body = n - n % W;
    for (std::size_t i = 0; i < body; i += W) widen<A>(src + i).store_unaligned(dst + i);
    for (std::size_t i = body; i < n; ++i) dst[i] = to_float(src[i]);
  }
}
template <class A, class H>
SMAX_INLINE void narrow_block(const float* src, H* dst, std::size_t n) noexcept {
  if constexpr (std::is_same<H, float>::value) {
    if (dst != src) std::memcpy(dst, src, n * sizeof(float));
  } else {
    constexpr std::size_t W = xsimd::batch<float, A>::size;
    const std::size_t body = n - n % W;
    for (std::size_t i = 0; i < body; i += W) narrow<A>(dst + i, xsimd::batch<float, A>::load_unaligned(src + i));
    for (std::size_t i = body; i < n; ++i) dst[i] = H(src[i]);
  }
}

}  // namespace detail
}  // namespace smax
