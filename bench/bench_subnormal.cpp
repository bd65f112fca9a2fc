// Logits that reach the subnormal band: e^(x - max) below FLT_MIN for the
// entries 87-103 below the max (normal(0, 20) logits, wide attention
// scores, a low temperature). Intel cores take a microcode assist for every
// multiply that forms or reads a subnormal unless FTZ/DAZ is set, which a
// library cannot assume; smax forms none (include/smax/detail/exp.hpp). Each kernel
// runs on these logits twice, in the default FP environment ("ieee") and
// with FTZ/DAZ set ("ftz"), registered side by side: their times should
// match. "subnormal/<kernel>/<ieee|ftz>/f32/<isa>/<n>"; the peers in their
// own files ("<peer>/softmax_wide/...") take the same input. The 16-bit
// forms take those logits rounded to bf16 / fp16 (float terms below FLT_MIN
// all the same): "subnormal/<kernel>16/<ieee|ftz>/<bf16|fp16>/<isa>/<n>",
// n 16-bit elements, on the widest ISA.
#include <smax/dynamic.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"

#if defined(__SSE2__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

namespace {

using smax::algorithm;

// Sets FTZ/DAZ for the scope (x86; elsewhere nothing to set).
class fp_env {
 public:
  explicit fp_env(bool ftz) {
#if defined(__SSE2__)
    saved_ = _mm_getcsr();
    if (ftz) _mm_setcsr(saved_ | 0x8040);  // FTZ (bit 15) | DAZ (bit 6)
#else
    (void)ftz;
#endif
  }
  ~fp_env() {
#if defined(__SSE2__)
    _mm_setcsr(saved_);
#endif
  }
  fp_env(const fp_env&) = delete;
  fp_env& operator=(const fp_env&) = delete;

 private:
  unsigned saved_ = 0;
};

template <class T>
using run_fn = std::function<void(const T* x, T* y, std::size_t n)>;

struct entry {
  const char* name;
  smax_bench::mem_traffic traffic;
  run_fn<float> run;
};

// y as the forward output for the backward pass, dy = the logits: the
// softmax of every slot of the wide arena for this n, computed once (not in
// the timed loop), at the slot's place.
const float* wide_softmax(const float* x, std::size_t n) {
  static std::map<std::size_t, std::unique_ptr<float[]>> ys;
  const float* base = smax_bench::wide_input(smax_bench::arena<float>::get().x());
  auto& y = ys[n];
  if (!y) {
    constexpr std::size_t elems = smax_bench::arena<float>::elems;
    y.reset(new float[elems]);
    const std::size_t stride = (n + 63) / 64 * 64;
    for (std::size_t o = 0; o + n <= elems; o += stride) smax::dynamic::softmax(base + o, y.get() + o, n);
  }
  return y.get() + (x - base);
}

template <class H>
void register_half_pairs() {
  struct half_entry {
    const char* name;
    smax_bench::mem_traffic traffic;  // (as bench_half.cpp's)
    std::function<void(const H*, H*, std::size_t)> run;
  };
  const std::vector<half_entry> entries = {
      {"softmax16", {2, 1}, [](const H* x, H* y, std::size_t n) { smax::dynamic::softmax(x, y, n); }},
      {"log_softmax16", {3, 1}, [](const H* x, H* y, std::size_t n) { smax::dynamic::log_softmax(x, y, n); }},
  };
  if (smax_bench::compiled_isas().empty()) return;
  for (const auto& e : entries) {
    for (int ftz = 0; ftz < 2; ++ftz) {
      smax_bench::kernel<float> k;
      k.name = std::string("subnormal/") + e.name + (ftz ? "/ftz" : "/ieee");
      k.traffic = e.traffic;
      const auto run = e.run;
      k.run = [run, ftz](const float* x, float* y, std::size_t m) {
        fp_env env(ftz != 0);
        run(smax_bench::half_input<H, true>(x), reinterpret_cast<H*>(y), 2 * m);
      };
      smax_bench::register_half_sizes<H>(k, smax_bench::compiled_isas().front(), true,
                                         {std::size_t(65536), std::size_t(64) << 20});
    }
  }
}

SMAX_BENCH_REGISTER(subnormal) {
  const std::vector<entry> entries = {
      {"softmax/automatic", {2, 1}, [](const float* x, float* y, std::size_t n) { smax::dynamic::softmax(x, y, n); }},
      {"softmax/three_pass_reload", {3, 2},
       [](const float* x, float* y, std::size_t n) { smax::dynamic::softmax(x, y, n, algorithm::three_pass_reload); }},
      {"softmax/two_pass", {2, 1},
       [](const float* x, float* y, std::size_t n) { smax::dynamic::softmax(x, y, n, algorithm::two_pass); }},
      {"softmax/online", {2, 1},
       [](const float* x, float* y, std::size_t n) { smax::dynamic::softmax(x, y, n, algorithm::online); }},
      // (3 reads on SSE2, and on AVX2 below 1 MiB)
      {"log_softmax", {2, 1}, [](const float* x, float* y, std::size_t n) { smax::dynamic::log_softmax(x, y, n); }},
      {"softmax_backward", {4, 1},
       [](const float* x, float* y, std::size_t n) { smax::dynamic::softmax_backward(wide_softmax(x, n), x, y, n); }},
      {"ssmax", {2, 1}, [](const float* x, float* y, std::size_t n) { smax::dynamic::ssmax(x, y, n, 0.3f); }},
      {"softpick", {2, 1}, [](const float* x, float* y, std::size_t n) { smax::dynamic::softpick(x, y, n); }},
      {"gumbel_softmax", {2, 1},
       [](const float* x, float* y, std::size_t n) { smax::dynamic::gumbel_softmax(x, y, n, 1.0f, 7); }},
  };
  const std::vector<std::size_t> ns = {65536, std::size_t(1) << 26};
  for (const entry& e : entries) {
    for (int ftz = 0; ftz < 2; ++ftz) {
      smax_bench::kernel<float> k;
      k.name = std::string("subnormal/") + e.name + (ftz ? "/ftz" : "/ieee");
      k.traffic = e.traffic;
      const run_fn<float> run = e.run;
      k.run = [run, ftz](const float* x, float* y, std::size_t n) {
        fp_env env(ftz != 0);
        run(smax_bench::wide_input(x), y, n);
      };
      smax_bench::register_per_isa(k, ns);
    }
  }
  register_half_pairs<smax::bf16>();
  register_half_pairs<smax::fp16>();
  // Batched rows (2048 x 32768, one thread), the shape of the rows.
  for (const std::string& isa : smax_bench::compiled_isas()) {
    for (int ftz = 0; ftz < 2; ++ftz) {
      smax_bench::kernel<float> k;
      k.name = std::string("subnormal/softmax_batched") + (ftz ? "/ftz" : "/ieee");
      k.traffic = {1, 1};
      k.roof = smax_bench::roof_kind::copy;
      k.run_threaded = [ftz](const float* x, float* y, std::size_t rows, std::size_t cols, std::size_t t) {
        fp_env env(ftz != 0);
        smax::dynamic::softmax(smax::matrix_view<const float>(smax_bench::wide_input(x), rows, cols),
                               smax::matrix_view<float>(y, rows, cols), algorithm::automatic, smax_bench::pool(t));
      };
      smax_bench::register_threaded(k, isa, true, {{smax_bench::batch_rows, smax_bench::batch_cols}}, {1});
    }
  }
}

}  // namespace
