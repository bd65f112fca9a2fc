// topk_softmax and sample (smax/detail/topk.hpp) against what they replace: smax's
// softmax alone, softmax followed by std::partial_sort of the indices, and a
// sampler that sorts the whole vocabulary (std::sort) before top-k, top-p,
// min-p. libtorch's versions are in peer_torch_topk.cpp. Single thread, the
// best ISA (smax::dynamic's default), logits ~ N(0, 3^2), vocabulary sizes
// of LLaMA 2 (32000), LLaMA 3 (128256), Qwen 2 (151936) and 1M. The
// "_bf16" entries take the same logits rounded to bf16 (the LM head's
// output in most CPU runtimes), read as 16-bit.
//
// Compare medians of an interleaved run:
//   smax_bench --benchmark_filter='^(topk|sample)/' --benchmark_repetitions=9
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// (one command line)
#include <algorithm>
#include <map>
#include <numeric>
#include <type_traits>
#include <vector>

#include "bench_topk.hpp"
#include "common.hpp"

namespace {

using smax_bench::topk_bench::logits;
using smax_bench::topk_bench::sampler_settings;

// logits(n) rounded to bf16, kept per n.
const std::vector<smax::bf16>& logits_bf16(std::size_t n) {
  static std::map<std::size_t, std::vector<smax::bf16>> kept;
  std::vector<smax::bf16>& h = kept[n];
  if (h.empty()) {
    h.resize(n);
    smax::dynamic::convert(logits(n).data(), h.data(), n);
  }
  return h;
}

template <class T>
const std::vector<T>& logits_as(std::size_t n) {
  if constexpr (std::is_same<T, float>::value)
    return logits(n);
  else
    return logits_bf16(n);
}

void softmax_only(benchmark::State& st, std::size_t n) {
  const auto& x = logits(n);
  std::vector<float> y(n);
  for (auto _ : st) {
    smax::dynamic::softmax(x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * n));
}

template <class T>
void topk_fused(benchmark::State& st, std::size_t n, std::size_t k) {
  const auto& x = logits_as<T>(n);
  std::vector<T> p(k);
  std::vector<std::uint32_t> idx(k);
  for (auto _ : st) {
    smax::dynamic::topk_softmax(x.data(), n, k, p.data(), idx.data());
    benchmark::DoNotOptimize(p.data());
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * n));
}

// smax softmax, then the k best indices by std::partial_sort.
void topk_softmax_partial_sort(benchmark::State& st, std::size_t n, std::size_t k) {
  const auto& x = logits(n);
  std::vector<float> y(n), p(k);
  std::vector<std::uint32_t> order(n);
  for (auto _ : st) {
    smax::dynamic::softmax(x.data(), y.data(), n);
    std::iota(order.begin(), order.end(), 0u);
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                      [&](std::uint32_t a, std::uint32_t b) { return y[a] > y[b] || (y[a] == y[b] && a < b); });
    for (std::size_t j = 0; j < k; ++j) p[j] = y[order[j]];
    benchmark::DoNotOptimize(p.data());
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * n));
}

template <class T>
void sample_fused(benchmark::State& st, std::size_t n) {
  const auto& x = logits_as<T>(n);
  const smax::sampling s = sampler_settings();
  std::uint64_t t = 0;
  for (auto _ : st) benchmark::DoNotOptimize(smax::dynamic::sample(x.data(), n, s, 7, t++));
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * n));
}

// The sorting sampler: p = softmax(x / T), every index sorted by p, then
// top_k, top_p over the kept, min_p, and a draw (the same u as smax).
void sample_std_sort(benchmark::State& st, std::size_t n) {
  const auto& x = logits(n);
  const smax::sampling s = sampler_settings();
  std::vector<float> z(n), p(n);
  std::vector<std::uint32_t> order(n);
  std::uint64_t t = 0;
  for (auto _ : st) {
    for (std::size_t i = 0; i < n; ++i) z[i] = x[i] / s.temperature;
    smax::dynamic::softmax(z.data(), p.data(), n);
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(),
              [&](std::uint32_t a, std::uint32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    const std::size_t k = s.top_k ? s.top_k : n;
    double total = 0;
    for (std::size_t j = 0; j < k; ++j) total += p[order[j]];
    double mass = 0;
    std::size_t len = 0;
    while (len < k && p[order[len]] >= s.min_p * p[order[0]]) {
      mass += p[order[len++]];
      if (mass >= s.top_p * total) break;
    }
    const double target = smax_bench::topk_bench::uniform(7, t++) * mass;
    double acc = 0;
    std::size_t pick = order[len - 1];
    for (std::size_t j = 0; j < len; ++j)
      if ((acc += p[order[j]]) > target) {
        pick = order[j];
        break;
      }
    benchmark::DoNotOptimize(pick);
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * n));
}

SMAX_BENCH_REGISTER(topk_sampling) {
  for (std::size_t n : smax_bench::topk_bench::vocab_sizes()) {
    const std::string sz = std::to_string(n);
    benchmark::RegisterBenchmark(("topk/smax_softmax_alone/" + sz).c_str(), softmax_only, n);
    for (std::size_t k : {std::size_t(8), std::size_t(64)}) {
      const std::string kk = "k:" + std::to_string(k) + "/" + sz;
      benchmark::RegisterBenchmark(("topk/smax_topk_softmax/" + kk).c_str(), topk_fused<float>, n, k);
      benchmark::RegisterBenchmark(("topk/smax_topk_softmax_bf16/" + kk).c_str(), topk_fused<smax::bf16>, n, k);
      benchmark::RegisterBenchmark(("topk/smax_softmax+partial_sort/" + kk).c_str(), topk_softmax_partial_sort, n, k);
    }
    benchmark::RegisterBenchmark(("sample/smax_sample/" + sz).c_str(), sample_fused<float>, n);
    benchmark::RegisterBenchmark(("sample/smax_sample_bf16/" + sz).c_str(), sample_fused<smax::bf16>, n);
    benchmark::RegisterBenchmark(("sample/std_sort_sampler/" + sz).c_str(), sample_std_sort, n);
  }
}

}  // namespace
