// Peer: oneDNN's softmax primitive (softmax_v2_forward, softmax_accurate,
// forward_inference). Built when find_package(dnnl) works. oneDNN 2.6
// JIT-compiles an AVX-512 kernel here (three-pass reload: 3R + 2W).
// One primitive per (shape, threads); memory objects re-pointed only when the
// buffers change. The Debian build threads with OpenMP: every call sets the
// OpenMP thread count it needs (1 for the single-vector entries and the
// 1-thread batched ones, 2 for the 2-thread ones) with omp_set_num_threads,
// found at run time so that no OpenMP flags are needed here (it works even
// though tools/run_bench.sh exports OMP_NUM_THREADS=1, which only sets the
// initial value). oneDNN splits the batch by rows.
#include <dlfcn.h>

#include <dnnl.hpp>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include <smax/dynamic.hpp>

#include "common.hpp"

namespace {

// OpenMP's thread-count setter and getter from the process (libgomp comes
// with libdnnl); null when oneDNN was not built with OpenMP.
struct omp_api {
  void (*set)(int) = nullptr;
  int (*get)() = nullptr;
  omp_api() {
    set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  }
};

const omp_api& omp() {
  static const omp_api api;
  return api;
}

// Sets OpenMP's thread count for the next parallel regions of this thread,
// only when it changes (the call is cheap, but not free).
void omp_threads(int n) {
  static int current = -1;
  if (n != current && omp().set) {
    omp().set(n);
    current = n;
  }
}

// The thread count oneDNN will use: what OpenMP reports, or -1 if unknown.
int omp_threads_now() { return omp().get ? omp().get() : -1; }

struct dnnl_softmax {
  dnnl::memory src, dst;
  dnnl::primitive prim;
};

void dnnl_run(const void* x, void* y, std::size_t rows, std::size_t cols, int threads = 1,
              dnnl::memory::data_type type = dnnl::memory::data_type::f32) {
  omp_threads(threads);
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  static dnnl::stream strm(eng);
  static std::map<std::tuple<std::size_t, std::size_t, int, int>, std::unique_ptr<dnnl_softmax>> prims;
  auto& slot = prims[{rows, cols, threads, static_cast<int>(type)}];
  if (!slot) {
    const dnnl::memory::desc md({static_cast<dnnl::memory::dim>(rows), static_cast<dnnl::memory::dim>(cols)}, type,
                                dnnl::memory::format_tag::ab);
    const dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, md,
                                           md, 1);
    const dnnl::softmax_v2_forward::primitive_desc pd(d, eng);
    slot.reset(new dnnl_softmax{dnnl::memory(md, eng, const_cast<void*>(x)), dnnl::memory(md, eng, y),
                                dnnl::softmax_v2_forward(pd)});
  }
  dnnl_softmax& s = *slot;
  if (s.src.get_data_handle() != x) s.src.set_data_handle(const_cast<void*>(x));
  if (s.dst.get_data_handle() != y) s.dst.set_data_handle(y);
  s.prim.execute(strm, {{DNNL_ARG_SRC, s.src}, {DNNL_ARG_DST, s.dst}});
  strm.wait();
}

// oneDNN's bf16 and f16 softmax beside smax's (bench_half.cpp): the same
// 16-bit logits, "onednn/softmax16/<bf16|fp16>/native/<n>". A data type this
// build of oneDNN has no CPU kernel for throws, and the entry is skipped.
template <class H>
void register_onednn_half(dnnl::memory::data_type type) {
  smax_bench::register_half_peer<H>("onednn/softmax16",
                                    [type](const H* x, H* y, std::size_t n) { dnnl_run(x, y, 1, n, 1, type); });
}

SMAX_BENCH_REGISTER(peer_onednn) {
  register_onednn_half<smax::bf16>(dnnl::memory::data_type::bf16);
  register_onednn_half<smax::fp16>(dnnl::memory::data_type::f16);
  smax_bench::kernel<float> k;
  k.name = "onednn/softmax";
  k.label = "peer";
  k.traffic = {3, 2};
  k.run = [](const float* x, float* y, std::size_t n) { dnnl_run(x, y, 1, n); };
  const auto vs_smax = smax_bench::compare_check<float>(
      [](const float* x, float* y, std::size_t n) { smax::dynamic::softmax(x, y, n); }, 3e-2, 1e-30);
  k.check = vs_smax;
  smax_bench::register_once(k, "native", smax_bench::sizes<float>());
  // The same on wide logits (bench_subnormal.cpp): 64K, 64M and the rows.
  smax_bench::kernel<float> w = k;
  w.name = "onednn/softmax_wide";
  w.run = [](const float* x, float* y, std::size_t n) { dnnl_run(smax_bench::wide_input(x), y, 1, n); };
  w.check = nullptr;
  smax_bench::register_once(w, "native", {65536, std::size_t(1) << 26});
  w.name = "onednn/softmax_batched_wide";
  w.traffic = {1, 1};
  w.roof = smax_bench::roof_kind::copy;
  w.run_threaded = [](const float* x, float* y, std::size_t rows, std::size_t cols, std::size_t t) {
    dnnl_run(smax_bench::wide_input(x), y, rows, cols, static_cast<int>(t));
  };
  smax_bench::register_threaded(w, "native", false, {{smax_bench::batch_rows, smax_bench::batch_cols}}, {1});
  // Batched, 1 and 2 OpenMP threads: "onednn/softmax_batched/f32/native/
  // <rows>/<cols>/threads:<t>/real_time", every row checked against smax.
  for (const std::size_t t : {1, 2}) {
    smax_bench::kernel<float> b = k;
    b.name = "onednn/softmax_batched";
    b.run_threaded = [](const float* x, float* y, std::size_t rows, std::size_t cols, std::size_t threads) {
      dnnl_run(x, y, rows, cols, static_cast<int>(threads));
    };
    // The check runs right after the first call: OpenMP must then report the
    // thread count asked for, or the "2 threads" entry would not be one.
    b.check = [vs_smax, t](const float* x, const float* y, std::size_t n) -> std::string {
      const int now = omp_threads_now();
      if (now != static_cast<int>(t) && !(now == -1 && t == 1))
        return "OpenMP runs " + std::to_string(now) + " threads, not " + std::to_string(t) +
               " (omp_set_num_threads not found?)";
      return vs_smax(x, y, n);
    };
    for (const smax_bench::shape& sh : smax_bench::threaded_shapes()) {
      // As XNNPACK's: vs copy for rows that fit in L2, vs rw2 for one long row.
      b.traffic = sh.rows == 1 ? smax_bench::mem_traffic{3, 2} : smax_bench::mem_traffic{1, 1};
      b.roof = sh.rows == 1 ? smax_bench::roof_kind::rw2 : smax_bench::roof_kind::copy;
      smax_bench::register_threaded(b, "native", false, {sh}, {t});
    }
  }
}

}  // namespace
