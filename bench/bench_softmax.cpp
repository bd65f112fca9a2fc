// smax's softmax and log_softmax on every ISA compiled in: each algorithm
// over the size grid (float; double on a shorter grid), and the batched API
// on 1 and 2 threads.
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
  // max with the sum of e^x 2^-E, write; max, sum, write (3 reads) below
  // 16 KiB on AVX-512, below 1 MiB on AVX2 and at every size on SSE2
  k.traffic = {2, 1};
  k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::log_softmax(x, y, n); };
  k.check = smax_bench::finite_check<T>;
  smax_bench::register_per_isa(k, ns);
}

SMAX_BENCH_REGISTER(softmax) {
  register_type<float>(smax_bench::sizes<float>());
  register_type<double>(double_sizes());

  // Batched rows through the public batched API (smax::dynamic::softmax on
  // matrix_views, executor nullptr for 1 thread, a static thread_pool for
  // more), wall-clock timed: "softmax_batched/<algo>/f32/<isa>/<rows>/<cols>/
  // threads:<t>/real_time". A row of up to 256 KiB stays in L2 between the
  // passes, so the DRAM floor of a batch of rows is one read and one write
  // (traffic 1R+1W, ratio against the copy roofline of the same thread
  // count). One long row (1 x 64M) is the exception: automatic splits it into
  // blocks, two DRAM reads and one write (2R+1W, against rw2).
  const std::vector<std::size_t> threads = {1, 2};
  for (const std::string& isa : smax_bench::compiled_isas()) {
    for (const algo& al : algos) {
      const algorithm a = al.a;
      smax_bench::kernel<float> k;
      k.name = std::string("softmax_batched/") + al.name;
      k.traffic = {1, 1};
      k.roof = smax_bench::roof_kind::copy;
      k.run_threaded = [a](const float* x, float* y, std::size_t rows, std::size_t cols, std::size_t t) {
        smax::dynamic::softmax(smax::matrix_view<const float>(x, rows, cols), smax::matrix_view<float>(y, rows, cols),
                               a, smax_bench::pool(t));
      };
      k.check = [](const float* x, const float* y, std::size_t n) { return smax_bench::sum_check(x, y, n, 1e-5); };
      if (a != algorithm::automatic) {
        // The explicit algorithms run row by row: the 2048 x 32768 batch only.
        smax_bench::register_threaded(k, isa, true, {{smax_bench::batch_rows, smax_bench::batch_cols}}, threads);
        continue;
      }
      for (const smax_bench::shape& sh : smax_bench::threaded_shapes()) {
        smax_bench::kernel<float> ks = k;
        if (sh.rows == 1) {
          ks.traffic = {2, 1};
          ks.roof = smax_bench::roof_kind::rw2;
        }
        smax_bench::register_threaded(ks, isa, true, {sh}, threads);
      }
    }
  }
}

}  // namespace
