// narrow_pair on the avx512 level's bf16 variant (arch tag avx512_bf16),
// compiled with that variant's flags (cmake/smaxDispatch.cmake): the only
// TU of the tests where half.hpp's vcvtne2ps2bf16 paths exist. The per-ISA
// probes (isa_probe.cpp) check the other levels.
#include <cstddef>

#include "narrow_pair_check.hpp"

namespace smax_test {

long narrow_pair_mismatches_avx512_bf16(std::size_t vectors) {
  return narrow_pair_check<smax::detail::avx512_bf16>(vectors);
}

}  // namespace smax_test
