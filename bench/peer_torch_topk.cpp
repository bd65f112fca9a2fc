// Peer: libtorch's top-k softmax and sampler, one intra-op thread (see
// bench_topk.cpp for smax's side and the run command).
//   topk:   softmax, then topk(k) of the probabilities
//   sample: softmax(x / T), topk(top_k), renormalise, cumsum for top_p,
//           masked_fill, multinomial (the usual transformers-style chain)
#include <torch/torch.h>

#include "bench_topk.hpp"

namespace {

using smax_bench::topk_bench::logits;

void torch_single_thread() {
  static const bool once = [] {
    at::set_num_threads(1);
    return true;
  }();
  (void)once;
}

at::Tensor wrap(const std::vector<float>& x) {
  return torch::from_blob(const_cast<float*>(x.data()), {static_cast<int64_t>(x.size())},
                          torch::TensorOptions().dtype(torch::kFloat32));
}

void torch_topk(benchmark::State& st, std::size_t n, std::size_t k) {
  torch_single_thread();
  const at::Tensor x = wrap(logits(n));
  for (auto _ : st) {
    const at::Tensor p = torch::softmax(x, 0);
    auto r = p.topk(static_cast<int64_t>(k));
    benchmark::DoNotOptimize(std::get<0>(r).data_ptr<float>());
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * n));
}

void torch_sample(benchmark::State& st, std::size_t n) {
  torch_single_thread();
  const smax::sampling s = smax_bench::topk_bench::sampler_settings();
  const at::Tensor x = wrap(logits(n));
  torch::manual_seed(7);
  for (auto _ : st) {
    const at::Tensor p = torch::softmax(x / s.temperature, 0);
    auto top = p.topk(static_cast<int64_t>(s.top_k));
    at::Tensor v = std::get<0>(top);
    v = v / v.sum();
    const at::Tensor cum = v.cumsum(0);
    // Keep the smallest prefix reaching top_p: drop entries whose mass
    // before them already reaches it.
    v = v.masked_fill((cum - v) >= s.top_p, 0.0f);
    const int64_t pick = std::get<1>(top)[torch::multinomial(v, 1).item<int64_t>()].item<int64_t>();
    benchmark::DoNotOptimize(pick);
  }
  st.SetItemsProcessed(static_cast<std::int64_t>(st.iterations() * n));
}

SMAX_BENCH_REGISTER(peer_torch_topk) {
  for (std::size_t n : smax_bench::topk_bench::vocab_sizes()) {
    const std::string sz = std::to_string(n);
    for (std::size_t k : {std::size_t(8), std::size_t(64)})
      benchmark::RegisterBenchmark(("topk/libtorch_softmax+topk/k:" + std::to_string(k) + "/" + sz).c_str(),
                                   torch_topk, n, k);
    benchmark::RegisterBenchmark(("sample/libtorch_sampler/" + sz).c_str(), torch_sample, n);
  }
}

}  // namespace
