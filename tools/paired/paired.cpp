// Paired timing of single kernels through one arch tag: built once per tree
// and ISA by paired_run.sh, which alternates the binaries and takes medians.
// Prints "kernel ns/elem" for each kernel at the size given (argv[1]).
#include <smax/smax.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <cstring>
#include <vector>

#ifndef TAG
#error "compile with -DTAG=<xsimd arch tag>"
#endif

namespace {
using A = TAG;
volatile double sink;  // a loss's value, kept

template <class F>
double median_ns_per_elem(std::size_t n, F&& f) {
  const std::size_t reps = std::max<std::size_t>(1, (std::size_t(1) << 24) / n);
  std::vector<double> t;
  f();
  for (int k = 0; k < 7; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t r = 0; r < reps; ++r) f();
    const auto t1 = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / double(reps * n));
  }
  std::nth_element(t.begin(), t.begin() + 3, t.end());
  return t[3];
}
}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 65536;
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.f, 3.f);
  // The four arrays carved from one page-aligned block at offsets that
  // differ mod 4 KiB (64-byte aligned): the same layout in every binary, and
  // no 4 KiB aliasing between the arrays to disturb the comparison.
  const std::size_t region = (n * sizeof(float) + 8191) / 4096 * 4096;
  void* block = std::aligned_alloc(4096, 4 * region + 4096);
  const auto carve = [&](int k) {
    return reinterpret_cast<float*>(static_cast<char*>(block) + k * region + k * 320);
  };
  float *const x = carve(0), *const y = carve(1), *const dy = carve(2), *const dx = carve(3);
  for (std::size_t i = 0; i < n; ++i) x[i] = nd(g);
  for (std::size_t i = 0; i < n; ++i) dy[i] = nd(g);
  smax::softmax(A{}, x, y, n);
  smax::softmax_options<float> scaled;
  scaled.scale = 0.125f;
  smax::softmax_options<float> capped = scaled;
  capped.softcap = 30.f;
  auto report = [&](const char* name, auto&& f) { std::printf("%s %.4f\n", name, median_ns_per_elem(n, f)); };
  report("softmax(auto)", [&] { smax::softmax(A{}, x, y, n); });
  report("softmax(two_pass)", [&] { smax::softmax(A{}, x, y, n, smax::algorithm::two_pass); });
  report("softmax(online)", [&] { smax::softmax(A{}, x, y, n, smax::algorithm::online); });
  report("softmax(scale)", [&] { smax::softmax(A{}, x, y, n, scaled); });
  report("softmax(scale,cap)", [&] { smax::softmax(A{}, x, y, n, capped); });
  report("log_softmax", [&] { smax::log_softmax(A{}, x, y, n); });
  report("softmax_backward", [&] { smax::softmax_backward(A{}, y, dy, dx, n); });
  report("softmax_backward(cap)",
         [&] { smax::softmax_backward(A{}, x, y, dy, dx, n, capped); });
  report("softpick", [&] { smax::softpick(A{}, x, y, n); });
  report("softpick_backward", [&] { smax::softpick_backward(A{}, x, y, dy, dx, n); });
  report("sa_softmax", [&] { smax::sa_softmax(A{}, x, y, n); });
  report("sa_softmax(norm)", [&] { smax::sa_softmax(A{}, x, y, n, true); });
  report("cross_entropy(smoothed)", [&] { sink = smax::cross_entropy(A{}, x, n, n / 3, 0.1f); });
  report("sa_softmax_backward", [&] { smax::sa_softmax_backward(A{}, x, y, dy, dx, n); });
  report("sa_softmax_backward(norm)",
         [&] { smax::sa_softmax_backward(A{}, x, y, dy, dx, n, true); });
  report("ssmax", [&] { smax::ssmax(A{}, x, y, n, 0.43f, 0.f); });
  report("sigmoid_attention", [&] { smax::sigmoid_attention(A{}, x, y, n, -8.f); });
  report("stablemax", [&] { smax::stablemax(A{}, x, y, n); });
  // (y: stablemax's output, positive everywhere: the power on every lane)
  report("entmax_backward(1.25)", [&] { smax::entmax_backward(A{}, y, dy, dx, n, 1.25f); });
  report("log_stablemax", [&] { smax::log_stablemax(A{}, x, y, n); });
  report("stablemax_backward", [&] { smax::stablemax_backward(A{}, x, dy, dx, n); });
  report("entmax_bisect(1.25)", [&] { smax::entmax_bisect(A{}, x, y, n, 1.25f); });
  std::free(block);
  return 0;
}
