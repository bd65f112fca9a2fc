// Peer: XNNPACK's softmax operator (xnn_create_softmax_nc_f32), single
// thread (no pthreadpool). Built when libXNNPACK is found. The Debian build
// (git 2022-02) runs its SSE2/AVX2 kernels (three-pass reload: 3R + 2W).
// The operator is created once per size and set up again only when the
// buffers change (in-cache sizes reuse one buffer), the cheapest use of its
// API; its output is checked against smax before timing.
#include <xnnpack.h>

#include <cstdio>
#include <map>
#include <memory>

#include <smax/dynamic.hpp>

#include "common.hpp"

namespace {

struct xnn_softmax {
  xnn_operator_t op = nullptr;
  const float* x = nullptr;
  float* y = nullptr;
  std::size_t rows = 0;
  ~xnn_softmax() {
    if (op) xnn_delete_operator(op);
  }
};

bool xnn_ready() {
  static const bool ok = xnn_initialize(nullptr) == xnn_status_success;
  return ok;
}

// One operator per channel count, created on first use.
void xnn_run(const float* x, float* y, std::size_t rows, std::size_t cols) {
  static std::map<std::size_t, std::unique_ptr<xnn_softmax>> ops;
  if (!xnn_ready()) {
    std::fprintf(stderr, "smax_bench: xnn_initialize failed\n");
    std::abort();
  }
  auto& slot = ops[cols];
  if (!slot) {
    slot.reset(new xnn_softmax);
    if (xnn_create_softmax_nc_f32(cols, cols, cols, 0, &slot->op) != xnn_status_success) {
      std::fprintf(stderr, "smax_bench: xnn_create_softmax_nc_f32 failed\n");
      std::abort();
    }
  }
  xnn_softmax& s = *slot;
  if (s.x != x || s.y != y || s.rows != rows) {
    if (xnn_setup_softmax_nc_f32(s.op, rows, x, y, nullptr) != xnn_status_success) {
      std::fprintf(stderr, "smax_bench: xnn_setup_softmax_nc_f32 failed\n");
      std::abort();
    }
    s.x = x;
    s.y = y;
    s.rows = rows;
  }
  xnn_run_operator(s.op, nullptr);
}

SMAX_BENCH_REGISTER(peer_xnnpack) {
  smax_bench::kernel<float> k;
  k.name = "xnnpack/softmax";
  k.label = "peer";
  k.traffic = {3, 2};
  k.run = [](const float* x, float* y, std::size_t n) { xnn_run(x, y, 1, n); };
  k.run_batch = [](const float* x, float* y, std::size_t rows, std::size_t cols) { xnn_run(x, y, rows, cols); };
  // Peers sum in float: at 64M their result drifts by up to ~1e-2 (README).
  k.check = smax_bench::compare_check<float>(
      [](const float* x, float* y, std::size_t n) { smax::dynamic::softmax(x, y, n); }, 3e-2, 1e-30);
  smax_bench::register_once(k, "native", smax_bench::sizes<float>());
  smax_bench::kernel<float> b = k;
  b.name = "xnnpack/softmax_batched";
  b.traffic = {1, 1};
  b.roof = smax_bench::roof_kind::copy;
  smax_bench::register_batched(b, "native", false);
}

}  // namespace
