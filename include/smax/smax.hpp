// smax — softmax-family kernels for CPUs, header-only, on xsimd.
//
// This header is the table of contents: every public function, its formula,
// its valid inputs and its special values. Each one exists in three forms:
//
//   smax::softmax(x, y, n)                  best ISA this TU is compiled for
//                                           (xsimd::default_arch, your -m flags)
//   smax::softmax(xsimd::avx2{}, x, y, n)   an explicit ISA (any xsimd arch tag
//                                           this TU is compiled to support)
//   smax::dynamic::softmax(x, y, n)         the best ISA the CPU has among those
//                                           compiled in: see smax/dynamic.hpp
//
// for T = float and double. x and y may be the same pointer (in place); no
// alignment is needed; n may be any size, 0 included (nothing is read or
// written). Overlapping but unequal x and y is undefined.
//
// Special values, one rule for the whole family (m = max of x):
//   any NaN in x      -> every output NaN
//   +inf entries      -> they share the mass equally, every other entry gets 0
//   -inf entries      -> masked: output 0 (log_softmax: -inf); all -inf -> all 0
//   |x| up to max     -> never overflows to inf or NaN
//   bad argument      -> std::invalid_argument naming the parameter
#pragma once

#include <stdexcept>

#include "backward.hpp"
#include "batched.hpp"
#include "config.hpp"
#include "softmax.hpp"

namespace smax {

// ---------------------------------------------------------------- softmax --

// y_i = e^(x_i - m) / sum_j e^(x_j - m).
// Float accuracy (tests/test_softmax.cpp, every ISA, n up to 16M): relative
// error per element below 1e-6 for outputs above 1e-30, flat in n and in
// x_i - m; outputs sum to 1 within 1e-6. `a` picks the algorithm (see
// softmax.hpp for the traffic each costs); automatic = three-pass reload up to
// 256 KiB of input, two-pass beyond.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softmax(A, const T* x, T* y, std::size_t n, algorithm a = algorithm::automatic) {
  detail::softmax<A>(x, y, n, a);
}
template <class T, class = detail::enable_if_real_t<T>>
void softmax(const T* x, T* y, std::size_t n, algorithm a = algorithm::automatic) {
  softmax(xsimd::default_arch{}, x, y, n, a);
}

// y_i = x_i - m - log(sum_j e^(x_j - m)). All -inf gives all -inf; a +inf
// entry gives -log(count of +inf) there and -inf elsewhere.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void log_softmax(A, const T* x, T* y, std::size_t n) {
  detail::log_softmax<A>(x, y, n);
}
template <class T, class = detail::enable_if_real_t<T>>
void log_softmax(const T* x, T* y, std::size_t n) {
  log_softmax(xsimd::default_arch{}, x, y, n);
}

// ------------------------------------------------------------ sparse family --
// (sparsemax, entmax15, entmax_bisect and their backward: sparse.hpp)

// ---------------------------------------------------------- other variants --
// (stablemax, log_stablemax, softpick, ssmax, gumbel_noise, gumbel_softmax)

// ------------------------------------------------------------------ backward --
// Vector-Jacobian products: given the forward output y and the upstream
// gradient dy, write dx = J^T dy. dx may alias y or dy. They read y only, so
// special values propagate through the arithmetic (a NaN in y or dy makes
// dx NaN; entries with y = 0 get dx = 0 from softmax_backward).

// dx_i = y_i (dy_i - sum_j y_j dy_j), y = softmax(x).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softmax_backward(A, const T* y, const T* dy, T* dx, std::size_t n) {
  detail::softmax_backward<A>(y, dy, dx, n);
}
template <class T, class = detail::enable_if_real_t<T>>
void softmax_backward(const T* y, const T* dy, T* dx, std::size_t n) {
  softmax_backward(xsimd::default_arch{}, y, dy, dx, n);
}

// dx_i = dy_i - e^(y_i) sum_j dy_j, y = log_softmax(x) (y = -inf entries
// get dx_i = dy_i).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void log_softmax_backward(A, const T* y, const T* dy, T* dx, std::size_t n) {
  detail::log_softmax_backward<A>(y, dy, dx, n);
}
template <class T, class = detail::enable_if_real_t<T>>
void log_softmax_backward(const T* y, const T* dy, T* dx, std::size_t n) {
  log_softmax_backward(xsimd::default_arch{}, y, dy, dx, n);
}

// ------------------------------------------------------------------- batched --
// Every row of a rows x cols matrix (row r at data + r * stride), optionally
// on an executor (parallel.hpp: smax::thread_pool, or your own parallel-for).
// x and y may be the same matrix. Bitwise identical output for any executor
// and thread count. With algorithm::automatic a row of >= 2^18 elements is
// split into fixed blocks that run in parallel too (so one long row uses every
// core); an explicit algorithm runs each row whole. Throws
// std::invalid_argument for stride < cols or mismatched shapes.

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softmax(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y,
             algorithm a = algorithm::automatic, executor* ex = nullptr) {
  detail::check_shapes("smax::softmax", x, y);
  detail::softmax_rows<A, T>(x, y, a, ex, false);
}
template <class T, class = detail::enable_if_real_t<T>>
void softmax(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, algorithm a = algorithm::automatic,
             executor* ex = nullptr) {
  softmax(xsimd::default_arch{}, x, y, a, ex);
}

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void log_softmax(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, executor* ex = nullptr) {
  detail::check_shapes("smax::log_softmax", x, y);
  detail::softmax_rows<A, T>(x, y, algorithm::automatic, ex, true);
}
template <class T, class = detail::enable_if_real_t<T>>
void log_softmax(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, executor* ex = nullptr) {
  log_softmax(xsimd::default_arch{}, x, y, ex);
}

}  // namespace smax
