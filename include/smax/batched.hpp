// smax — batched rows and multi-core execution.
//
// A matrix_view is rows x cols elements, row r starting at data + r * stride.
// The batched overloads normalize every row independently (the shapes of
// attention scores and of a batch of logits), on an optional executor.
//
// Determinism: the output is bitwise identical for any executor and any
// thread count. Rows are independent; a long row (cols >= split_cols) is cut
// into fixed blocks of block_elems elements whatever the thread count, each
// block's (max, sum) is computed by the same code, and the partial results are
// merged on the calling thread in block order.
//
// Traffic: a row of up to 256 KiB runs all its passes while it sits in L2,
// so each element costs one DRAM read and one write. A long row is processed
// block by block: pass 1 reads a block twice (max, then sum of exp — the
// second read hits L2), pass 2 reads and writes it once: two DRAM reads and
// one write per element, like the two-pass algorithm, on any number of cores.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel.hpp"
#include "softmax.hpp"

namespace smax {

template <class T>
struct matrix_view {
  T* data = nullptr;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t stride = 0;  // elements between row starts; >= cols

  matrix_view() = default;
  // stride 0 means dense rows (stride = cols).
  matrix_view(T* d, std::size_t r, std::size_t c, std::size_t s = 0) : data(d), rows(r), cols(c), stride(s ? s : c) {}
  // matrix_view<float> converts to matrix_view<const float>.
  template <class U, class = std::enable_if_t<std::is_convertible<U*, T*>::value>>
  matrix_view(const matrix_view<U>& o) : data(o.data), rows(o.rows), cols(o.cols), stride(o.stride) {}

  T* row(std::size_t r) const noexcept { return data + r * stride; }
};

namespace detail {

// Rows at least this long are split into blocks (see the file comment).
constexpr std::size_t split_cols = std::size_t(1) << 18;
// 64 Ki elements: 256 KiB of float, comfortably L2-resident between the two
// reads of pass 1 on every x86/ARM core with >= 512 KiB of L2.
constexpr std::size_t block_elems = std::size_t(1) << 16;
// Rows are handed to the executor in groups of about this many elements.
constexpr std::size_t task_elems = std::size_t(1) << 16;

template <class T, class U>
void check_shapes(const char* fn, const matrix_view<T>& x, const matrix_view<U>& y) {
  const std::string f(fn);
  if (x.stride < x.cols) throw std::invalid_argument(f + ": x.stride must be >= x.cols");
  if (y.stride < y.cols) throw std::invalid_argument(f + ": y.stride must be >= y.cols");
  if (x.rows != y.rows || x.cols != y.cols) throw std::invalid_argument(f + ": x and y must have the same rows and cols");
  if (x.rows && x.cols && (!x.data || !y.data)) throw std::invalid_argument(f + ": null data for a non-empty matrix");
}

inline executor& default_executor(executor* ex) {
  static sequential_executor seq;
  return ex ? *ex : seq;
}

// Calls f(row_in, row_out) for every row, rows grouped into tasks of about
// task_elems elements.
template <class T, class U, class F>
void for_each_row(const matrix_view<T>& x, const matrix_view<U>& y, executor& ex, F&& f) {
  if (x.rows == 0 || x.cols == 0) return;
  const std::size_t per_task = std::max<std::size_t>(1, task_elems / x.cols);
  const std::size_t tasks = (x.rows + per_task - 1) / per_task;
  ex.run(tasks, [&](std::size_t t) {
    const std::size_t end = std::min(x.rows, (t + 1) * per_task);
    for (std::size_t r = t * per_task; r < end; ++r) f(x.row(r), y.row(r));
  });
}

// One long row, blocked and possibly multi-threaded (see the file comment).
template <class A, class T>
void softmax_blocked(const T* x, T* y, std::size_t n, executor& ex, bool log) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  const std::size_t nb = (n + block_elems - 1) / block_elems;
  std::vector<T> bmax(nb);
  std::vector<double> bsum(nb);
  const auto len = [&](std::size_t b) { return std::min(block_elems, n - b * block_elems); };
  ex.run(nb, [&](std::size_t b) {
    const T* xb = x + b * block_elems;
    const T m = reduce_max<A>(xb, len(b));
    bmax[b] = m;
    bsum[b] = 0;
    if (is_finite(m))
      with_shifted_exp<A>(m, [&](auto e) { bsum[b] = sum_map<A>(xb, static_cast<T*>(nullptr), len(b), e); });
  });
  // Merge in block order, on this thread.
  T M = -inf;
  bool nonfinite = false;
  for (std::size_t b = 0; b < nb; ++b) {
    nonfinite |= !(bmax[b] == bmax[b]) || bmax[b] == inf;
    if (bmax[b] > M) M = bmax[b];
  }
  if (nonfinite || M == -inf) return softmax_nonfinite(x, y, n, log);
  double s = 0;
  for (std::size_t b = 0; b < nb; ++b)
    if (bmax[b] > -inf) s += bsum[b] * std::exp(static_cast<double>(bmax[b]) - static_cast<double>(M));
  if (!(s == s)) return fill(y, n, std::numeric_limits<T>::quiet_NaN());
  using B = xsimd::batch<T, A>;
  if (log) {
    const B mb(M), lse(static_cast<T>(std::log(s)));
    ex.run(nb, [&](std::size_t b) {
      const std::size_t o = b * block_elems;
      map<A>(x + o, y + o, len(b), [&](B v) { return (v - mb) - lse; });
    });
    return;
  }
  const B inv(static_cast<T>(1.0 / s));
  with_shifted_exp<A>(M, [&](auto e) {
    ex.run(nb, [&](std::size_t b) {
      const std::size_t o = b * block_elems;
      map<A>(x + o, y + o, len(b), [&](B v) { return e(v) * inv; });
    });
  });
}

template <class A, class T>
void softmax_rows(matrix_view<const T> x, matrix_view<T> y, algorithm a, executor* exec, bool log) {
  executor& ex = default_executor(exec);
  if (x.rows == 0 || x.cols == 0) return;
  if (x.cols >= split_cols && a == algorithm::automatic) {
    for (std::size_t r = 0; r < x.rows; ++r) softmax_blocked<A>(x.row(r), y.row(r), x.cols, ex, log);
    return;
  }
  for_each_row(x, y, ex, [&](const T* xr, T* yr) {
    if (log)
      log_softmax<A>(xr, yr, x.cols);
    else
      softmax<A>(xr, yr, x.cols, a);
  });
}

}  // namespace detail
}  // namespace smax
