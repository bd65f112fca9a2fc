// smax_pass_profile: where the time of an out-of-cache softmax goes, pass by
// pass, beside the memory-only kernels each pass is bounded by. Included by
// one TU per ISA (pass_profile_<isa>.cpp, compiled with that ISA's flags);
// main() is in pass_profile.cpp. See docs/performance.md, "Where the time goes".
//
// Every entry is timed as one call over n floats (rotating between two
// buffer pairs, so that the input is never in cache), all entries
// interleaved round-robin, `reps` rounds; the median per entry is reported
// in ns per element.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <immintrin.h>

#include <smax/detail/batched.hpp>
#include <smax/detail/gumbel.hpp>
#include <smax/detail/softmax.hpp>

namespace smax_pass_profile {

struct entry {
  std::string name;
  std::string what;
  std::function<void(const float*, float*, std::size_t)> run;
  double median = 0;
};

// Rows of the batched case: 2048 x 32768 floats per call when n = 64M.
constexpr std::size_t row_cols = 32768;
// The compute-only entries repeat one block that stays in L2.
constexpr std::size_t l2_block = 16384;  // 64 KiB of float

template <class A>
std::vector<entry> entries() {
  using namespace smax::detail;
  using B = xsimd::batch<float, A>;
  constexpr std::size_t W = B::size;
  std::vector<entry> e;
  // The memory-only kernels: the same loop shape as the passes, no math.
  e.push_back({"read", "one read pass (max)", [](const float* x, float*, std::size_t n) {
                 volatile float s = reduce_max<A>(x, n);
                 (void)s;
               }});
  e.push_back({"stream", "one write pass, streaming stores, no read", [](const float*, float* y, std::size_t n) {
                 const B v(1.0f);
                 for (std::size_t i = 0; i + W <= n; i += W) store_stream<A>(y + i, v);
                 stream_fence<A>();
               }});
  e.push_back({"copy", "read + streaming write in one pass", [](const float* x, float* y, std::size_t n) {
                 for (std::size_t i = 0; i + W <= n; i += W) store_stream<A>(y + i, B::load_aligned(x + i));
                 stream_fence<A>();
               }});
  e.push_back({"rw2", "read, then copy: the roofline of a two-pass softmax", [](const float* x, float* y, std::size_t n) {
                 const B m(reduce_max<A>(x, n) * 0.0f + 1.0f);
                 for (std::size_t i = 0; i + W <= n; i += W) store_stream<A>(y + i, B::load_aligned(x + i) * m);
                 stream_fence<A>();
               }});
  // The arithmetic alone: one L2-resident block, again and again.
  e.push_back({"sum_L2", "two-pass pass 1 on a 64 KiB block in L2 (its arithmetic)", [](const float* x, float*, std::size_t n) {
                 for (std::size_t o = 0; o + l2_block <= n; o += l2_block) {
                   double s;
                   float E;
                   volatile bool ok = two_pass_sum<A>(x, l2_block, s, E);
                   (void)ok;
                 }
               }});
  e.push_back({"write_L2", "two-pass pass 2 from and to L2 (its arithmetic)", [](const float* x, float* y, std::size_t n) {
                 const exp_ref<A, float> f(-single_pass_limits<float>::limit, 4.0f, 1e-3f);
                 for (std::size_t o = 0; o + l2_block <= n; o += l2_block) map<A>(x, y, l2_block, f);
               }});
  // The passes of softmax_two_pass, out of cache.
  e.push_back({"sum", "two-pass pass 1 (two_pass_sum)", [](const float* x, float*, std::size_t n) {
                 double s;
                 float E;
                 volatile bool ok = two_pass_sum<A>(x, n, s, E);
                 (void)ok;
               }});
  e.push_back({"write", is_avx512_v<A> ? "two-pass pass 2 as shipped (staged in 1 KiB chunks, streamed)"
                                         : "two-pass pass 2 as shipped (each vector streamed as computed)",
               [](const float* x, float* y, std::size_t n) {
                 map<A, staged>(x, y, n, exp_ref<A, float>(-single_pass_limits<float>::limit, 4.0f, 1e-3f));
               }});
  if (is_avx512_v<A>)
    e.push_back({"write_direct", "two-pass pass 2, each vector streamed as computed (not staged)",
                 [](const float* x, float* y, std::size_t n) {
                   map<A, false>(x, y, n, exp_ref<A, float>(-single_pass_limits<float>::limit, 4.0f, 1e-3f));
                 }});
  e.push_back({"two_pass", "softmax_two_pass (both passes)", [](const float* x, float* y, std::size_t n) {
                 softmax_two_pass<A>(x, y, n);
               }});
  // In place: pass 2's streaming stores then go to lines it has just read.
  e.push_back({"write_in_place", "two-pass pass 2 as shipped, in place (y to y)", [](const float*, float* y, std::size_t n) {
                 map<A, staged>(y, y, n, exp_ref<A, float>(-single_pass_limits<float>::limit, 4.0f, 1e-3f));
               }});
  e.push_back({"two_pass_in_place", "softmax_two_pass in place (y to y)", [](const float*, float* y, std::size_t n) {
                 softmax_two_pass<A>(y, y, n);
               }});
  e.push_back({"reload", "three-pass reload softmax (max; e^x stored and summed; scaled)",
               [](const float* x, float* y, std::size_t n) { softmax_three_pass<A>(x, y, n, exp_terms::reload); }});
  // gumbel_softmax: pass 1 draws the noise, stores z = x + g to y and sums
  // e^z; pass 2 rewrites y in place.
  e.push_back({"noise_L2", "gumbel_noise on a 64 KiB block in L2 (the noise arithmetic)",
               [](const float*, float* y, std::size_t n) {
                 for (std::size_t o = 0; o + l2_block <= n; o += l2_block) gumbel_noise<A, float>(y, l2_block, 42, o);
               }});
  e.push_back({"gumbel_write", "gumbel_softmax pass 2 as shipped (in place, from z)", [](const float*, float* y, std::size_t n) {
                 scaled_two_pass_write<A>(y, y, n, scaled_extexp<A, float>(1.0f), 1e3, 4.0f);
               }});
  e.push_back({"gumbel", "gumbel_softmax, tau = 1 (both passes)", [](const float* x, float* y, std::size_t n) {
                 gumbel_softmax<A>(x, y, n, 1.0f, 42, false);
               }});
  // Batches of L2-sized rows (issue: batched rows vs the copy roofline).
  e.push_back({"rows_copy", "rows of 128 KiB: read a row (max), then stream it out", [](const float* x, float* y, std::size_t n) {
                 for (std::size_t o = 0; o + row_cols <= n; o += row_cols) {
                   volatile float m = reduce_max<A>(x + o, row_cols);
                   (void)m;
                   for (std::size_t i = 0; i < row_cols; i += W) store_stream<A>(y + o + i, B::load_aligned(x + o + i));
                 }
                 stream_fence<A>();
               }});
  e.push_back({"rows_copy_pf", "as rows_copy, with the next row prefetched while this one is written",
               [](const float* x, float* y, std::size_t n) {
                 for (std::size_t o = 0; o + row_cols <= n; o += row_cols) {
                   volatile float m = reduce_max<A>(x + o, row_cols);
                   (void)m;
                   const bool next = o + 2 * row_cols <= n;
                   for (std::size_t i = 0; i < row_cols; i += W) {
                     if (next && i % (64 / sizeof(float)) == 0)
                       _mm_prefetch(reinterpret_cast<const char*>(x + o + row_cols + i), _MM_HINT_T0);
                     store_stream<A>(y + o + i, B::load_aligned(x + o + i));
                   }
                 }
                 stream_fence<A>();
               }});
  e.push_back({"rows_softmax", "batched softmax, rows of 128 KiB (as shipped)", [](const float* x, float* y, std::size_t n) {
                 softmax_rows<A, float>(smax::matrix_view<const float>(x, n / row_cols, row_cols),
                                        smax::matrix_view<float>(y, n / row_cols, row_cols), smax::algorithm::automatic,
                                        nullptr, result_form::probabilities);
               }});
  return e;
}

// Runs the entries; n is a multiple of row_cols.
template <class A>
std::vector<entry> run(std::size_t n, int reps) {
  std::vector<entry> es = entries<A>();
  float* buf[4];
  for (float*& b : buf) {
    b = static_cast<float*>(std::aligned_alloc(64, n * sizeof(float)));
    if (!b) {
      std::fprintf(stderr, "smax_pass_profile: out of memory for %zu floats\n", n);
      std::exit(1);
    }
  }
  // Logits in [-4, 4) from a fixed LCG.
  std::uint32_t s = 12345;
  for (std::size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    buf[0][i] = buf[2][i] = static_cast<float>(s >> 8) * (8.0f / 16777216.0f) - 4.0f;
  }
  std::memset(buf[1], 0, n * sizeof(float));
  std::memset(buf[3], 0, n * sizeof(float));
  std::vector<std::vector<double>> t(es.size());
  int pair = 0;
  for (int r = 0; r < reps; ++r)
    for (std::size_t k = 0; k < es.size(); ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      es[k].run(buf[2 * pair], buf[2 * pair + 1], n);
      const auto t1 = std::chrono::steady_clock::now();
      pair ^= 1;
      t[k].push_back(std::chrono::duration<double>(t1 - t0).count() * 1e9 / static_cast<double>(n));
    }
  for (std::size_t k = 0; k < es.size(); ++k) {
    std::sort(t[k].begin(), t[k].end());
    es[k].median = t[k][t[k].size() / 2];
  }
  for (float* b : buf) std::free(b);
  return es;
}

}  // namespace smax_pass_profile
