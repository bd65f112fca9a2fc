// The other variants on every ISA compiled in: stablemax, log_stablemax,
// softpick, ssmax, gumbel_softmax (soft and hard), gumbel_noise, and the
// backward passes, over the size grid (float; double on a short grid).
// Every entry reports vs_roofline against the "read twice, write once"
// streaming kernel timed right after it on the same buffers (gumbel_noise,
// which only writes, against the copy roofline).
//
// The issue-5 targets (64M floats, one thread):
//   smax_bench --benchmark_filter='(stablemax|softpick|ssmax|gumbel_softmax|softmax/automatic)/f32/avx512/67108864$'
//              --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// stablemax, softpick, ssmax: vs_roofline >= 0.85; gumbel_softmax:
// items_per_second >= 0.5 x softmax/automatic's (or the ratio of the two
// vs_roofline figures, which cancels the machine's drift).
#include <smax/dynamic.hpp>

#include <vector>

#include "common.hpp"

namespace {

// Double: 4K, 64K, 1M, 16M and 32M elements (L1, L2, L3, DRAM).
std::vector<std::size_t> double_sizes() { return {4096, 65536, 1 << 20, 1 << 24, 1 << 25}; }

// ssmax's s: about 1 / log(n) for long contexts (the paper's learned values
// are O(0.1..1)); b = 0.
constexpr double ssmax_s = 0.43;

template <class T>
void register_type(const std::vector<std::size_t>& ns) {
  const auto sums_to_one = [](const T* x, const T* y, std::size_t n) { return smax_bench::sum_check(x, y, n, 1e-5); };
  {
    smax_bench::kernel<T> k;
    k.name = "stablemax";
    k.traffic = {2, 1};  // sum of s(x); write s(x) / sum
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::stablemax(x, y, n); };
    k.check = sums_to_one;
    smax_bench::register_per_isa(k, ns);
  }
  {
    smax_bench::kernel<T> k;
    k.name = "log_stablemax";
    k.traffic = {2, 1};
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::log_stablemax(x, y, n); };
    k.check = smax_bench::finite_check<T>;
    smax_bench::register_per_isa(k, ns);
  }
  {
    smax_bench::kernel<T> k;
    k.name = "softpick";
    k.traffic = {2, 1};  // two-pass: sum of |e^x - 1| as (p, 2^K); write
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::softpick(x, y, n); };
    k.check = smax_bench::finite_check<T>;
    smax_bench::register_per_isa(k, ns);
  }
  {
    smax_bench::kernel<T> k;
    k.name = "ssmax";
    k.traffic = {2, 1};  // two-pass with the scale in the exponent
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::ssmax(x, y, n, T(ssmax_s)); };
    k.check = sums_to_one;
    smax_bench::register_per_isa(k, ns);
  }
  {
    smax_bench::kernel<T> k;
    k.name = "gumbel_softmax";
    k.traffic = {2, 2};  // read logits, write z = logits + g, read z, write y
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::gumbel_softmax(x, y, n, T(1), 42); };
    k.check = sums_to_one;
    smax_bench::register_per_isa(k, ns);
  }
  {
    smax_bench::kernel<T> k;
    k.name = "gumbel_softmax_hard";
    k.traffic = {1, 1};  // argmax of logits + g; write the one-hot
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::gumbel_softmax(x, y, n, T(1), 42, true); };
    k.check = sums_to_one;
    smax_bench::register_per_isa(k, ns);
  }
  {
    smax_bench::kernel<T> k;
    k.name = "gumbel_noise";
    k.traffic = {0, 1};
    k.roof = smax_bench::roof_kind::copy;
    k.run = [](const T*, T* y, std::size_t n) { smax::dynamic::gumbel_noise(y, n, 42); };
    k.check = smax_bench::finite_check<T>;
    smax_bench::register_per_isa(k, ns);
  }
  // Backward, with y = dy = x (one array; the traffic counts the streams
  // actually read): stablemax reads x twice (sums, then dx); softmax's and
  // log_softmax's read it for the dot or sum, again for dx; softpick reads
  // it for the dot, the sum, then dx.
  const auto backward = [&](const char* name, double reads, void (*run)(const T*, T*, std::size_t)) {
    smax_bench::kernel<T> k;
    k.name = name;
    k.traffic = {reads, 1};
    k.run = run;
    k.check = smax_bench::finite_check<T>;
    smax_bench::register_per_isa(k, ns);
  };
  backward("stablemax_backward", 2, [](const T* x, T* y, std::size_t n) { smax::dynamic::stablemax_backward(x, x, y, n); });
  backward("softmax_backward", 2, [](const T* x, T* y, std::size_t n) { smax::dynamic::softmax_backward(x, x, y, n); });
  backward("log_softmax_backward", 2,
           [](const T* x, T* y, std::size_t n) { smax::dynamic::log_softmax_backward(x, x, y, n); });
  backward("softpick_backward", 3, [](const T* x, T* y, std::size_t n) { smax::dynamic::softpick_backward(x, x, x, y, n); });
}

SMAX_BENCH_REGISTER(variants) {
  register_type<float>(smax_bench::sizes<float>());
  register_type<double>(double_sizes());
}

}  // namespace
