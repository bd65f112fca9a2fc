// Peer: libtorch's CPU softmax (at::_softmax_out on a 1-D tensor wrapping
// the buffers, no copies), one intra-op thread. Built only when CMake finds
// Torch (-DTorch_DIR=...): libtorch is not packaged in Debian 12, so this
// file has not been compiled on the project's machine.
#include <torch/torch.h>

#include <smax/dynamic.hpp>

#include "common.hpp"

namespace {

void torch_run(const float* x, float* y, std::size_t rows, std::size_t cols) {
  static const bool single = [] {
    at::set_num_threads(1);
    return true;
  }();
  (void)single;
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  const std::vector<int64_t> shape = {static_cast<int64_t>(rows), static_cast<int64_t>(cols)};
  const at::Tensor in = torch::from_blob(const_cast<float*>(x), shape, opts);
  at::Tensor out = torch::from_blob(y, shape, opts);
  at::_softmax_out(out, in, 1, false);
}

// libtorch's bf16 / fp16 softmax of the 16-bit logits of bench_half.cpp,
// "libtorch/softmax16/<bf16|fp16>/native/<n>" (PyTorch widens to float per
// row inside; the output is 16-bit). libtorch 1.13 (Debian 12) has no CPU
// softmax for Half: it throws, and the entry is skipped.
template <class H>
void register_torch_half(torch::ScalarType type) {
  smax_bench::register_half_peer<H>("libtorch/softmax16", [type](const H* x, H* y, std::size_t n) {
    static const bool single = [] {
      at::set_num_threads(1);
      return true;
    }();
    (void)single;
    const auto opts = torch::TensorOptions().dtype(type);
    const std::vector<int64_t> shape = {1, static_cast<int64_t>(n)};
    const at::Tensor in = torch::from_blob(const_cast<H*>(x), shape, opts);
    at::Tensor out = torch::from_blob(y, shape, opts);
    at::_softmax_out(out, in, 1, false);
  });
}

SMAX_BENCH_REGISTER(peer_libtorch) {
  register_torch_half<smax::bf16>(torch::kBFloat16);
  register_torch_half<smax::fp16>(torch::kHalf);
  smax_bench::kernel<float> k;
  k.name = "libtorch/softmax";
  k.label = "peer";
  k.traffic = {3, 2};
  k.run = [](const float* x, float* y, std::size_t n) { torch_run(x, y, 1, n); };
  k.run_batch = [](const float* x, float* y, std::size_t rows, std::size_t cols) { torch_run(x, y, rows, cols); };
  k.check = smax_bench::compare_check<float>(
      [](const float* x, float* y, std::size_t n) { smax::dynamic::softmax(x, y, n); }, 3e-2, 1e-30);
  smax_bench::register_once(k, "native", smax_bench::sizes<float>());
  // The same on wide logits (bench_subnormal.cpp): 64K, 64M and the rows.
  smax_bench::kernel<float> w = k;
  w.name = "libtorch/softmax_wide";
  w.run = [](const float* x, float* y, std::size_t n) { torch_run(smax_bench::wide_input(x), y, 1, n); };
  w.check = nullptr;
  smax_bench::register_once(w, "native", {65536, std::size_t(1) << 26});
  w.name = "libtorch/softmax_batched_wide";
  w.traffic = {1, 1};
  w.roof = smax_bench::roof_kind::copy;
  w.run_threaded = [](const float* x, float* y, std::size_t rows, std::size_t cols, std::size_t t) {
    (void)t;
    torch_run(smax_bench::wide_input(x), y, rows, cols);
  };
  smax_bench::register_threaded(w, "native", false, {{smax_bench::batch_rows, smax_bench::batch_cols}}, {1});
  smax_bench::kernel<float> b = k;
  b.name = "libtorch/softmax_batched";
  b.traffic = {1, 1};
  b.roof = smax_bench::roof_kind::copy;
  smax_bench::register_batched(b, "native", false);
}

}  // namespace
