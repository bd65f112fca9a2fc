// The seeds' other members (seeds.hpp) on every ISA compiled in, float, at
// 4K, 64K and 64M elements, beside their baselines (softmax/automatic and
// entmax_bisect/1.5 are registered by bench_softmax.cpp / bench_sparse.cpp;
// these names sort next to them).
//
// The issue-20 targets (one thread), interleaved:
//   smax_bench --benchmark_filter='(seeds/.*|softmax/automatic|entmax_bisect/1.5)/f32/avx512/(4096|65536|67108864)$'
//              --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// sigmoid_attention at 64M: vs_roofline (copy) >= 0.85; sa_softmax and
// multimax within 1.15x softmax/automatic's time; asentmax within 1.2x
// entmax_bisect/1.5's.
#include <smax/dynamic.hpp>

#include <vector>

#include "common.hpp"

namespace {

std::vector<std::size_t> seed_sizes() { return {4096, 65536, std::size_t(1) << 26}; }

// MultiMax's modulator with every term active (values of the scale the
// official code's trained parameters take: O(0.1) slopes, knees near 0).
smax::multimax_params bench_params() {
  smax::multimax_params p;
  const double r[4] = {-0.5, 0.8, -1.5, 2.0}, t[4] = {0.3, -0.2, 0.05, 0.02};
  for (int i = 0; i < 4; ++i) p.ranges[i] = r[i], p.ts[i] = t[i];
  return p;
}

template <class T>
void register_type(const std::vector<std::size_t>& ns) {
  const auto sums_to_one = [](const T* x, const T* y, std::size_t n) { return smax_bench::sum_check(x, y, n, 1e-5); };
  {
    smax_bench::kernel<T> k;
    k.name = "seeds/sigmoid_attention";
    k.traffic = {1, 1};
    k.roof = smax_bench::roof_kind::copy;
    k.run = [](const T* x, T* y, std::size_t n) {
      smax::dynamic::sigmoid_attention(x, y, n, static_cast<T>(-std::log(static_cast<double>(n))));
    };
    k.check = smax_bench::finite_check<T>;
    smax_bench::register_per_isa(k, ns);
  }
  for (bool norm : {false, true}) {
    smax_bench::kernel<T> k;
    k.name = norm ? "seeds/sa_softmax_normalized" : "seeds/sa_softmax";
    k.traffic = {2, 1};  // two-pass sum (with min / max); the fused write
    k.run = [norm](const T* x, T* y, std::size_t n) { smax::dynamic::sa_softmax(x, y, n, norm); };
    k.check = smax_bench::finite_check<T>;
    smax_bench::register_per_isa(k, ns);
  }
  {
    smax_bench::kernel<T> k;
    k.name = "seeds/multimax";
    k.traffic = {2, 1};  // two-pass sum of e^sigma(x); the write
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::multimax(x, y, n, bench_params()); };
    k.check = sums_to_one;
    smax_bench::register_per_isa(k, ns);
  }
  {
    smax_bench::kernel<T> k;
    k.name = "seeds/asentmax";
    k.traffic = {2, 1};  // as entmax_bisect: max and candidates; the write
    // s = 1 / log(64M): c is about 1 at the largest size, as the paper's
    // learned scales keep it.
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::asentmax(x, y, n, T(1.5), T(0.0555), T(0)); };
    k.check = sums_to_one;
    smax_bench::register_per_isa(k, ns);
  }
}

SMAX_BENCH_REGISTER(seeds) { register_type<float>(seed_sizes()); }

}  // namespace
