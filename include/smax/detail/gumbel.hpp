// smax — Gumbel noise from a counter-based generator, and Gumbel-softmax
// (Jang, Gu & Poole 2016; Maddison et al. 2016).
//
// Generator: Philox4x32-10 (philox.hpp).
//
// Element index j = offset + i (mod 2^64) -> bits. The map is fixed, the
// same on every ISA, and depends on j alone, so any split of the work gives
// the same bits. It is laid out so that a vector of any width (4, 8, 16
// lanes) takes its counters from consecutive lanes with no shuffles:
//   float:  group q = j / 64, r = j % 64: counter 16 q + r % 16, word r / 16;
//           u = ((word >> 9) + 1/2) 2^-23, i.e. 23 random bits, u in
//           [2^-24, 1 - 2^-24]
//   double: group q = j / 32, r = j % 32: counter 16 q + r % 16, words
//           (2 (r / 16), 2 (r / 16) + 1) as (low, high); 52 random bits,
//           u in [2^-53, 1 - 2^-53]
// u is built exactly from the bits ((1 + bits 2^-p) - 1 + 2^-p-1, every step
// exact), so it is never 0 or 1, and g = -log(-log u) is finite: |g| <= 17
// (float), 37 (double).
//
// Bit-identical on every ISA: integer steps are exact; the two logs use the
// Strict form of log.hpp (no FMA contraction, only correctly rounded IEEE
// operations), so SSE2, AVX2, AVX-512 and NEON produce the same bits (tests
// compare them with each other and with golden values that the NEON build
// checks too).
#pragma once

#include <cstring>
#include <limits>
#include <stdexcept>

#include "log.hpp"
#include "loops.hpp"
#include "philox.hpp"
#include "softmax.hpp"
#include "ssmax.hpp"

namespace smax {
namespace detail {

// g = -log(-log u), bit-identical on every ISA.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> gumbel_of_uniform(xsimd::batch<T, A> u) noexcept {
  return log_identical<A, T, true>(log_identical<A, T, true>(u));
}

template <class T>
struct gumbel_layout;
template <>
struct gumbel_layout<float> {
  static constexpr std::size_t group = 64;  // 16 counters x 4 words
  using counter = std::uint32_t;            // one counter per 32-bit lane
};
template <>
struct gumbel_layout<double> {
  static constexpr std::size_t group = 32;  // 16 counters x 2 pairs of words
  using counter = std::uint64_t;            // one counter per 64-bit lane
};

// The noise of a block of whole groups: `batches` vectors of counters (at
// least 4, for the interleaving, and at least one group), i.e. `groups`
// groups of G elements.
template <class A, class T>
struct gumbel_block {
  using L = gumbel_layout<T>;
  using U = xsimd::batch<typename L::counter, A>;
  using B = xsimd::batch<T, A>;
  static constexpr std::size_t W = U::size;
  static_assert(16 % W == 0, "gumbel layout needs a counter lane count dividing 16");
  static constexpr std::size_t batches = (16 / W > 4) ? 16 / W : 4;
  static constexpr std::size_t groups = batches * W / 16;
  static constexpr std::size_t size = groups * L::group;

  // f = 1 + (word >> 9) 2^-23 in [1, 2); u = f - (1 - 2^-24) = (2 k + 1)
  // 2^-24 is exact (24 bits, below 1).
  static SMAX_INLINE B uniform(U w) noexcept {
    return xsimd::bitwise_cast<B>((w >> 9) | U(0x3f800000u)) - B(0x1.fffffep-1f);
  }
  // 52 bits: the high word's 32 and the low word's top 20; u = (2 k + 1)
  // 2^-53, exact.
  static SMAX_INLINE B uniform(U lo, U hi) noexcept {
    const U bits = (hi << 20) | (lo >> 12) | U(0x3ff0000000000000ull);
    return xsimd::bitwise_cast<B>(bits) - B(0x1.fffffffffffffp-1);
  }

