// softmax and log_softmax of bf16 and fp16 logits, beside the f32 kernels of
// bench_softmax.cpp: "softmax16/<algo>/<bf16|fp16>/<isa>/<n>" with n 16-bit
// elements. A 16-bit array of n elements lies in the float slots of n/2
// elements (the same bytes, rotated the same way), so vs_roofline is against
// the 16-bit roofline: rw2 over 2n bytes (two reads and one write of 16-bit
// data). items_per_second counts 16-bit elements.
#include <cmath>

#include <smax/dynamic.hpp>

#include "common.hpp"

namespace {

using smax::algorithm;
using smax::bf16;
using smax::fp16;

template <class H>
void register_half(const char* name, smax_bench::mem_traffic traffic,
                   std::function<void(const H*, H*, std::size_t)> run, bool sums_to_one) {
  smax_bench::kernel<float> k;
  k.name = name;
  k.traffic = traffic;
  k.run = [run](const float* x, float* y, std::size_t m) { run(smax_bench::half_input<H>(x), reinterpret_cast<H*>(y), 2 * m); };
  // (outputs that need not sum to one: finite only)
  k.check = [sums_to_one](const float* x, const float* y, std::size_t m) {
    return smax_bench::half_sum_check<H>(x, y, m, sums_to_one);
  };
  for (const std::string& isa : smax_bench::compiled_isas()) smax_bench::register_half_sizes<H>(k, isa, true);
}

template <class H>
void register_type() {
  register_half<H>("softmax16/automatic", {2, 1},
                   [](const H* x, H* y, std::size_t n) { smax::dynamic::softmax(x, y, n); }, true);
  register_half<H>("softmax16/three_pass_recompute", {3, 1},
                   [](const H* x, H* y, std::size_t n) {
                     smax::dynamic::softmax(x, y, n, algorithm::three_pass_recompute);
                   },
                   true);
  register_half<H>("log_softmax16", {3, 1}, [](const H* x, H* y, std::size_t n) { smax::dynamic::log_softmax(x, y, n); },
                   false);
}

// Batched rows of 32768 16-bit logits (2048 of them: 128 MiB), 1 and 2
// threads, against the copy roofline of the same bytes (a row stays in L2
// between its passes).
template <class H>
void register_rows() {
  for (const std::string& isa : smax_bench::compiled_isas()) {
    smax_bench::kernel<float> k;
    k.name = "softmax16_batched/automatic";
    k.traffic = {1, 1};
    k.roof = smax_bench::roof_kind::copy;
    k.run_threaded = [](const float* x, float* y, std::size_t rows, std::size_t cols, std::size_t t) {
      smax::dynamic::softmax(smax::matrix_view<const H>(smax_bench::half_input<H>(x), rows, 2 * cols),
                             smax::matrix_view<H>(reinterpret_cast<H*>(y), rows, 2 * cols), algorithm::automatic,
                             smax_bench::pool(t));
    };
    k.check = [](const float* x, const float* y, std::size_t m) { return smax_bench::half_sum_check<H>(x, y, m); };
    smax_bench::register_half_threaded<H>(k, isa, {2048, 32768}, {1, 2});
  }
}

// The rest of the family on 16-bit: "<fn>16/<bf16|fp16>/<isa>/<n>" beside
// the float "<fn>/f32/<isa>/<n>" entries of the same traffic.
// sigmoid_attention through half_family.hpp's adapter (widen, float kernel,
// narrow, in blocks); stablemax, log_stablemax, ssmax and softpick read x as
// 16-bit (since 2026-12-06), the sparse family and the hard gumbel_softmax
// too (since 2026-12-06, third session: before, their rows beyond 2^18
// elements allocated their float copies per call), sa_softmax and multimax
// out of cache (since 2026-12-06, fourth session); the backward passes' outputs from 16 MiB are streamed
// (since 2026-12-06, second session).
template <class H>
void register_family() {
  register_half<H>("sparsemax16", {3, 1}, [](const H* x, H* y, std::size_t n) { smax::dynamic::sparsemax(x, y, n); },
                   true);
  register_half<H>("entmax_bisect16/1.25", {3, 1},
                   [](const H* x, H* y, std::size_t n) { smax::dynamic::entmax_bisect(x, y, n, 1.25f); }, true);
  register_half<H>("gumbel_softmax_hard16", {1, 1},
                   [](const H* x, H* y, std::size_t n) { smax::dynamic::gumbel_softmax(x, y, n, 1.0f, 42, true); },
                   true);
  register_half<H>("stablemax16", {2, 1}, [](const H* x, H* y, std::size_t n) { smax::dynamic::stablemax(x, y, n); },
                   true);
  register_half<H>("log_stablemax16", {2, 1},
                   [](const H* x, H* y, std::size_t n) { smax::dynamic::log_stablemax(x, y, n); }, false);
  register_half<H>("ssmax16", {2, 1}, [](const H* x, H* y, std::size_t n) { smax::dynamic::ssmax(x, y, n, 0.43f); },
                   true);
  register_half<H>("softpick16", {2, 1}, [](const H* x, H* y, std::size_t n) { smax::dynamic::softpick(x, y, n); },
                   false);
  // (as the f32 seeds/ entries: bench_seeds.cpp)
  register_half<H>("seeds/sa_softmax16", {2, 1},
                   [](const H* x, H* y, std::size_t n) { smax::dynamic::sa_softmax(x, y, n); }, false);
  register_half<H>("seeds/sa_softmax_normalized16", {2, 1},
                   [](const H* x, H* y, std::size_t n) { smax::dynamic::sa_softmax(x, y, n, true); }, false);
  register_half<H>("seeds/multimax16", {2, 1},
                   [](const H* x, H* y, std::size_t n) {
                     smax::dynamic::multimax(x, y, n, smax_bench::multimax_params_with_every_term());
                   },
                   true);
  register_half<H>("sigmoid_attention16", {1, 1},
                   [](const H* x, H* y, std::size_t n) {
                     smax::dynamic::sigmoid_attention(x, y, n, -std::log(static_cast<float>(n)));
                   },
                   false);
  // The backward passes as their f32 entries (bench_variants.cpp) run them:
  // y = dy = x, one array read twice (the sum or dot, then dx).
  register_half<H>("softmax_backward16", {2, 1},
                   [](const H* x, H* y, std::size_t n) { smax::dynamic::softmax_backward(x, x, y, n); }, false);
  register_half<H>("log_softmax_backward16", {2, 1},
                   [](const H* x, H* y, std::size_t n) { smax::dynamic::log_softmax_backward(x, x, y, n); }, false);
  register_half<H>("stablemax_backward16", {2, 1},
                   [](const H* x, H* y, std::size_t n) { smax::dynamic::stablemax_backward(x, x, y, n); }, false);
  // (y = x: the support is x's positive entries)
  register_half<H>("sparsemax_backward16", {2, 1},
                   [](const H* x, H* y, std::size_t n) { smax::dynamic::sparsemax_backward(x, x, y, n); }, false);
}

SMAX_BENCH_REGISTER(half) {
  register_type<bf16>();
  register_type<fp16>();
  register_family<bf16>();
  register_rows<bf16>();
  register_rows<fp16>();
}

}  // namespace
