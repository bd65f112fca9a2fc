// smax — public functions that compute kernel parameters: the row seeds of
// the batched gumbel_softmax and sample, and ggml's ALiBi slopes.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace smax {

// Row r's seed for batched gumbel_softmax: a bijective 64-bit mix of (seed,
// r) (splitmix64's finalizer on seed + golden-ratio multiples of r + 1), so
// nearby seeds and rows never share a Philox key in practice.
constexpr std::uint64_t gumbel_row_seed(std::uint64_t seed, std::uint64_t r) noexcept {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (r + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// ggml's ALiBi slope of head h of n_head given max_bias: with
// p = 2^floor(log2 n_head), m0 = 2^(-max_bias / p), m1 = 2^(-max_bias / 2 / p),
// slope = m0^(h + 1) for h < p, else m1^(2 (h - p) + 1).
inline double alibi_slope(std::size_t h, std::size_t n_head, double max_bias) noexcept {
  std::size_t p = 1;
  while (p * 2 <= n_head) p *= 2;
  const double m0 = std::exp2(-max_bias / static_cast<double>(p));
  const double m1 = std::exp2(-max_bias / 2.0 / static_cast<double>(p));
  return h < p ? std::pow(m0, static_cast<double>(h + 1)) : std::pow(m1, static_cast<double>(2 * (h - p) + 1));
}

}  // namespace smax
