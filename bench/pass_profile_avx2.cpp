// smax_pass_profile's AVX2 entries (compiled with -mavx2 -mfma).
#include "pass_profile.hpp"

namespace smax_pass_profile {
std::vector<entry> run_avx2(std::size_t n, int reps) { return run<xsimd::fma3<xsimd::avx2>>(n, reps); }
}  // namespace smax_pass_profile
