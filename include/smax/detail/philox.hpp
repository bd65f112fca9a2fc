// smax — the counter-based generator of Gumbel noise and of sampling.
//
// Generator: Philox4x32-10 (Salmon et al. 2011, "Parallel random numbers:
// as easy as 1, 2, 3"): a 128-bit counter (c0, c1, c2, c3) and a 64-bit key
// (k0, k1) give four 32-bit words after 10 rounds of
//     (hi0, lo0) = 0xD2511F53 * c0,  (hi1, lo1) = 0xCD9E8D57 * c2   (32x32->64)
//     c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0),  k += (0x9E3779B9, 0xBB67AE85)
// key = seed (k0 = low half, k1 = high half); counter = (ctr low, ctr high, 0, 0).
// tests/test_gumbel.cpp checks the Random123 known-answer vectors.
#pragma once

#include <cstdint>
#include <type_traits>

#include "exp.hpp"

#if defined(__SSE2__) || defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__ARM_NEON) || defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace smax {
namespace detail {

// The key schedule, once per call: round r uses (k0[r], k1[r]).
struct philox_key {
  std::uint32_t k0[10], k1[10];
  explicit philox_key(std::uint64_t seed) noexcept {
    std::uint32_t a = static_cast<std::uint32_t>(seed), b = static_cast<std::uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      k0[r] = a;
      k1[r] = b;
      a += 0x9E3779B9u;
      b += 0xBB67AE85u;
    }
  }
};

constexpr std::uint32_t philox_m0 = 0xD2511F53u;
constexpr std::uint32_t philox_m1 = 0xCD9E8D57u;

// (a mod 2^32) * (b mod 2^32), the full 64-bit product, per 64-bit lane:
// one pmuludq / umull where the ISA has it (xsimd 8.1 has no widening
// multiply, and its 64-bit multiply is a scalar loop on SSE2/AVX2).
template <class A>
SMAX_INLINE xsimd::batch<std::uint64_t, A> mul_lo32(xsimd::batch<std::uint64_t, A> a,
                                                    xsimd::batch<std::uint64_t, A> b) noexcept {
#if defined(__AVX512F__)
  if constexpr (std::is_base_of<xsimd::avx512f, A>::value) return _mm512_mul_epu32(a, b);
#endif
#if defined(__AVX2__)
  if constexpr (std::is_base_of<xsimd::avx2, A>::value) return _mm256_mul_epu32(a, b);
#endif
#if defined(__SSE2__)
  if constexpr (std::is_base_of<xsimd::sse2, A>::value && !std::is_base_of<xsimd::avx, A>::value)
    return _mm_mul_epu32(a, b);
#endif
#if defined(__aarch64__)
  if constexpr (std::is_base_of<xsimd::neon64, A>::value) return vmull_u32(vmovn_u64(a), vmovn_u64(b));
#endif
  const xsimd::batch<std::uint64_t, A> low(0xFFFFFFFFull);
  return (a & low) * (b & low);
}

// Whether xsimd's 32-bit integer multiply is one native instruction here
// (vpmulld, mul.4s); SSE2 has none (xsimd falls back to a scalar loop).
template <class A>
constexpr bool has_mullo32_v = std::is_base_of<xsimd::avx2, A>::value || is_avx512_v<A>
#if XSIMD_WITH_NEON64
                               || std::is_base_of<xsimd::neon64, A>::value
#endif
    ;

// 32x32 -> 64 products of lanes that each hold one 32-bit word.
// batch<uint32_t>: every 32-bit lane; the even and odd lanes are multiplied
// in their 64-bit containers and the high halves merged; the low halves come
// from the native 32-bit multiply where there is one.
template <class A>
SMAX_INLINE void mulhilo(xsimd::batch<std::uint32_t, A> a, std::uint32_t m, xsimd::batch<std::uint32_t, A>& hi,
                         xsimd::batch<std::uint32_t, A>& lo) noexcept {
  using U32 = xsimd::batch<std::uint32_t, A>;
  using U64 = xsimd::batch<std::uint64_t, A>;
  const U64 a64 = xsimd::bitwise_cast<U64>(a);
  const U64 mm(static_cast<std::uint64_t>(m));
  const U64 pe = mul_lo32<A>(a64, mm);        // even lanes' products
  const U64 po = mul_lo32<A>(a64 >> 32, mm);  // odd lanes' products
  const U64 high(0xFFFFFFFF00000000ull);
  hi = xsimd::bitwise_cast<U32>((pe >> 32) | (po & high));
  if constexpr (has_mullo32_v<A>)
    lo = a * U32(m);
  else
    lo = xsimd::bitwise_cast<U32>((pe & U64(0xFFFFFFFFull)) | (po << 32));
}
// batch<uint64_t> whose lanes hold values below 2^32.
template <class A>
SMAX_INLINE void mulhilo(xsimd::batch<std::uint64_t, A> a, std::uint32_t m, xsimd::batch<std::uint64_t, A>& hi,
                         xsimd::batch<std::uint64_t, A>& lo) noexcept {
  using U64 = xsimd::batch<std::uint64_t, A>;
  const U64 p = mul_lo32<A>(a, U64(static_cast<std::uint64_t>(m)));
  hi = p >> 32;
  lo = p & U64(0xFFFFFFFFull);
}

// Philox4x32-10 on N independent vectors of counters (one counter per
// lane), round by round across the N so that the multiply latencies of one
// overlap the others (a single chain is latency-bound).
template <class A, class V, std::size_t N>
SMAX_INLINE void philox10(V (&c)[N][4], const philox_key& key) noexcept {
  using S = typename V::value_type;
  // Fully unrolled: the word rotation is then register renaming, not moves.
#pragma GCC unroll 10
  for (int r = 0; r < 10; ++r) {
    const V k0(static_cast<S>(key.k0[r])), k1(static_cast<S>(key.k1[r]));
#pragma GCC unroll 8
    for (std::size_t j = 0; j < N; ++j) {
      V hi0, lo0, hi1, lo1;
      mulhilo<A>(c[j][0], philox_m0, hi0, lo0);
      mulhilo<A>(c[j][2], philox_m1, hi1, lo1);
      c[j][0] = hi1 ^ c[j][1] ^ k0;
      c[j][1] = lo1;
      c[j][2] = hi0 ^ c[j][3] ^ k1;
      c[j][3] = lo0;
    }
  }
}

// Philox4x32-10 on one counter, scalar: the same rounds as
// philox10 (tests/test_topk.cpp checks the Random123 known answers).
inline void philox_scalar(std::uint32_t (&c)[4], const philox_key& key) noexcept {
  for (int r = 0; r < 10; ++r) {
    const std::uint64_t p0 = std::uint64_t(philox_m0) * c[0], p1 = std::uint64_t(philox_m1) * c[2];
    const std::uint32_t c1 = c[1], c3 = c[3];
    c[0] = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ key.k0[r];
    c[1] = static_cast<std::uint32_t>(p1);
    c[2] = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ key.k1[r];
    c[3] = static_cast<std::uint32_t>(p0);
  }
}

}  // namespace detail
}  // namespace smax
