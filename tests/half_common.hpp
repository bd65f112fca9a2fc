// Shared by the 16-bit tests: the formats' parameters, the spacing of
// their values, and 16-bit logits.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include <smax/detail/half.hpp>

#include "common.hpp"

namespace smax_test {

using smax::bf16;
using smax::fp16;

template <class H>
struct format;
template <>
struct format<bf16> {
  static constexpr int digits = 8;          // significand bits, the implicit one included
  static constexpr int min_exponent = -126; // of the smallest normal
  static constexpr long double max_finite = 0x1.fep127L;
  static const char* name() { return "bf16"; }
};
template <>
struct format<fp16> {
  static constexpr int digits = 11;
  static constexpr int min_exponent = -14;
  static constexpr long double max_finite = 65504.0L;
  static const char* name() { return "fp16"; }
};

// The spacing of H's values around |v| (> 0, finite).
template <class H>
long double ulp(long double v) {
  int e;
  std::frexp(std::fabs(v), &e);  // |v| in [2^(e-1), 2^e)
  return std::ldexp(1.0L, std::max(e - 1, format<H>::min_exponent) - (format<H>::digits - 1));
}

// |got - exact| below one ulp of H at exact (below 1e-30: absolute 1e-30, as
// the float contract; fp16 below its normal range: 2^-24 absolute via ulp).
template <class H>
bool within_ulp(float got, long double exact) {
  if (std::isinf(exact)) return got == exact;
  const long double err = std::fabs(static_cast<long double>(got) - exact);
  if (std::fabs(exact) < 1e-30L) return err <= 1e-30L;
  return err < ulp<H>(exact);
}

template <class H>
std::vector<H> logits(std::size_t n, double sigma, std::uint64_t seed) {
  const auto f = smax_test::normal<float>(n, sigma, seed);
  std::vector<H> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = H(f[i]);
  return x;
}

template <class H>
std::uint16_t bits_of(H h) {
  return h.bits;
}

}  // namespace smax_test
