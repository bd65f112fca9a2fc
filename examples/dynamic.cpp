// Runtime dispatch: one binary that runs AVX-512, AVX2 or SSE2 code (NEON on
// aarch64), whichever is the best the CPU has. Built with
// smax_add_dynamic_dispatch(<target>) in CMake; SMAX_ISA=avx2 forces an ISA.
#include <cmath>
#include <cstdio>
#include <vector>

#include <smax/dynamic.hpp>

int main() {
  std::vector<float> x(1000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.1f * static_cast<float>(i)) * 10.0f;
  std::vector<float> y(x.size());
  smax::dynamic::softmax(x.data(), y.data(), x.size());
  double total = 0;
  for (float v : y) total += v;
  std::printf("isa = %s, sum = %.7f\n", smax::dynamic::active_isa(), total);
  return std::fabs(total - 1.0) < 1e-6 ? 0 : 1;
}
