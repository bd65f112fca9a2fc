// half.hpp's narrow_pair against two narrow() calls on arch tag Arch (see
// isa_probe.hpp, narrow_pair_mismatches), for the TUs built with an ISA's
// flags: the per-ISA probes and the avx512_bf16 variant's
// (bf16_variant_probe.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>

#include <smax/smax.hpp>

namespace smax_test {
namespace {

template <class Arch, class H, smax::detail::narrow_input In>
long narrow_pair_mismatches_of(std::size_t vectors) {
  if constexpr (!smax::detail::has_narrow_pair_v<Arch, H>) {
    return -1;
  } else {
    using B = xsimd::batch<float, Arch>;
    constexpr std::size_t W = B::size;
    std::mt19937 g(static_cast<unsigned>(vectors + W));
    alignas(64) std::uint32_t in[2 * W];
    alignas(64) H two[2 * W], pair[2 * W];
    long differ = 0;
    for (std::size_t v = 0; v < vectors; ++v) {
      for (auto& u : in) {
        u = static_cast<std::uint32_t>(g());
        // finite_normal: no NaN, inf or subnormal (those become 1 + bits)
        const std::uint32_t e = (u >> 23) & 0xffu;
        if (In == smax::detail::narrow_input::finite_normal && (e == 0 || e == 0xffu)) u = 0x3f800000u | (u & 0x7fffu);
      }
      if (In == smax::detail::narrow_input::any) in[v % (2 * W)] = static_cast<std::uint32_t>(v & 0x807fffffu);  // subnormal
      const B lo = xsimd::bitwise_cast<B>(xsimd::batch<std::uint32_t, Arch>::load_aligned(in));
      const B hi = xsimd::bitwise_cast<B>(xsimd::batch<std::uint32_t, Arch>::load_aligned(in + W));
      smax::detail::narrow<Arch, In>(two, lo);
      smax::detail::narrow<Arch, In>(two + W, hi);
      smax::detail::narrow_pair<Arch, In, H>(lo, hi).store_aligned(reinterpret_cast<float*>(pair));
      differ += std::memcmp(two, pair, sizeof two) != 0;
    }
    return differ;
  }
}

template <class Arch>
long narrow_pair_check(std::size_t vectors) {
  using smax::detail::narrow_input;
  const long parts[] = {narrow_pair_mismatches_of<Arch, smax::bf16, narrow_input::any>(vectors),
                        narrow_pair_mismatches_of<Arch, smax::bf16, narrow_input::finite_normal>(vectors),
                        narrow_pair_mismatches_of<Arch, smax::fp16, narrow_input::any>(vectors),
                        narrow_pair_mismatches_of<Arch, smax::fp16, narrow_input::finite_normal>(vectors)};
  long total = 0;
  for (long d : parts) {
    if (d < 0) return -1;
    total += d;
  }
  return total;
}

}  // namespace
}  // namespace smax_test