  // Elements [G q0, G q0 + size) into out[0 .. size-1].
  static SMAX_INLINE void run(T* out, std::uint64_t q0, const philox_key& key) noexcept {
    using S = typename L::counter;
    const U iota = lane_index<A, S>();
    U c[batches][4];
    for (std::size_t j = 0; j < batches; ++j) {
      // Counters 16 q0 + j W + lane: a multiple of W plus the lane, so the
      // low word never carries into the high one.
      const std::uint64_t base = (q0 << 4) + j * W;
      c[j][0] = U(static_cast<S>(base & 0xFFFFFFFFull)) + iota;
      c[j][1] = U(static_cast<S>(base >> 32));
      c[j][2] = U(S(0));
      c[j][3] = U(S(0));
    }
    philox10<A>(c, key);
    // The uniforms of the block, then each log for all of them: the two
    // logs of one element are a long dependent chain, and the chains of
    // different elements overlap only when they are issued side by side.
    constexpr std::size_t per = std::is_same<T, float>::value ? 4 : 2;  // vectors per batch
    B v[batches * per];
    for (std::size_t j = 0; j < batches; ++j) {
      if constexpr (std::is_same<T, float>::value) {
        for (std::size_t w = 0; w < 4; ++w) v[j * per + w] = uniform(c[j][w]);
      } else {
        v[j * per] = uniform(c[j][0], c[j][1]);
        v[j * per + 1] = uniform(c[j][2], c[j][3]);
      }
    }
    log_identical_n<A, T, true>(v);  // E = -log u
    log_identical_n<A, T, true>(v);  // g = -log E
    for (std::size_t j = 0; j < batches; ++j) {
      // Batch j is counters j W .. j W + W - 1 of the block: group j W / 16,
      // first counter (j W) % 16 of it; its vectors are 16 elements apart.
      T* o = out + (j * W / 16) * L::group + (j * W) % 16;
      for (std::size_t w = 0; w < per; ++w) v[j * per + w].store_unaligned(o + 16 * w);
    }
  }
};

template <class A, class T>
void gumbel_noise(T* g, std::size_t n, std::uint64_t seed, std::uint64_t offset) noexcept {
  using GB = gumbel_block<A, T>;
  constexpr std::size_t BS = GB::size;  // a power of two: divides 2^64
  const philox_key key(seed);
  std::size_t i = 0;
  while (i < n) {
    const std::uint64_t j = offset + i;  // wraps mod 2^64
    const std::uint64_t q0 = (j / BS) * GB::groups;
    const std::size_t r = static_cast<std::size_t>(j % BS);
    if (r == 0 && n - i >= BS) {
      GB::run(g + i, q0, key);
      i += BS;
      continue;
    }
    alignas(64) T buf[BS];
    GB::run(buf, q0, key);
    const std::size_t cnt = (BS - r < n - i) ? BS - r : n - i;
    std::memcpy(g + i, buf + r, cnt * sizeof(T));
    i += cnt;
  }
}

// gumbel_softmax's check (float, double and 16-bit forms).
template <class T>
void check_gumbel_tau(T tau) {
  if (!(tau > T(0)) || !is_finite(tau)) throw std::invalid_argument("smax::gumbel_softmax: tau must be finite and > 0");
}

// hard = true: the one-hot of the first argmax of z = logits + g. One pass
// keeps, per lane, the best z and the block where that lane first reached
// it; the block of the first global argmax is the smallest such block among
// the lanes holding the maximum, and a rescan of that one block finds the
// position. NaN anywhere -> all NaN; every z = -inf -> all 0. (Block ids are
// int32 lanes for float: n below 2^37.) x may be 16-bit (T float: each
// vector widened as loaded), and y then too: the float kernel's one-hot.
template <class A, class S, class Y>
void gumbel_hard(const S* x, Y* y, std::size_t n, std::uint64_t seed) noexcept {
  using T = compute_t<S>;
  using B = xsimd::batch<T, A>;
  using GB = gumbel_block<A, T>;
  using I = std::conditional_t<std::is_same<T, float>::value, std::int32_t, std::int64_t>;
  using BI = xsimd::batch<I, A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t BS = GB::size;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const philox_key key(seed);
  alignas(64) T noise[BS];
  alignas(64) T xt[BS];
  B best(ninf);
  B where = xsimd::bitwise_cast<B>(BI(I(-1)));  // block ids kept as bit patterns
  // xsimd::isnan, not z != z: xsimd 8.1's batch != is an ordered compare
  // on AVX and AVX-512 (false for NaN) but unordered on SSE2.
  auto nan = xsimd::isnan(B(T(0)));
  for (std::size_t i = 0; i < n; i += BS) {
    const std::size_t b = i / BS;
    GB::run(noise, b * GB::groups, key);
    const B bb = xsimd::bitwise_cast<B>(BI(static_cast<I>(b)));
    const auto scan = [&](auto load) SMAX_LAMBDA_INLINE {
      for (std::size_t k = 0; k < BS; k += W) {
        const B z = load(k) + B::load_aligned(noise + k);
        nan = nan | xsimd::isnan(z);
        const auto better = z > best;
        best = xsimd::select(better, z, best);
        where = xsimd::select(better, bb, where);
      }
    };
    if (n - i < BS) {
      for (std::size_t k = 0; k < BS; ++k) xt[k] = k < n - i ? static_cast<T>(x[i + k]) : ninf;
      scan([&](std::size_t k) SMAX_LAMBDA_INLINE { return B::load_aligned(xt + k); });
    } else {
      scan([&](std::size_t k) SMAX_LAMBDA_INLINE { return load_as<A, T>(x + i + k); });
    }
  }
  if (xsimd::any(nan)) return fill(y, n, Y(std::numeric_limits<T>::quiet_NaN()));
  alignas(64) T bv[W], bw[W];
  best.store_aligned(bv);
  where.store_aligned(bw);
  T top = ninf;
  for (std::size_t l = 0; l < W; ++l) top = bv[l] > top ? bv[l] : top;
  if (top == ninf) return fill(y, n, Y(T(0)));  // every logit -inf
  I bmin = std::numeric_limits<I>::max();
  for (std::size_t l = 0; l < W; ++l) {
    I w;
    std::memcpy(&w, &bw[l], sizeof(I));
    if (bv[l] == top && w < bmin) bmin = w;
  }
  const std::size_t i0 = static_cast<std::size_t>(bmin) * BS;
  GB::run(noise, static_cast<std::uint64_t>(bmin) * GB::groups, key);
  std::size_t idx = i0;
  for (std::size_t k = 0; k < BS && i0 + k < n; ++k)
    if (static_cast<T>(x[i0 + k]) + noise[k] == top) {
      idx = i0 + k;
      break;
    }
  fill(y, n, Y(T(0)));
  y[idx] = Y(T(1));
}

// y = softmax((logits + g) / tau): pass 1 writes z = logits + g to y and
// sums e^(z / tau) (scaled_pass1_clamped; a tau too large for the clamp
// goes the general way, below); pass 2 rewrites y in place. Traffic: read logits, write z, read z, write y. The noise index
// is the element index (offset 0), the same as gumbel_noise(g, n, seed).
template <class A, class T>
void gumbel_softmax(const T* x, T* y, std::size_t n, T tau, std::uint64_t seed, bool hard) noexcept {
  using B = xsimd::batch<T, A>;
  using GB = gumbel_block<A, T>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t BS = GB::size;
  static_assert(BS % (4 * W) == 0, "a noise block must be whole chunks");
  if (n == 0) return;
  if (hard) return gumbel_hard<A>(x, y, n, seed);
  // 1 / tau, capped at the largest finite T (tau below 1 / max is the
  // one-hot limit either way).
  const double inv_tau = 1.0 / static_cast<double>(tau);
  const T c = inv_tau < static_cast<double>(std::numeric_limits<T>::max()) ? static_cast<T>(inv_tau)
                                                                            : std::numeric_limits<T>::max();
  const scaled_extexp<A, T> ex(c);
  const philox_key key(seed);
  alignas(64) T noise[BS];
  if (!ex.clampable) {
    // tau above max / 4096: z to y, then softmax(c z) from y (two-pass with
    // the select form, else three passes). This rare case keeps the noise
    // loop below from being compiled twice, once per pass-1 term. (Not
    // three passes alone: their z - max overflows where z spans more than
    // max, which a c this small still resolves.)
    for (std::size_t i = 0; i < n; i += BS) {
      GB::run(noise, (i / BS) * GB::groups, key);
      for (std::size_t k = 0; k < BS && i + k < n; ++k) y[i + k] = x[i + k] + noise[k];
    }
    return scaled_softmax<A>(y, y, n, c);
  }
  double sum;
  T emax;
  const bool exact = scaled_pass1_clamped<A, T>(
      n, ex,
      [&](std::size_t i, B& v0, B& v1, B& v2, B& v3) {
        const std::size_t k = i % BS;  // blocks start at chunk boundaries
        if (k == 0) GB::run(noise, (i / BS) * GB::groups, key);
        if (i + 4 * W <= n) {
          v0 = B::load_unaligned(x + i) + B::load_aligned(noise + k);
          v1 = B::load_unaligned(x + i + W) + B::load_aligned(noise + k + W);
          v2 = B::load_unaligned(x + i + 2 * W) + B::load_aligned(noise + k + 2 * W);
          v3 = B::load_unaligned(x + i + 3 * W) + B::load_aligned(noise + k + 3 * W);
          v0.store_unaligned(y + i);
          v1.store_unaligned(y + i + W);
          v2.store_unaligned(y + i + 2 * W);
          v3.store_unaligned(y + i + 3 * W);
        } else {
          const std::size_t r = n - i;
          alignas(64) T z[4 * W];
          for (std::size_t j = 0; j < 4 * W; ++j) z[j] = j < r ? x[i + j] + noise[k + j] : T(0);
          std::memcpy(y + i, z, r * sizeof(T));
          v0 = B::load_aligned(z);
          v1 = B::load_aligned(z + W);
          v2 = B::load_aligned(z + 2 * W);
          v3 = B::load_aligned(z + 3 * W);
        }
      },
      sum, emax);
  if (exact) return scaled_two_pass_write<A>(y, y, n, ex, sum, emax);
  scaled_softmax_three_pass<A>(y, y, n, c);
}

}  // namespace detail
}  // namespace smax
