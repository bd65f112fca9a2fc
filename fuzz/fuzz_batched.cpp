// libFuzzer target: the batched (matrix) overloads with arbitrary shapes and
// strides, in place or not, on 1, 2 or 3 threads: every row must equal the
// single-vector call bit for bit, and nothing outside the rows may change.
#include <memory>

#include <smax/parallel.hpp>

#include "common.hpp"

namespace {

smax::executor* pick_executor(std::uint8_t b) {
  static smax::thread_pool two(2), three(3);
  switch (b % 3) {
    case 0: return nullptr;
    case 1: return &two;
    default: return &three;
  }
}

template <class T>
void run(smax_fuzz::stream& in) {
  const bool in_place = in.byte() & 1;
  const bool log = in.byte() & 1;
  const auto a = static_cast<smax::algorithm>(in.byte() % 5);
  smax::executor* ex = pick_executor(in.byte());
  const std::size_t rows = in.byte() % 20;
  const std::size_t cols = in.size(300);
  const std::size_t ldx = cols + in.byte() % 5, ldy = in_place ? ldx : cols + in.byte() % 5;
  const std::size_t total = rows * std::max(ldx, ldy);
  const std::vector<T> x = in.values<T>(total);

  smax_fuzz::guarded<T> xb(total, in.byte()), yb(total, in.byte());
  xb.assign(x);
  std::vector<T> yinit(total, T(-3));
  yb.assign(yinit);
  T* out = in_place ? xb.data() : yb.data();
  smax::matrix_view<const T> mx(xb.data(), rows, cols, ldx);
  smax::matrix_view<T> my(out, rows, cols, ldy);
  if (log)
    smax::dynamic::log_softmax(mx, my, ex);
  else
    smax::dynamic::softmax(mx, my, a, ex);
  xb.check_guards("batched");
  yb.check_guards("batched");

  const std::vector<T> got = in_place ? xb.vec() : yb.vec();
  std::vector<T> row(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    const T* xr = x.data() + r * ldx;
    if (log)
      smax::dynamic::log_softmax(xr, row.data(), cols);
    else
      smax::dynamic::softmax(xr, row.data(), cols, a);
    if (cols && std::memcmp(row.data(), got.data() + r * ldy, cols * sizeof(T)) != 0) {
      // NaN payloads may differ; compare NaN-ness there.
      for (std::size_t c = 0; c < cols; ++c) {
        const T g = got[r * ldy + c];
        if (!(g == row[c] || (g != g && row[c] != row[c]))) smax_fuzz::fail("batched row differs from the vector call");
      }
    }
    // Padding between rows (out of place) keeps its value.
    if (!in_place)
      for (std::size_t c = cols; c < ldy && r * ldy + c < total; ++c)
        if (got[r * ldy + c] != T(-3)) smax_fuzz::fail("batched wrote into a row's padding");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  smax_fuzz::stream in(data, size);
  in.pick_isa();
  if (in.byte() & 1)
    run<double>(in);
  else
    run<float>(in);
  return 0;
}
