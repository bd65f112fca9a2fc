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
// block by block with the two-pass reduction: pass 1 reads a block once for
// its sum of e^x against a per-block power of two, pass 2 reads it and writes
// (streaming stores once the row's output outgrows the cache): two DRAM reads
// and one write per element, as softmax_two_pass, on any number of cores.
// log_softmax the same, each block's max taken in its first read. If any
// block is outside the two-pass range (NaN, inf, extreme magnitudes, an all
// -inf block), the whole row takes max, then sum of e^(x - max) per block
// (the second read hits L2) after that first read.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../parallel.hpp"
#include "../parameters.hpp"
#include "../types.hpp"
#include "arguments.hpp"
#include "softmax.hpp"

namespace smax {

namespace detail {

// Rows at least this long are split into blocks (see the file comment).
constexpr std::size_t split_cols = std::size_t(1) << 18;
// 64 Ki elements: 256 KiB of float, comfortably L2-resident between the two
// reads of pass 1 on every x86/ARM core with >= 512 KiB of L2.
constexpr std::size_t block_elems = std::size_t(1) << 16;
// Rows are handed to the executor in groups of about this many elements.
constexpr std::size_t task_elems = std::size_t(1) << 16;
// A long row's blocks go to the executor in runs of consecutive blocks, at
// most this many per task (fewer when that would leave under four tasks per
// thread): a thread streams 4 MiB in a row and fences once per task
// (docs/tuning.md, "Long rows"). The bits do not depend on it (blocks are
// merged in order).
constexpr std::size_t max_blocks_per_task = 16;

// Calls f(b) for every block b < nb on the executor, consecutive blocks per
// task (max_blocks_per_task), in increasing b within a task; after_task()
// ends each task (the streaming-store fence of a write pass).
template <class F, class G>
void for_each_block(std::size_t nb, executor& ex, F&& f, G&& after_task) {
  const std::size_t per = std::max<std::size_t>(1, std::min(max_blocks_per_task, nb / (4 * ex.concurrency())));
  ex.run((nb + per - 1) / per, [&](std::size_t t) {
    const std::size_t end = std::min(nb, (t + 1) * per);
    for (std::size_t b = t * per; b < end; ++b) f(b);
    after_task();
  });
}
template <class F>
void for_each_block(std::size_t nb, executor& ex, F&& f) {
  for_each_block(nb, ex, f, [] {});
}

inline executor& default_executor(executor* ex) {
  static sequential_executor seq;
  return ex ? *ex : seq;
}

// rows_ahead (loops.hpp) set to `on` on this thread while the scope lasts.
struct rows_ahead_scope {
  bool saved;
  explicit rows_ahead_scope(bool on) noexcept : saved(rows_ahead) { rows_ahead = on; }
  ~rows_ahead_scope() { rows_ahead = saved; }
  rows_ahead_scope(const rows_ahead_scope&) = delete;
  rows_ahead_scope& operator=(const rows_ahead_scope&) = delete;
};

// Whether a batch's rows run with rows_ahead: rows of at least 4 KiB, dense
// in every view given (stride = cols: 4 KiB past a row's end is the next
// row), at least prefetch_min_bytes in all. Rows under 4 KiB measured
// slower with it in the backward (docs/tuning.md, "Rows ahead").
template <class T, class... More>
bool rows_ahead_pays(const matrix_view<T>& v, const More&... more) noexcept {
  const std::size_t row = v.cols * sizeof(T);
  return row >= 4096 && v.rows > (prefetch_min_bytes - 1) / row && v.stride == v.cols &&
         ((more.stride == more.cols) && ...);
}

// The gaps strided views leave between their rows (stride > cols), touched
// after each row but the last (touch_lines) so that the prefetch stream
// runs on into the next row, as touch_gap does for a dense row's unread
// tail (docs/tuning.md, "Row gaps"): on AMD (gap_breaks_stream), for the
// views given (all of one row count) with rows of at least 4 KiB, at least
// prefetch_min_bytes of them in all, and a gap no longer than a row nor
// than 4 KiB (the gaps measured).
struct row_gaps {
  struct gap {
    const char* data;
    std::size_t from, stride;  // in bytes
  };
  gap gaps[4];
  std::size_t count = 0, rows = 0;
  template <class... V>
  explicit row_gaps(const matrix_view<V>&... views) noexcept {
    static_assert(sizeof...(V) <= 4, "at most 4 views");
    (add(views), ...);
  }
  template <class T>
  void add(const matrix_view<T>& v) noexcept {
    const std::size_t row = v.cols * sizeof(T), gap = (v.stride - v.cols) * sizeof(T);
    if (v.stride > v.cols && gap <= row && gap <= 4096 && row >= 4096 && v.rows > 1 &&
        v.rows > (prefetch_min_bytes - 1) / row && gap_breaks_stream()) {
      gaps[count++] = {reinterpret_cast<const char*>(v.data), row, v.stride * sizeof(T)};
      rows = v.rows;
    }
  }
  // (always inlined: g++ takes a function of prefetches alone for one
  // without side effects and drops the call)
  SMAX_INLINE void after(std::size_t r) const noexcept {
    if (r + 1 < rows)
      for (std::size_t i = 0; i < count; ++i)
        touch_lines(gaps[i].data + r * gaps[i].stride, gaps[i].from, gaps[i].stride);
  }
};

// Calls f(r) for every row index r < rows, rows grouped into tasks of about
// task_elems elements, with rows_ahead = ahead in every task.
template <class F>
void for_each_row_index(std::size_t rows, std::size_t cols, executor& ex, F&& f, bool ahead = false) {
  if (rows == 0 || cols == 0) return;
  const std::size_t per_task = std::max<std::size_t>(1, task_elems / cols);
  const std::size_t tasks = (rows + per_task - 1) / per_task;
  ex.run(tasks, [&](std::size_t t) {
    const rows_ahead_scope scope(ahead);
    const std::size_t end = std::min(rows, (t + 1) * per_task);
    for (std::size_t r = t * per_task; r < end; ++r) f(r);
  });
}

// Calls f(row_in, row_out) for every row (rows_ahead as for_each_row_index).
// (Strided views: their gaps touched, row_gaps.)
template <class T, class U, class F>
void for_each_row(const matrix_view<T>& x, const matrix_view<U>& y, executor& ex, F&& f, bool ahead) {
  const row_gaps gaps(x, y);
  for_each_row_index(
      x.rows, x.cols, ex,
      [&](std::size_t r) {
        f(x.row(r), y.row(r));
        gaps.after(r);
      },
      ahead);
}

// The batched form of a single-vector function: check the shapes, then
// f(x_row, y_row, cols, r) for every row on the executor. Arguments are
// validated by the caller before this (an exception must not leave a task).
template <class T, class F>
void rows_map(const char* fn, const matrix_view<const T>& x, const matrix_view<T>& y, executor* ex, F&& f) {
  check_shapes(fn, x, y);
  const row_gaps gaps(x, y);
  for_each_row_index(
      x.rows, x.cols, default_executor(ex),
      [&](std::size_t r) {
        f(x.row(r), y.row(r), x.cols, r);
        gaps.after(r);
      },
      rows_ahead_pays(x));
}

// The same for a backward pass: inputs a and b (and c, when the function
// takes three), output d, all of one shape.
// names: the parameters' names, for the messages ("y,dy,dx" as three strings).
template <class T, class F>
void rows_map_two_inputs(const char* fn, const char* const (&names)[3], const matrix_view<const T>& a,
               const matrix_view<const T>& b, const matrix_view<T>& d, executor* ex, F&& f) {
  check_shapes(fn, a, d, names[0], names[2]);
  check_shapes(fn, b, d, names[1], names[2]);
  const row_gaps gaps(a, b, d);
  for_each_row_index(
      d.rows, d.cols, default_executor(ex),
      [&](std::size_t r) {
        f(a.row(r), b.row(r), d.row(r), d.cols);
        gaps.after(r);
      },
      rows_ahead_pays(a, b));
}
// Three inputs and an output of one shape (names: theirs, for the messages).
template <class T, class U>
void check_shapes4(const char* fn, const char* const (&names)[4], const matrix_view<const T>& a,
                   const matrix_view<const T>& b, const matrix_view<const T>& c, const matrix_view<U>& d) {
  check_shapes(fn, a, d, names[0], names[3]);
  check_shapes(fn, b, d, names[1], names[3]);
  check_shapes(fn, c, d, names[2], names[3]);
}
template <class T, class F>
void rows_map4(const char* fn, const char* const (&names)[4], const matrix_view<const T>& a,
               const matrix_view<const T>& b, const matrix_view<const T>& c, const matrix_view<T>& d, executor* ex,
               F&& f) {
  check_shapes4(fn, names, a, b, c, d);
  const row_gaps gaps(a, b, c, d);
  for_each_row_index(
      d.rows, d.cols, default_executor(ex),
      [&](std::size_t r) {
        f(a.row(r), b.row(r), c.row(r), d.row(r), d.cols);
        gaps.after(r);
      },
      rows_ahead_pays(a, b, c));
}

// softmax of one long row by blocks with the two-pass reduction: each
// block's sum(e^x 2^-E_b) in one read (two_pass_sum), merged in block order
// against the largest E_b, then every block written with streaming stores
// when the row's output is too large for the cache. Two DRAM reads and one
// write per element, like softmax_two_pass on the whole row. False when a
// block is outside the two-pass range (NaN, inf, extreme magnitudes):
// nothing has been written, the caller takes the max-then-sum blocks.
// log: each block's max comes with its sum (two_pass_sum_tracked), and the
// write is log_softmax's, (x - M) - log sum e^(x - M).
template <class A, class T>
bool softmax_blocked_two_pass(const T* x, T* y, std::size_t n, executor& ex, result_form form) {
  const bool log = form == result_form::logs;
  using B = xsimd::batch<T, A>;
  const std::size_t nb = (n + block_elems - 1) / block_elems;
  std::vector<double> bsum(nb);
  std::vector<T> bexp(nb), bmax(nb);
  std::vector<char> ok(nb);
  const auto len = [&](std::size_t b) { return std::min(block_elems, n - b * block_elems); };
  for_each_block(nb, ex, [&](std::size_t b) {
    const T* xb = x + b * block_elems;
    ok[b] = log ? two_pass_sum_tracked<A, true>(xb, len(b), bsum[b], bexp[b], bmax[b], pass_through{})
                : two_pass_sum<A>(xb, len(b), bsum[b], bexp[b]);
  });
  T E = -std::numeric_limits<T>::infinity(), M = E;
  for (std::size_t b = 0; b < nb; ++b) {
    if (!ok[b]) return false;
    E = std::max(E, bexp[b]);
    M = std::max(M, bmax[b]);
  }
  double s = 0;
  for (std::size_t b = 0; b < nb; ++b) s += ldexp_flushed(bsum[b], static_cast<int>(bexp[b] - E));
  if (!(s > 0 && s < std::numeric_limits<double>::infinity())) return false;
  const bool stream = n * sizeof(T) >= stream_min_bytes;
  const auto write = [&](auto f, auto staging) {
    for_each_block(
        nb, ex,
        [&](std::size_t b) {
          const std::size_t o = b * block_elems;
          if (stream)
            map_streamed<A, decltype(staging)::value>(x + o, y + o, len(b), f);
          else
            map<A>(x + o, y + o, len(b), f);
        },
        [&] {
          if (stream) stream_fence<A>();
        });
  };
  if (log) {
    const double lse = std::log(s) - minus_e_ln2(static_cast<double>(M), static_cast<double>(E));
    with_log_probability<A>(M, lse, [&](auto f) { write(f, std::false_type{}); });
  } else {
    const auto e = exp_ref<A, T>(-single_pass_limits<T>::limit, E, static_cast<T>(1.0 / s));
    write([=](B v) { return e(v); }, std::integral_constant<bool, staged>{});
  }
  return true;
}

// One long row, blocked and possibly multi-threaded (see the file comment).
template <class A, class T>
void softmax_blocked(const T* x, T* y, std::size_t n, executor& ex, result_form form) {
  const bool log = form == result_form::logs;
  constexpr T inf = std::numeric_limits<T>::infinity();
  if (softmax_blocked_two_pass<A>(x, y, n, ex, form)) return;
  const std::size_t nb = (n + block_elems - 1) / block_elems;
  std::vector<T> bmax(nb);
  std::vector<double> bsum(nb);
  const auto len = [&](std::size_t b) { return std::min(block_elems, n - b * block_elems); };
  for_each_block(
      nb, ex,
      [&](std::size_t b) {
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
  if (nonfinite || M == -inf) return softmax_nonfinite(x, y, n, form);
  double s = 0;
  for (std::size_t b = 0; b < nb; ++b)
    if (bmax[b] > -inf) s += bsum[b] * exp_flushed(static_cast<double>(bmax[b]) - static_cast<double>(M));
  if (!(s == s)) return fill(y, n, std::numeric_limits<T>::quiet_NaN());
  using B = xsimd::batch<T, A>;
  if (log) {
    const B mb(M), lse(static_cast<T>(std::max(std::log(s), 0.0)));  // >= 0, as log_softmax
    for_each_block(
        nb, ex,
        [&](std::size_t b) {
          const std::size_t o = b * block_elems;
          map<A>(x + o, y + o, len(b), [=](B v) { return (v - mb) - lse; });
        });
    return;
  }
  const scale_normal<A, T> inv(static_cast<T>(1.0 / s));
  with_shifted_exp<A>(M, [&](auto e) {
    for_each_block(
        nb, ex,
        [&](std::size_t b) {
          const std::size_t o = b * block_elems;
          map<A>(x + o, y + o, len(b), [=](B v) { return inv(e(v)); });
        });
  });
}

template <class A, class T>
void softmax_rows(matrix_view<const T> x, matrix_view<T> y, algorithm a, executor* exec, result_form form) {
  executor& ex = default_executor(exec);
  if (x.rows == 0 || x.cols == 0) return;
  if (x.cols >= split_cols && a == algorithm::automatic) {
    for (std::size_t r = 0; r < x.rows; ++r) softmax_blocked<A>(x.row(r), y.row(r), x.cols, ex, form);
    return;
  }
  for_each_row(
      x, y, ex,
      [&](const T* xr, T* yr) {
        if (form == result_form::logs)
          log_softmax<A>(xr, yr, x.cols);
        else
          softmax<A>(xr, yr, x.cols, a);
      },
      rows_ahead_pays(x));
}

}  // namespace detail
}  // namespace smax
