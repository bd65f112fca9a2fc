// Peer: XNNPACK's softmax operator (xnn_create_softmax_nc_f32). Built when
// libXNNPACK is found. The Debian build (git 2022-02) runs its SSE2/AVX2
// kernels (three-pass reload: 3R + 2W).
// Single vectors run on the calling thread (no pthreadpool); the batched
// entries run on 1 thread (no pool) or on a pthreadpool of 2 threads
// (pthreadpool_create(2): the caller and one worker), which XNNPACK splits
// by rows: one long row stays on one thread.
// An operator is created once per (channels, threads) and set up again only
// when the buffers change (in-cache sizes reuse one buffer), the cheapest use
// of its API; its output is checked against smax before timing.
#include <pthreadpool.h>
#include <xnnpack.h>

#include <cstdio>
#include <map>
#include <memory>
#include <utility>

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

// nullptr (the calling thread) for 1 thread, else one pthreadpool of that
// size created on first use and kept (creating threads per call would be
// timed). Never destroyed: it lives as long as the process.
pthreadpool_t xnn_pool(std::size_t threads) {
  if (threads <= 1) return nullptr;
  static std::map<std::size_t, pthreadpool_t> pools;
  pthreadpool_t& p = pools[threads];
  if (!p) {
    p = pthreadpool_create(threads);
    if (!p || pthreadpool_get_threads_count(p) != threads) {
      std::fprintf(stderr, "smax_bench: pthreadpool_create(%zu) failed\n", threads);
      std::abort();
    }
  }
  return p;
}

void xnn_run(const float* x, float* y, std::size_t rows, std::size_t cols, std::size_t threads = 1) {
  static std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<xnn_softmax>> ops;
  if (!xnn_ready()) {
    std::fprintf(stderr, "smax_bench: xnn_initialize failed\n");
    std::abort();
  }
  pthreadpool_t pool = xnn_pool(threads);
  auto& slot = ops[{cols, threads}];
  if (!slot) {
    slot.reset(new xnn_softmax);
    if (xnn_create_softmax_nc_f32(cols, cols, cols, 0, &slot->op) != xnn_status_success) {
      std::fprintf(stderr, "smax_bench: xnn_create_softmax_nc_f32 failed\n");
      std::abort();
    }
  }
  xnn_softmax& s = *slot;
  if (s.x != x || s.y != y || s.rows != rows) {
    if (xnn_setup_softmax_nc_f32(s.op, rows, x, y, pool) != xnn_status_success) {
      std::fprintf(stderr, "smax_bench: xnn_setup_softmax_nc_f32 failed\n");
      std::abort();
    }
    s.x = x;
    s.y = y;
    s.rows = rows;
  }
  if (xnn_run_operator(s.op, pool) != xnn_status_success) {
    std::fprintf(stderr, "smax_bench: xnn_run_operator failed\n");
    std::abort();
  }
}

SMAX_BENCH_REGISTER(peer_xnnpack) {
  smax_bench::kernel<float> k;
  k.name = "xnnpack/softmax";
  k.label = "peer";
  k.traffic = {3, 2};
  k.run = [](const float* x, float* y, std::size_t n) { xnn_run(x, y, 1, n); };
  // Peers sum in float: at 64M their result drifts by up to ~1e-2, hence the
  // 3e-2 tolerance of the check below.
  k.check = smax_bench::compare_check<float>(
      [](const float* x, float* y, std::size_t n) { smax::dynamic::softmax(x, y, n); }, 3e-2, 1e-30);
  smax_bench::register_once(k, "native", smax_bench::sizes<float>());
  // The same on wide logits (bench_subnormal.cpp): 64K, 64M and the rows.
  smax_bench::kernel<float> w = k;
  w.name = "xnnpack/softmax_wide";
  w.run = [](const float* x, float* y, std::size_t n) { xnn_run(smax_bench::wide_input(x), y, 1, n); };
  w.check = nullptr;
  smax_bench::register_once(w, "native", {65536, std::size_t(1) << 26});
  w.name = "xnnpack/softmax_batched_wide";
  w.traffic = {1, 1};
  w.roof = smax_bench::roof_kind::copy;
  w.run_threaded = [](const float* x, float* y, std::size_t rows, std::size_t cols, std::size_t t) {
    xnn_run(smax_bench::wide_input(x), y, rows, cols, t);
  };
  smax_bench::register_threaded(w, "native", false, {{smax_bench::batch_rows, smax_bench::batch_cols}}, {1});
  // Batched, 1 and 2 threads: "xnnpack/softmax_batched/f32/native/<rows>/
  // <cols>/threads:<t>/real_time", every row checked against smax.
  smax_bench::kernel<float> b = k;
  b.name = "xnnpack/softmax_batched";
  b.run_threaded = [](const float* x, float* y, std::size_t rows, std::size_t cols, std::size_t t) {
    xnn_run(x, y, rows, cols, t);
  };
  for (const smax_bench::shape& sh : smax_bench::threaded_shapes()) {
    // Rows that fit in L2 leave one read and one write to DRAM (vs copy); the
    // long row is read three times and written twice (vs rw2, as smax's).
    b.traffic = sh.rows == 1 ? smax_bench::mem_traffic{3, 2} : smax_bench::mem_traffic{1, 1};
    b.roof = sh.rows == 1 ? smax_bench::roof_kind::rw2 : smax_bench::roof_kind::copy;
    smax_bench::register_threaded(b, "native", false, {sh}, {1, 2});
  }
}

}  // namespace
