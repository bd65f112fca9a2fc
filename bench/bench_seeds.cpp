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

#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "common.hpp"

namespace {

std::vector<std::size_t> seed_sizes() { return {4096, 65536, std::size_t(1) << 26}; }

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
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::multimax(x, y, n, smax_bench::multimax_params_with_every_term()); };
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
  // Backward, in cache (4K, 64K: the kept y of each size stays small): dy
  // is the shared input and x too, y the forward output of the first
  // slot's input (computed in the untimed first call, then reused by every
  // call of that size).
  std::vector<std::size_t> in_cache;
  for (std::size_t n : ns)
    if (n <= 65536) in_cache.push_back(n);
  enum which { sigmoid, sa, sa_norm, multi, asent };
  const struct {
    which w;
    const char* name;
    smax_bench::mem_traffic traffic;
  } backward[] = {// the streams read (x and dy are one array here): x; max x, dot y x,
                  // sum x, then x; + min / max x, P over x; dot y x, then x y;
                  // entmax's two reads of y and x, the scaling pass
                  {sigmoid, "seeds/sigmoid_attention_backward", {1, 1}},
                  {sa, "seeds/sa_softmax_backward", {5, 1}},
                  {sa_norm, "seeds/sa_softmax_normalized_backward", {7, 1}},
                  {multi, "seeds/multimax_backward", {4, 1}},
                  {asent, "seeds/asentmax_backward", {5, 2}}};
  for (const auto& b : backward) {
    smax_bench::kernel<T> k;
    k.name = b.name;
    k.traffic = b.traffic;
    k.check = smax_bench::finite_check<T>;
    const which w = b.w;
    k.run = [w](const T* dy, T* dx, std::size_t n) {
      static std::map<std::pair<int, std::size_t>, std::vector<T>> outputs;
      std::vector<T>& y = outputs[{int(w), n}];
      const T bias = static_cast<T>(-std::log(static_cast<double>(n)));
      if (y.empty()) {
        y.resize(n);
        switch (w) {
          case sigmoid: smax::dynamic::sigmoid_attention(dy, y.data(), n, bias); break;
          case sa: smax::dynamic::sa_softmax(dy, y.data(), n, false); break;
          case sa_norm: smax::dynamic::sa_softmax(dy, y.data(), n, true); break;
          case multi: smax::dynamic::multimax(dy, y.data(), n, smax_bench::multimax_params_with_every_term()); break;
          case asent: smax::dynamic::asentmax(dy, y.data(), n, T(1.5), T(0.0555), T(0)); break;
        }
      }
      switch (w) {
        case sigmoid: return smax::dynamic::sigmoid_attention_backward(dy, y.data(), dy, dx, n, bias);
        case sa: return smax::dynamic::sa_softmax_backward(dy, y.data(), dy, dx, n, false);
        case sa_norm: return smax::dynamic::sa_softmax_backward(dy, y.data(), dy, dx, n, true);
        case multi: return smax::dynamic::multimax_backward(dy, y.data(), dy, dx, n, smax_bench::multimax_params_with_every_term());
        case asent: return smax::dynamic::asentmax_backward(dy, y.data(), dy, dx, n, T(1.5), T(0.0555), T(0));
      }
    };
    smax_bench::register_per_isa(k, in_cache);
  }
}

SMAX_BENCH_REGISTER(seeds) { register_type<float>(seed_sizes()); }

}  // namespace
