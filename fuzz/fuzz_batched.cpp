// libFuzzer target: the batched (matrix) overloads with arbitrary shapes and
// strides, in place or not, on 1, 2 or 3 threads: every row must equal the
// single-vector call bit for bit, and nothing outside the rows may change.
// softmax / log_softmax (every algorithm), and (bit 1 of the type byte) the
// rest of the family, forward and backward, with parameters that include
// invalid ones: those must throw std::invalid_argument before any row is
// written, exactly when the single-vector function throws.
#include <limits>
#include <memory>

#include <smax/parallel.hpp>

#include "common.hpp"

namespace {

using smax_fuzz::pick_executor;
using smax_fuzz::same_or_both_nan;

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
    for (std::size_t c = 0; c < cols; ++c)
      if (!same_or_both_nan(got[r * ldy + c], row[c])) smax_fuzz::fail("batched row differs from the vector call");
    // Padding between rows (out of place) keeps its value.
    if (!in_place)
      for (std::size_t c = cols; c < ldy && r * ldy + c < total; ++c)
        if (got[r * ldy + c] != T(-3)) smax_fuzz::fail("batched wrote into a row's padding");
  }
}

using smax_fuzz::param;

// One matrix operand: rows x cols at its own stride in a guarded buffer.
template <class T>
struct operand {
  std::size_t stride, total;
  std::vector<T> init;
  smax_fuzz::guarded<T> buf;
  operand(smax_fuzz::stream& in, std::size_t rows, std::size_t cols, bool values)
      : stride(cols + in.byte() % 5),
        total(rows * stride),
        init(values ? in.values<T>(total) : std::vector<T>(total, T(-3))),
        buf(total, in.byte()) {
    buf.assign(init);
  }
  smax::matrix_view<const T> in_view(std::size_t rows, std::size_t cols) {
    return smax::matrix_view<const T>(buf.data(), rows, cols, stride);
  }
  smax::matrix_view<T> out_view(std::size_t rows, std::size_t cols) {
    return smax::matrix_view<T>(buf.data(), rows, cols, stride);
  }
  const T* row0(std::size_t r) const { return init.data() + r * stride; }  // the input as it was
};

