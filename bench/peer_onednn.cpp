// Peer: oneDNN's softmax primitive (softmax_v2_forward, softmax_accurate,
// forward_inference), single-threaded. Built when find_package(dnnl) works.
// oneDNN 2.6 JIT-compiles an AVX-512 kernel here (three-pass reload: 3R + 2W).
// One primitive per shape; memory objects re-pointed only when the buffers
// change. The Debian build threads with OpenMP: run with OMP_NUM_THREADS=1
// (tools/run_bench.sh does); omp_set_num_threads(1) is also called, found at
// run time so that no OpenMP flags are needed here.
#include <dlfcn.h>

#include <dnnl.hpp>
#include <map>
#include <memory>

#include <smax/dynamic.hpp>

#include "common.hpp"

namespace {

void single_thread() {
  static const bool done = [] {
    using set_fn = void (*)(int);
    if (void* f = dlsym(RTLD_DEFAULT, "omp_set_num_threads")) reinterpret_cast<set_fn>(f)(1);
    return true;
  }();
  (void)done;
}

struct dnnl_softmax {
  dnnl::memory src, dst;
  dnnl::primitive prim;
};

void dnnl_run(const float* x, float* y, std::size_t rows, std::size_t cols) {
  single_thread();
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  static dnnl::stream strm(eng);
  static std::map<std::pair<std::size_t, std::size_t>, std::unique_ptr<dnnl_softmax>> prims;
  auto& slot = prims[{rows, cols}];
  if (!slot) {
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc md({static_cast<dnnl::memory::dim>(rows), static_cast<dnnl::memory::dim>(cols)}, dt::f32,
                                dnnl::memory::format_tag::ab);
    const dnnl::softmax_v2_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, md,
                                           md, 1);
    const dnnl::softmax_v2_forward::primitive_desc pd(d, eng);
    slot.reset(new dnnl_softmax{dnnl::memory(md, eng, const_cast<float*>(x)), dnnl::memory(md, eng, y),
                                dnnl::softmax_v2_forward(pd)});
  }
  dnnl_softmax& s = *slot;
  if (s.src.get_data_handle() != x) s.src.set_data_handle(const_cast<float*>(x));
  if (s.dst.get_data_handle() != y) s.dst.set_data_handle(y);
  s.prim.execute(strm, {{DNNL_ARG_SRC, s.src}, {DNNL_ARG_DST, s.dst}});
  strm.wait();
}

SMAX_BENCH_REGISTER(peer_onednn) {
  smax_bench::kernel<float> k;
  k.name = "onednn/softmax";
  k.label = "peer";
  k.traffic = {3, 2};
  k.run = [](const float* x, float* y, std::size_t n) { dnnl_run(x, y, 1, n); };
  k.run_batch = [](const float* x, float* y, std::size_t rows, std::size_t cols) { dnnl_run(x, y, rows, cols); };
  k.check = smax_bench::compare_check<float>(
      [](const float* x, float* y, std::size_t n) { smax::dynamic::softmax(x, y, n); }, 3e-2, 1e-30);
  smax_bench::register_once(k, "native", smax_bench::sizes<float>());
  smax_bench::kernel<float> b = k;
  b.name = "onednn/softmax_batched";
  b.traffic = {1, 1};
  b.roof = smax_bench::roof_kind::copy;
  smax_bench::register_batched(b, "native", false);
}

}  // namespace
