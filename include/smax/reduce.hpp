// smax — the loop skeletons every kernel is built from: tails without reading
// or writing past the end, multi-accumulator max, and sums whose error does
// not grow with n.
//
// Summation: each pass keeps `unroll` vector accumulators (independent add
// chains, so the loop is not latency-bound) and empties them every
// `block_chunks` iterations into a per-lane compensated (Neumaier) total. The
// rounding error of a sum of n terms is then O(block) ulp from the inner adds
// plus O(1) from the compensated outer adds, whatever n is (plain
// accumulation drifts by O(n / lanes) ulp: 1e-3 relative at 64M floats).
#pragma once

#include <cmath>
#include <cstring>
#include <limits>

#include "config.hpp"

namespace smax {
namespace detail {

// Per-ISA loop shape. Memory-bound passes want a few independent
// accumulators; 4 vectors per iteration hides FMA latency on every ISA here.
template <class A>
struct loop_shape {
  static constexpr std::size_t unroll = 4;
  // Iterations between flushes of the inner accumulators: each inner lane
  // then adds at most 16 terms before a compensated add.
  static constexpr std::size_t block_chunks = 16;
};

template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> lane_index() noexcept {
  constexpr std::size_t W = xsimd::batch<T, A>::size;
  alignas(64) T idx[W];
  for (std::size_t i = 0; i < W; ++i) idx[i] = static_cast<T>(i);
  return xsimd::batch<T, A>::load_unaligned(idx);
}

// The first `rem` (< lanes) elements of p, the other lanes set to `fill`.
// Reads only p[0 .. rem-1].
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> load_partial(const T* p, std::size_t rem, T fill) noexcept {
  constexpr std::size_t W = xsimd::batch<T, A>::size;
  alignas(64) T buf[W];
  for (std::size_t i = 0; i < W; ++i) buf[i] = fill;
  if (rem) std::memcpy(buf, p, rem * sizeof(T));
  return xsimd::batch<T, A>::load_unaligned(buf);
}

// Writes only p[0 .. rem-1].
template <class A, class T>
SMAX_INLINE void store_partial(T* p, std::size_t rem, xsimd::batch<T, A> v) noexcept {
  constexpr std::size_t W = xsimd::batch<T, A>::size;
  alignas(64) T buf[W];
  v.store_unaligned(buf);
  if (rem) std::memcpy(p, buf, rem * sizeof(T));
}

// Largest lane; NaN if any lane is NaN (so the answer does not depend on the
// ISA's max-instruction NaN convention).
template <class A, class T>
SMAX_INLINE T hmax(xsimd::batch<T, A> v) noexcept {
  constexpr std::size_t W = xsimd::batch<T, A>::size;
  alignas(64) T buf[W];
  v.store_unaligned(buf);
  T m = buf[0];
  for (std::size_t i = 1; i < W; ++i) {
    if (buf[i] != buf[i]) return buf[i];
    if (buf[i] > m || m != m) m = buf[i];
  }
  return m;
}

// Sum of the lanes, in double, pairwise.
template <class A, class T>
SMAX_INLINE double hsum(xsimd::batch<T, A> v) noexcept {
  constexpr std::size_t W = xsimd::batch<T, A>::size;
  alignas(64) T buf[W];
  v.store_unaligned(buf);
  double d[W];
  for (std::size_t i = 0; i < W; ++i) d[i] = static_cast<double>(buf[i]);
  for (std::size_t w = W; w > 1; w /= 2)
    for (std::size_t i = 0; i < w / 2; ++i) d[i] = d[2 * i] + d[2 * i + 1];
  return d[0];
}

// Per-lane Neumaier sum: total + carry holds the sum of everything added,
// with an error independent of how many blocks were added.
template <class A, class T>
struct compensated {
  using B = xsimd::batch<T, A>;
  B total = B(T(0));
  B carry = B(T(0));
  SMAX_INLINE void add(B v) noexcept {
    const B t = total + v;
    const B big = xsimd::select(xsimd::abs(total) >= xsimd::abs(v), total, v);
    const B small = xsimd::select(xsimd::abs(total) >= xsimd::abs(v), v, total);
    carry += (big - t) + small;
    total = t;
  }
  SMAX_INLINE void scale(B f) noexcept {
    total *= f;
    carry *= f;
  }
  SMAX_INLINE B value() const noexcept { return total + carry; }
};

// Max over x[0..n-1] (NaN if the lanes saw one; -inf for n = 0).
template <class A, class T>
T reduce_max(const T* x, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  B m0(ninf), m1(ninf), m2(ninf), m3(ninf);
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    m0 = xsimd::max(m0, B::load_unaligned(x + i));
    m1 = xsimd::max(m1, B::load_unaligned(x + i + W));
    m2 = xsimd::max(m2, B::load_unaligned(x + i + 2 * W));
    m3 = xsimd::max(m3, B::load_unaligned(x + i + 3 * W));
  }
  for (; i + W <= n; i += W) m0 = xsimd::max(m0, B::load_unaligned(x + i));
  if (i < n) m1 = xsimd::max(m1, load_partial<A>(x + i, n - i, ninf));
  // x86 max returns its second operand when either is NaN, so a NaN met in
  // the loop may have been replaced; the callers' sums catch it instead.
  return hmax<A>(xsimd::max(xsimd::max(m0, m1), xsimd::max(m2, m3)));
}

// Sum over i of f(x[i]) (f: batch -> batch), in double; when `y` is not null
// also stores f(x[i]) to y[i] (the reload variant). Tail lanes are masked out
// of the sum, so f may return anything for the padding.
template <class A, class T, class F>
double sum_map(const T* x, T* y, std::size_t n, F&& f) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t U = loop_shape<A>::unroll;
  constexpr std::size_t block = U * W * loop_shape<A>::block_chunks;
  static_assert(U == 4, "the unrolled body below is written for 4 accumulators");
  compensated<A, T> total;
  std::size_t i = 0;
  while (i + U * W <= n) {
    B a0(T(0)), a1(T(0)), a2(T(0)), a3(T(0));
    const std::size_t end = (n - i >= block) ? i + block : i + ((n - i) / (U * W)) * (U * W);
    for (; i < end; i += U * W) {
      const B e0 = f(B::load_unaligned(x + i));
      const B e1 = f(B::load_unaligned(x + i + W));
      const B e2 = f(B::load_unaligned(x + i + 2 * W));
      const B e3 = f(B::load_unaligned(x + i + 3 * W));
      if (y) {
        e0.store_unaligned(y + i);
        e1.store_unaligned(y + i + W);
        e2.store_unaligned(y + i + 2 * W);
        e3.store_unaligned(y + i + 3 * W);
      }
      a0 += e0;
      a1 += e1;
      a2 += e2;
      a3 += e3;
    }
    total.add((a0 + a1) + (a2 + a3));
  }
  B rest(T(0));
  for (; i + W <= n; i += W) {
    const B e = f(B::load_unaligned(x + i));
    if (y) e.store_unaligned(y + i);
    rest += e;
  }
  if (i < n) {
    const std::size_t r = n - i;
    const B e = f(load_partial<A>(x + i, r, T(0)));
    if (y) store_partial<A>(y + i, r, e);
    rest += xsimd::select(lane_index<A, T>() < B(static_cast<T>(r)), e, B(T(0)));
  }
  total.add(rest);
  return hsum<A>(total.value());
}

// y[i] = f(x[i]); x == y allowed.
template <class A, class T, class F>
void map(const T* x, T* y, std::size_t n, F&& f) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    const B v0 = B::load_unaligned(x + i);
    const B v1 = B::load_unaligned(x + i + W);
    const B v2 = B::load_unaligned(x + i + 2 * W);
    const B v3 = B::load_unaligned(x + i + 3 * W);
    f(v0).store_unaligned(y + i);
    f(v1).store_unaligned(y + i + W);
    f(v2).store_unaligned(y + i + 2 * W);
    f(v3).store_unaligned(y + i + 3 * W);
  }
  for (; i + W <= n; i += W) f(B::load_unaligned(x + i)).store_unaligned(y + i);
  if (i < n) store_partial<A>(y + i, n - i, f(load_partial<A>(x + i, n - i, T(0))));
}

template <class T>
void fill(T* y, std::size_t n, T v) noexcept {
  for (std::size_t i = 0; i < n; ++i) y[i] = v;
}

}  // namespace detail
}  // namespace smax
