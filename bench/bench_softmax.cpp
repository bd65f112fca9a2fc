// smax's softmax and log_softmax on every ISA compiled in: each algorithm
// over the size grid (float; double on a shorter grid), and the batched case.
#include <smax/dynamic.hpp>

#include "common.hpp"

namespace {

using smax::algorithm;

struct algo {
  const char* name;
  algorithm a;
  smax_bench::mem_traffic traffic;  // arrays read, written per element out of cache
};

// recompute: max, sum, write (3R + 1W); reload: max, store e^(x-m) and sum,
// scale in place (3R + 2W); two-pass and online: 2R + 1W. automatic is
// charged the traffic of what it runs out of cache (two-pass).
const algo algos[] = {
    {"three_pass_recompute", algorithm::three_pass_recompute, {3, 1}},
    {"three_pass_reload", algorithm::three_pass_reload, {3, 2}},
    {"two_pass", algorithm::two_pass, {2, 1}},
    {"online", algorithm::online, {2, 1}},
    {"automatic", algorithm::automatic, {2, 1}},
};

// Double: 4K, 64K, 1M, 16M and 32M elements (L1, L2, L3, DRAM).
std::vector<std::size_t> double_sizes() { return {4096, 65536, 1 << 20, 1 << 24, 1 << 25}; }

template <class T>
void register_type(const std::vector<std::size_t>& ns) {
  for (const algo& al : algos) {
    smax_bench::kernel<T> k;
    k.name = std::string("softmax/") + al.name;
    k.traffic = al.traffic;
    const algorithm a = al.a;
    k.run = [a](const T* x, T* y, std::size_t n) { smax::dynamic::softmax(x, y, n, a); };
    k.check = [](const T* x, const T* y, std::size_t n) { return smax_bench::sum_check(x, y, n, 1e-5); };
    smax_bench::register_per_isa(k, ns);
  }
  smax_bench::kernel<T> k;
  k.name = "log_softmax";
  k.traffic = {3, 1};  // max, sum of e^(x-m), write
  k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::log_softmax(x, y, n); };
  k.check = smax_bench::finite_check<T>;
  smax_bench::register_per_isa(k, ns);
}

SMAX_BENCH_REGISTER(softmax) {
  register_type<float>(smax_bench::sizes<float>());
  register_type<double>(double_sizes());

  // Batched rows: each 128 KiB row stays in L2 between the passes, so every
  // algorithm's DRAM floor is one read and one write (ratio against copy).
  for (const std::string& isa : smax_bench::compiled_isas()) {
    for (const algo& al : algos) {
      smax_bench::kernel<float> k;
      k.name = std::string("softmax_batched/") + al.name;
      k.traffic = {1, 1};
      k.roof = smax_bench::roof_kind::copy;
      const algorithm a = al.a;
      k.run = [a](const float* x, float* y, std::size_t n) { smax::dynamic::softmax(x, y, n, a); };
      k.check = [](const float* x, const float* y, std::size_t n) { return smax_bench::sum_check(x, y, n, 1e-5); };
      smax_bench::register_batched(k, isa, true);
    }
  }
}

}  // namespace
