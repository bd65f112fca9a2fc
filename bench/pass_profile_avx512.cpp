// smax_pass_profile's AVX-512 entries (compiled with -mavx512f).
#include "pass_profile.hpp"

namespace smax_pass_profile {
std::vector<entry> run_avx512(std::size_t n, int reps) { return run<xsimd::avx512f>(n, reps); }
}  // namespace smax_pass_profile