// The rest of the family over rows: the function `fn` reads `inputs`
// operands (1 to 3, the last of which the output may alias); its batched
// call on views is checked against its single-vector call (`vec`) per row.
template <class T>
void family(smax_fuzz::stream& in) {
  using smax::matrix_view;
  namespace d = smax::dynamic;
  // Every batched function of the registry but softmax and log_softmax (run
  // above) and topk_softmax and sample (fuzz_topk): tests/test_registry.cpp
  // checks this list against dispatch.hpp's.
  static const char* const names[] = {"sparsemax",          "entmax15",
                                      "entmax_bisect",      "stablemax",
                                      "log_stablemax",      "softpick",
                                      "ssmax",              "gumbel_softmax",
                                      "sigmoid_attention",  "sa_softmax",
                                      "multimax",           "asentmax",
                                      "softmax_backward",   "log_softmax_backward",
                                      "sparsemax_backward", "entmax_backward",
                                      "stablemax_backward", "softpick_backward",
                                      "sigmoid_attention_backward", "sa_softmax_backward",
                                      "multimax_backward",  "asentmax_backward"};
  constexpr int n_names = static_cast<int>(sizeof(names) / sizeof(names[0]));
  const int fn = in.byte() % n_names;
  // Forward functions read x; the first backward ones (y, dy), the seeds'
  // and softpick's (x, y, dy).
  const int inputs = fn < 12 ? 1 : fn < 17 ? 2 : 3;
  const bool in_place = in.byte() & 1;  // the output aliases the last input
  smax::executor* ex = pick_executor(in.byte());
  const std::size_t rows = in.byte() % 12;
  const std::size_t cols = in.size(200);
  const T alpha = param<T>(in, {T(1.5), T(1), T(1.25), T(2), T(3), T(0.5)});
  const int n_iter = std::initializer_list<int>{50, 0, 5, -1}.begin()[in.byte() % 4];
  const T eps = param<T>(in, {T(1e-8), T(0), T(1), T(1e-3)});
  const T s = param<T>(in, {T(0.43), T(1), T(-0.3), T(0), T(1e30)});
  const T b = param<T>(in, {T(0), T(0.5), T(-2)});
  const T tau = param<T>(in, {T(1), T(0.5), T(1e-20), T(10)});
  const std::uint64_t seed = in.u64();
  const bool hard = in.byte() & 1;
  const bool normalized = in.byte() & 1;
  smax::multimax_params mp;  // a NaN parameter throws
  for (int k = 0; k < 4; ++k) {
    mp.ranges[k] = static_cast<std::int8_t>(in.byte()) / 32.0;
    mp.ts[k] = static_cast<std::int8_t>(in.byte()) / 256.0;
  }
  if (in.byte() % 16 == 0) mp.ts[in.byte() % 4] = std::numeric_limits<double>::quiet_NaN();
  smax_fuzz::context() = std::string(names[fn]) + " rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
                         (in_place ? " in place" : "") + "\n";

  operand<T> a(in, rows, cols, true);
  operand<T> bo(in, rows, cols, inputs >= 2);
  operand<T> co(in, rows, cols, inputs >= 3);
  operand<T>* last = inputs == 1 ? &a : inputs == 2 ? &bo : &co;
  operand<T> outb(in, rows, cols, false);
  operand<T>& out = in_place ? *last : outb;

  // The single-vector function on row pointers (n = 0 with null pointers
  // checks the parameters alone).
  const auto vec = [&](const T* x0, const T* x1, const T* x2, T* y, std::size_t n, std::size_t r) {
    switch (fn) {
      case 0: return d::sparsemax(x0, y, n);
      case 1: return d::entmax15(x0, y, n);
      case 2: return d::entmax_bisect(x0, y, n, alpha, n_iter);
      case 3: return d::stablemax(x0, y, n);
      case 4: return d::log_stablemax(x0, y, n);
      case 5: return d::softpick(x0, y, n, eps);
      case 6: return d::ssmax(x0, y, n, s, b);
      case 7: return d::gumbel_softmax(x0, y, n, tau, smax::gumbel_row_seed(seed, r), hard);
      case 8: return d::sigmoid_attention(x0, y, n, b);
      case 9: return d::sa_softmax(x0, y, n, normalized);
      case 10: return d::multimax(x0, y, n, mp);
      case 11: return d::asentmax(x0, y, n, alpha, s, b);
      case 12: return d::softmax_backward(x0, x1, y, n);
      case 13: return d::log_softmax_backward(x0, x1, y, n);
      case 14: return d::sparsemax_backward(x0, x1, y, n);
      case 15: return d::entmax_backward(x0, x1, y, n, alpha);
      case 16: return d::stablemax_backward(x0, x1, y, n);
      case 17: return d::softpick_backward(x0, x1, x2, y, n, eps);
      case 18: return d::sigmoid_attention_backward(x0, x1, x2, y, n, b);
      case 19: return d::sa_softmax_backward(x0, x1, x2, y, n, normalized);
      case 20: return d::multimax_backward(x0, x1, x2, y, n, mp);
      default: return d::asentmax_backward(x0, x1, x2, y, n, alpha, s, b);
    }
  };
  const bool bad = smax_fuzz::throws_invalid([&] { vec(nullptr, nullptr, nullptr, nullptr, 0, 0); });
  const auto A = a.in_view(rows, cols), B = bo.in_view(rows, cols), C = co.in_view(rows, cols);
  const matrix_view<T> Y = out.out_view(rows, cols);
  const bool threw = smax_fuzz::throws_invalid([&] {
    switch (fn) {
      case 0: return d::sparsemax(A, Y, ex);
      case 1: return d::entmax15(A, Y, ex);
      case 2: return d::entmax_bisect(A, Y, alpha, n_iter, ex);
      case 3: return d::stablemax(A, Y, ex);
      case 4: return d::log_stablemax(A, Y, ex);
      case 5: return d::softpick(A, Y, eps, ex);
      case 6: return d::ssmax(A, Y, s, b, ex);
      case 7: return d::gumbel_softmax(A, Y, tau, seed, hard, ex);
      case 8: return d::sigmoid_attention(A, Y, b, ex);
      case 9: return d::sa_softmax(A, Y, normalized, ex);
      case 10: return d::multimax(A, Y, mp, ex);
      case 11: return d::asentmax(A, Y, alpha, s, b, ex);
      case 12: return d::softmax_backward(A, B, Y, ex);
      case 13: return d::log_softmax_backward(A, B, Y, ex);
      case 14: return d::sparsemax_backward(A, B, Y, ex);
      case 15: return d::entmax_backward(A, B, Y, alpha, ex);
      case 16: return d::stablemax_backward(A, B, Y, ex);
      case 17: return d::softpick_backward(A, B, C, Y, eps, ex);
      case 18: return d::sigmoid_attention_backward(A, B, C, Y, b, ex);
      case 19: return d::sa_softmax_backward(A, B, C, Y, normalized, ex);
      case 20: return d::multimax_backward(A, B, C, Y, mp, ex);
      default: return d::asentmax_backward(A, B, C, Y, alpha, s, b, ex);
    }
  });
  if (threw != bad) smax_fuzz::fail(bad ? "batched: a bad parameter was accepted" : "batched: good parameters refused");
  for (operand<T>* o : {&a, &bo, &co, &outb}) o->buf.check_guards("batched family");
  const std::vector<T> got = out.buf.vec();
  if (threw) {  // nothing written
    if (!smax_fuzz::same_bytes(got.data(), out.init.data(), got.size() * sizeof(T)))
      smax_fuzz::fail("batched: a refused call wrote its output");
    return;
  }
  // Inputs other than the aliased one are unchanged.
  for (operand<T>* o : {&a, &bo, &co})
    if (o != &out && !smax_fuzz::same_bytes(o->buf.vec().data(), o->init.data(), o->total * sizeof(T)))
      smax_fuzz::fail("batched: an input changed");
  std::vector<T> row(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    vec(a.row0(r), bo.row0(r), co.row0(r), row.data(), cols, r);
    for (std::size_t c = 0; c < cols; ++c)
      if (!same_or_both_nan(got[r * out.stride + c], row[c])) smax_fuzz::fail("batched row differs from the vector call");
    for (std::size_t c = cols; c < out.stride && r * out.stride + c < out.total; ++c)
      if (!smax_fuzz::same_bytes(&got[r * out.stride + c], &out.init[r * out.stride + c], sizeof(T)))
        smax_fuzz::fail("batched wrote into a row's padding");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  smax_fuzz::stream in(data, size);
  in.pick_isa();
  const std::uint8_t type = in.byte();
  if (type & 2) {
    if (type & 1)
      family<double>(in);
    else
      family<float>(in);
  } else if (type & 1) {
    run<double>(in);
  } else {
    run<float>(in);
  }
  return 0;
}
