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
#include <cstdint>
#include <cstring>
#include <limits>

#include "../types.hpp"
#include "config.hpp"
#include "exp.hpp"
#include "half.hpp"

// Inline every call in the function's body (the per-vector functor f of the
// loop skeletons included): g++ otherwise keeps large lambdas out of line
// and calls them once per vector with their batches spilled to memory.
#if defined(__GNUC__) || defined(__clang__)
#define SMAX_FLATTEN __attribute__((flatten))
#else
#define SMAX_FLATTEN
#endif

namespace smax {
namespace detail {

// Per-ISA loop shape: `unroll` vectors per iteration, each with its own
// accumulator (independent add chains, and independent exp evaluations for
// the out-of-order core to overlap); `block_chunks` iterations between
// flushes of the inner accumulators into the compensated total (each inner
// lane then adds at most block_chunks terms before a compensated add).
// Why 4: docs/tuning.md, "Loop shape".
template <class A, class = void>
struct loop_shape {
  static constexpr std::size_t unroll = 4;
  static constexpr std::size_t block_chunks = 16;
};

// Output arrays at least this large are written with non-temporal
// (streaming) stores where the ISA has them (x86): an output this large is
// not in cache when the caller reads it anyway, and streaming saves the
// read-for-ownership of every line (a two-pass softmax then moves 3 units of
// traffic per element instead of 4). Why 16 MiB: docs/tuning.md,
// "Streaming stores".
constexpr std::size_t stream_min_bytes = std::size_t(16) << 20;

// map's `Staged` form, for a kernel whose per-element work is one exp: on
// AVX-512 a streamed output is then produced in chunks of
// this many bytes, the kernel's values for one chunk going to a buffer in L1
// and then out with back-to-back streaming stores, so that the computation
// overlaps the memory traffic; for exp-per-element kernels on AVX-512 only.
// The measurements: docs/tuning.md, "Staged streaming".
constexpr std::size_t stream_chunk_bytes = 1024;
constexpr bool staged = true;

// Software prefetch in the out-of-cache read passes: one prefetcht1 (into
// L2) per cache line, this many bytes ahead of the loads (docs/tuning.md,
// "Prefetch"). x86 only.
template <class A>
constexpr std::size_t prefetch_bytes = (is_x86_sse2_v<A> || is_x86_avx_v<A> || is_avx512_v<A>) ? 4096 : 0;
// Below this many bytes of input the passes run from cache and skip it.
constexpr std::size_t prefetch_min_bytes = std::size_t(1) << 20;

// Set while this thread runs a batch of dense rows past prefetch_min_bytes
// (for_each_row_index, rows_ahead_pays): each row may be short, but the
// next one follows it in memory, so the read loops that prefetch a long
// vector (extremum_pass, for_each_chunk4, two_pass_sum, dot_normal, the
// masked attention pass) prefetch ahead in every pass they serve, on into
// the next row. Rows of a few KiB alone give the hardware prefetcher too
// little to train on (docs/tuning.md, "Rows ahead").
inline thread_local bool rows_ahead = false;

// Whether such a read loop over n elements of S prefetches ahead.
template <class S>
SMAX_INLINE bool read_loop_prefetches(std::size_t n) noexcept {
  return n * sizeof(S) >= prefetch_min_bytes || rows_ahead;
}

// What the loops tune on from CPUID (leaves 0 and 1), read once: the
// vendor and the family (base + extended). Elsewhere (not x86, or not
// GCC/Clang): neither known.
struct cpu_facts {
  bool amd = false;
  unsigned family = 0;
};
inline const cpu_facts& cpu() noexcept {
  static const cpu_facts facts = [] {
    cpu_facts f;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
    f.amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u;  // "Auth" "enti" "cAMD"
    if (a >= 1) {
      __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
      const unsigned base = (a >> 8) & 0xfu;
      f.family = base == 0xfu ? base + ((a >> 20) & 0xffu) : base;
    }
#endif
    return f;
  }();
  return facts;
}

// Whether this CPU's hardware prefetchers lose a row-to-row stream where
// the reads skip the end of each row: AMD (on Zen 5, rows read 1-4 KiB short
// of their end took 1.6-2.1x the time of whole rows). Not measured on
// Intel, so off there.
inline bool gap_breaks_stream() noexcept { return cpu().amd; }

// From this many bytes of input two_pass_sum (softmax.hpp) sums x as two
// halves merged at the end (the same bits wherever it runs), so that where
// two streams of reads are faster than one (interleave_halves) it can read
// both at once; below it, x is in cache (docs/tuning.md, "Two halves").
constexpr std::size_t two_halves_min_bytes = std::size_t(4) << 20;

// Whether two_pass_sum reads its two halves at once: on the AMD EPYC Zen 5
// two interleaved streams read 10-15% faster than one (measured); on Zen 3
// no faster (measured: its passes are bound by the exp); not measured on
// Intel or Zen 4. Those read the halves one after the other.
// The tests force either order on this thread (halves_order_forced) and
// compare the bits.
enum class halves_order { by_cpu, one_after_other, interleaved };
inline thread_local halves_order halves_order_forced = halves_order::by_cpu;
inline bool interleave_halves() noexcept {
  if (halves_order_forced != halves_order::by_cpu) return halves_order_forced == halves_order::interleaved;
  return cpu().amd && cpu().family >= 0x1a;
}

// AMD family 0x19: Zen 3 (AVX2 only) and Zen 4 (AVX-512 on 256-bit units).
inline bool amd_family_19h() noexcept { return cpu().amd && cpu().family == 0x19; }

// Whether AVX-512 runs here on 256-bit units, two per instruction: AMD
// family 0x19 (Zen 4; Zen 3, the same family, has no AVX-512), so that an
// AVX-512 kernel computes at about AVX2's rate per element. Family 0x1a
// (Zen 5) counts as 512-bit wide: its server parts are (measured); its
// mobile parts' 256-bit units are not told apart (unmeasured).
inline bool avx512_on_256bit_units() noexcept { return amd_family_19h(); }

// A non-temporal prefetch of each cache line of p[from .. to), in
// ascending order (none waited for).
template <class S>
SMAX_INLINE void touch_lines(const S* p, std::size_t from, std::size_t to) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  const std::uintptr_t end = reinterpret_cast<std::uintptr_t>(p + to);
  for (std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p + from) & ~std::uintptr_t(63); a < end; a += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 0);
#else
  (void)p, (void)from, (void)to;
#endif
}

// Touches the cache lines of p[from .. to) (touch_lines): the part of a row that a
// batched pass does not read (a causal row's masked tail), so that the
// hardware sees one stream on into the next row (docs/tuning.md, "Row
// gaps"). Only under rows_ahead (dense rows, out of cache), where
// gap_breaks_stream(), and for a gap no longer than the part read (longer
// ones cost their traffic: the square causal backward ran slower).
template <class S>
SMAX_INLINE void touch_gap(const S* p, std::size_t from, std::size_t to) noexcept {
  if (!rows_ahead || from >= to || to - from > from || !gap_breaks_stream()) return;
  touch_lines(p, from, to);
}

// Prefetches the lines of the U vectors at p, prefetch_bytes<A> ahead (the
// address is formed as an integer: it may lie past the end of the array,
// which a prefetch may touch but a pointer may not point to).
template <class A, std::size_t U, class T>
SMAX_INLINE void prefetch_ahead(const T* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  if constexpr (prefetch_bytes<A> != 0) {
    constexpr std::size_t bytes = U * xsimd::batch<T, A>::size * sizeof(T);
    const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(p) + prefetch_bytes<A>;
#pragma GCC unroll 16
    for (std::size_t k = 0; k < bytes; k += 64) __builtin_prefetch(reinterpret_cast<const void*>(a + k), 0, 2);
  }
#else
  (void)p;
#endif
}

// Whether A has non-temporal vector stores that store_stream uses.
template <class A>
constexpr bool has_stream_v =
#if defined(__AVX512F__)
    is_avx512_v<A> ||
#endif
#if defined(__AVX__)
    is_x86_avx_v<A> ||
#endif
#if defined(__SSE2__)
    is_x86_sse2_v<A> ||
#endif
    false;

// Non-temporal store of a whole vector to p, aligned to the vector size.
// (xsimd 8.1 has no streaming store: intrinsics per ISA.)
template <class A, class T>
SMAX_INLINE void store_stream(T* p, xsimd::batch<T, A> v) noexcept {
  [[maybe_unused]] constexpr bool f32 = std::is_same<T, float>::value;
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    if constexpr (f32)
      _mm512_stream_ps(p, v);
    else
      _mm512_stream_pd(p, v);
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (is_x86_avx_v<A> && !is_avx512_v<A>) {
    if constexpr (f32)
      _mm256_stream_ps(p, v);
    else
      _mm256_stream_pd(p, v);
    return;
  }
#endif
#if defined(__SSE2__)
  if constexpr (is_x86_sse2_v<A> && !is_x86_avx_v<A> && !is_avx512_v<A>) {
    if constexpr (f32)
      _mm_stream_ps(p, v);
    else
      _mm_stream_pd(p, v);
    return;
  }
#endif
  v.store_aligned(p);
}

// Orders the streaming stores before anything that follows (they are weakly
// ordered); called once at the end of a streaming loop.
template <class A>
SMAX_INLINE void stream_fence() noexcept {
#if defined(__SSE2__) || defined(__AVX__) || defined(__AVX512F__)
  if constexpr (has_stream_v<A>) _mm_sfence();
#endif
}

// Whether an output of n elements at y is written with streaming stores, and
// how many leading elements to write normally before y is vector-aligned.
template <class A, class T>
SMAX_INLINE bool stream_output(const T* y, std::size_t n, std::size_t& head, bool any_size = false) noexcept {
  constexpr std::size_t align = xsimd::batch<T, A>::size * sizeof(T);
  const auto addr = reinterpret_cast<std::uintptr_t>(y);
  if (!has_stream_v<A> || (!any_size && n * sizeof(T) < stream_min_bytes) || addr % sizeof(T) != 0) return false;
  head = ((align - addr % align) % align) / sizeof(T);
  // A short output (map_streamed's blocks, any size) may end before the
  // first aligned element: nothing to stream then.
  return head < n;
}

// 0, 1, ..., W - 1 in the lanes (any element type: float, double, uint32).
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

// The type a source array of S is computed in: float for the 16-bit types.
template <class S>
using compute_t = std::conditional_t<is_half_v<S>, float, S>;

// Loads of a source array S into batches of T: a plain load when S is T,
// the widening load of half.hpp when S is bf16 / fp16 (T float). The passes
// that take 16-bit x directly (two_pass_sum) are written on these.
template <class A, class T, class S>
SMAX_INLINE xsimd::batch<T, A> load_as(const S* p) noexcept {
  if constexpr (std::is_same<S, T>::value) {
    return xsimd::batch<T, A>::load_unaligned(p);
  } else {
    static_assert(std::is_same<T, float>::value && is_half_v<S>, "16-bit sources widen to float");
    return widen<A>(p);
  }
}
// The first `rem` (< lanes) elements of p, the other lanes `fill`.
template <class A, class T, class S>
SMAX_INLINE xsimd::batch<T, A> load_as_partial(const S* p, std::size_t rem, T fill) noexcept {
  if constexpr (std::is_same<S, T>::value) {
    return load_partial<A>(p, rem, fill);
  } else {
    using B = xsimd::batch<T, A>;
    alignas(64) S buf[B::size] = {};
    if (rem) std::memcpy(buf, p, rem * sizeof(S));
    return xsimd::select(lane_index<A, T>() < B(static_cast<T>(rem)), load_as<A, T>(buf), B(fill));
  }
}
// The first i with x[i] == v (n if none; never for a NaN v): four vectors
// compared per step, the lane found by the scalar loop after the step that
// hit. (Element by element, the scan took half of sa_softmax_backward's
// normalized time at 64K: docs/tuning.md, "First index".)
// (x may be 16-bit, v float: compared widened.)
template <class A, class S, class T>
std::size_t first_index_of(const S* x, std::size_t n, T v) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  const B vb(v);
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    const auto hit = (load_as<A, T>(x + i) == vb) | (load_as<A, T>(x + i + W) == vb) |
                     (load_as<A, T>(x + i + 2 * W) == vb) | (load_as<A, T>(x + i + 3 * W) == vb);
    if (xsimd::any(hit)) break;
  }
  while (i < n && !(static_cast<T>(x[i]) == v)) ++i;
  return i;
}

// prefetch_ahead for the lines of U batches' worth of S at p.
template <class A, std::size_t U, class T, class S>
SMAX_INLINE void prefetch_as(const S* p) noexcept {
  if constexpr (std::is_same<S, T>::value) {
    prefetch_ahead<A, U>(p);
  } else {
    static_assert(U % 2 == 0 && sizeof(S) * 2 == sizeof(T), "16-bit: half the bytes of U float batches");
    prefetch_ahead<A, U / 2>(reinterpret_cast<const T*>(p));
  }
}

// A source whose element i is f(a[i], b[i]), read through load_as and its
// kin as an array is: a pass can then form its values from two inputs in
// its loads (the attention scores, from x and the mask row). A partial
// load's padding lanes hold f(fill, fill), not fill: for passes that mask
// the padding (sum_map), not for those that rely on its value.
template <class T, class F>
struct paired_source {
  const T* a;
  const T* b;
  F f;
  paired_source operator+(std::size_t i) const noexcept { return {a + i, b + i, f}; }
};
template <class T, class F>
paired_source<T, F> pair_source(const T* a, const T* b, F f) noexcept {
  return {a, b, f};
}
template <class A, class T, class S, class F>
SMAX_INLINE xsimd::batch<T, A> load_as(const paired_source<S, F>& p) noexcept {
  return p.f(load_as<A, T>(p.a), load_as<A, T>(p.b));
}
template <class A, class T, class S, class F>
SMAX_INLINE xsimd::batch<T, A> load_as_partial(const paired_source<S, F>& p, std::size_t rem, T fill) noexcept {
  return p.f(load_as_partial<A, T>(p.a, rem, fill), load_as_partial<A, T>(p.b, rem, fill));
}
template <class A, std::size_t U, class T, class S, class F>
SMAX_INLINE void prefetch_as(const paired_source<S, F>& p) noexcept {
  prefetch_as<A, U, T>(p.a);
  prefetch_as<A, U, T>(p.b);
}
// The bytes a source reads per element.
template <class S>
constexpr std::size_t source_bytes(const S*) noexcept {
  return sizeof(S);
}
template <class S, class F>
constexpr std::size_t source_bytes(const paired_source<S, F>&) noexcept {
  return 2 * sizeof(S);
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

// The running total of a sum, per lane, fed with block sums (add), rescaled
// by per-lane factors (scale, for the single-pass algorithms), read as
// rounded lanes (value) or as one double (sum, dot).
//
// double: a per-lane Neumaier sum, total + carry.
// float: each lane kept in double. A float Neumaier total is not enough for
// n near 2^31: its carry, itself a float, accumulates one rounding per block
// (about n / 1024 of them), and with a periodic input those roundings do not
// cancel (4.7e-6 relative at n = 2^31 + 4099, tests/test_huge.cpp). In double,
// 2^21 additions of relative error 2^-53 stay below 2^-32; the cost is a
// widening add of W lanes per block (every 1024 elements on AVX-512).
template <class A, class T>
struct compensated {
  using B = xsimd::batch<T, A>;
  B total = B(T(0));
  B carry = B(T(0));
  SMAX_INLINE void add(B v) noexcept {
    const B t = total + v;
    const auto ge = xsimd::abs(total) >= xsimd::abs(v);
    const B big = xsimd::select(ge, total, v);
    const B small = xsimd::select(ge, v, total);
    // The error, a multiple of small's ulp, is normal (or 0) when |small| >=
    // 2^53 min; below, it could be subnormal, and is dropped (it is < 2^-969).
    const auto keep = xsimd::abs(small) >= B(std::numeric_limits<T>::min() * T(0x1p53));
    carry += (xsimd::select(keep, big, t) - t) + xsimd::select(keep, small, B(T(0)));
    total = t;
  }
  // (mul_normal: a total that becomes negligible is 0, never a subnormal)
  SMAX_INLINE void scale(B f) noexcept {
    total = mul_normal<A, T>(total, f);
    carry = mul_normal<A, T>(carry, f);
  }
  SMAX_INLINE B value() const noexcept { return total + carry; }
  double sum() const noexcept { return hsum<A>(value()); }
  // sum over lanes of value_i * f_i
  double dot(B f) const noexcept { return hsum<A>(mul_normal<A, T>(value(), f)); }
};

template <class A>
struct compensated<A, float> {
  using B = xsimd::batch<float, A>;
  static constexpr std::size_t W = B::size;
  double lane[W];
  compensated() noexcept {
    for (std::size_t i = 0; i < W; ++i) lane[i] = 0;
  }
  SMAX_INLINE void add(B v) noexcept {
    alignas(64) float b[W];
    v.store_aligned(b);
    for (std::size_t i = 0; i < W; ++i) lane[i] += static_cast<double>(b[i]);
  }
  SMAX_INLINE void scale(B f) noexcept {
    alignas(64) float b[W];
    f.store_aligned(b);
    for (std::size_t i = 0; i < W; ++i) lane[i] *= static_cast<double>(b[i]);
  }
  SMAX_INLINE B value() const noexcept {
    alignas(64) float b[W];
    for (std::size_t i = 0; i < W; ++i) b[i] = static_cast<float>(lane[i]);
    return B::load_aligned(b);
  }
  double sum() const noexcept {
    double d[W];
    for (std::size_t i = 0; i < W; ++i) d[i] = lane[i];
    for (std::size_t w = W; w > 1; w /= 2)
      for (std::size_t i = 0; i < w / 2; ++i) d[i] = d[2 * i] + d[2 * i + 1];
    return d[0];
  }
  double dot(B f) const noexcept {
    alignas(64) float b[W];
    f.store_aligned(b);
    double d[W];
    for (std::size_t i = 0; i < W; ++i) d[i] = lane[i] * static_cast<double>(b[i]);
    for (std::size_t w = W; w > 1; w /= 2)
      for (std::size_t i = 0; i < w / 2; ++i) d[i] = d[2 * i] + d[2 * i + 1];
    return d[0];
  }
};

// The extremum pass: one read of x[0..n) folded into four accumulators by
// fold(acc, v) (xsimd::max or min), from `fill`, the tail padded with it;
// seen(v0, v1, v2, v3) and seen(v) watch every loaded vector (padding
// included) for what the fold may drop: x86 max and min return their second
// operand when either is NaN. (seen takes a whole chunk at once so that its
// own running state adds one step per chunk to the loop's dependency chain.)
// x may be 16-bit (S), T float: each vector is widened as it is loaded.
template <class A, class S, class T, class Fold, class Seen>
SMAX_INLINE xsimd::batch<T, A> extremum_pass(const S* x, std::size_t n, T fill, Fold&& fold, Seen&& seen) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  B m0(fill), m1(fill), m2(fill), m3(fill);
  std::size_t i = 0;
  const bool far = read_loop_prefetches<S>(n);
  for (; i + 4 * W <= n; i += 4 * W) {
    if (far) prefetch_as<A, 4, T>(x + i);
    const B v0 = load_as<A, T>(x + i), v1 = load_as<A, T>(x + i + W);
    const B v2 = load_as<A, T>(x + i + 2 * W), v3 = load_as<A, T>(x + i + 3 * W);
    m0 = fold(m0, v0);
    m1 = fold(m1, v1);
    m2 = fold(m2, v2);
    m3 = fold(m3, v3);
    seen(v0, v1, v2, v3);
  }
  for (; i + W <= n; i += W) {
    const B v = load_as<A, T>(x + i);
    m0 = fold(m0, v);
    seen(v);
  }
  if (i < n) {
    const B v = load_as_partial<A, T>(x + i, n - i, fill);
    m1 = fold(m1, v);
    seen(v);
  }
  return fold(fold(m0, m1), fold(m2, m3));
}

struct ignore_vectors {
  template <class... B>
  SMAX_INLINE void operator()(const B&...) const noexcept {}
};
struct vector_max {
  template <class B>
  SMAX_INLINE B operator()(B a, B b) const noexcept {
    return xsimd::max(a, b);
  }
};
struct vector_min {
  template <class B>
  SMAX_INLINE B operator()(B a, B b) const noexcept {
    return xsimd::min(a, b);
  }
};

// Max over x[0..n-1] (-inf for n = 0). A NaN met may have been dropped by
// x86's max (see extremum_pass); the callers' sums catch it instead.
template <class A, class S, class T = compute_t<S>>
T reduce_max(const S* x, std::size_t n) noexcept {
  return hmax<A>(extremum_pass<A>(x, n, -std::numeric_limits<T>::infinity(), vector_max{}, ignore_vectors{}));
}

// Min over x[0..n-1] (+inf for n = 0; a NaN as for reduce_max).
template <class A, class T>
T reduce_min(const T* x, std::size_t n) noexcept {
  // -hmax(-v): hmax's NaN rule for the minimum.
  return -hmax<A>(-extremum_pass<A>(x, n, std::numeric_limits<T>::infinity(), vector_min{}, ignore_vectors{}));
}

// Max and min over x[0..n-1] in one read (-inf and +inf for n = 0; a NaN
// as for reduce_max). For data in cache: two accumulators of each, fed
// pairwise (extremum_pass with a min watch took 1.4x as long: AMD EPYC
// Zen 5, 64K floats).
// (x may be 16-bit, T float, widened as loaded.)
template <class A, class T, class S>
void reduce_max_min(const S* x, std::size_t n, T& mx, T& mn) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr T inf = std::numeric_limits<T>::infinity();
  B hi0(-inf), hi1(-inf), lo0(inf), lo1(inf);
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    const B v0 = load_as<A, T>(x + i), v1 = load_as<A, T>(x + i + W);
    const B v2 = load_as<A, T>(x + i + 2 * W), v3 = load_as<A, T>(x + i + 3 * W);
    hi0 = xsimd::max(hi0, xsimd::max(v0, v1));
    hi1 = xsimd::max(hi1, xsimd::max(v2, v3));
    lo0 = xsimd::min(lo0, xsimd::min(v0, v1));
    lo1 = xsimd::min(lo1, xsimd::min(v2, v3));
  }
  for (; i + W <= n; i += W) {
    const B v = load_as<A, T>(x + i);
    hi0 = xsimd::max(hi0, v);
    lo0 = xsimd::min(lo0, v);
  }
  mx = hmax<A>(xsimd::max(hi0, hi1));
  mn = -hmax<A>(-xsimd::min(lo0, lo1));
  for (; i < n; ++i) {
    const T v = static_cast<T>(x[i]);
    mx = std::max(mx, v);
    mn = std::min(mn, v);
  }
}

// Max over x[0..n-1], or NaN when x holds one. NaN is tracked as
// "not v == v": xsimd 8.1's v != v is an ordered compare on AVX / AVX-512
// (false for NaN) and true on SSE2.
// (x may be 16-bit, widened as loaded.)
template <class A, class S, class T = compute_t<S>>
T max_or_nan(const S* x, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  struct nan_watch {
    xsimd::batch_bool<T, A> ok = B(T(0)) == B(T(0));  // all true
    SMAX_INLINE void operator()(B v) noexcept { ok = ok & (v == v); }
    SMAX_INLINE void operator()(B v0, B v1, B v2, B v3) noexcept {
      ok = ok & ((v0 == v0) & (v1 == v1)) & ((v2 == v2) & (v3 == v3));
    }
  } watch;
  const B m = extremum_pass<A>(x, n, -std::numeric_limits<T>::infinity(), vector_max{}, watch);
  if (!xsimd::all(watch.ok)) return std::numeric_limits<T>::quiet_NaN();
  return hmax<A>(m);
}

// The loops that store through a T* run a local copy of their functor:
// its members (the vector constants of an exp) are then known not to alias
// the stores and stay in registers. Read through the caller's object they
// were reloaded for every vector (a vector type may alias any store):
// sigmoid_attention 1.2x slower (docs/tuning.md, "Functor copies").
template <class F>
using local_copy_t = std::decay_t<F>;

// y[i] = f(x[i], mask[i]) for i < n (none when y is null; mask[i] is 0
// without Mask) and the max of the y, in one read: a pass 1 that forms
// what the softmax then runs on (the attention scores, MultiMax's
// modulator). NaN is caught by the callers' sums, as reduce_max's callers
// do.
// (S, M: T, or x 16-bit with T float, each vector widened as loaded)
template <class A, class T, bool Mask, class F, class S, class M>
SMAX_FLATTEN T transform_max(const S* x, const M* mask, T* y, std::size_t n, const F& f_arg) noexcept {
  const local_copy_t<F> f(f_arg);
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  B m0(ninf), m1(ninf);
  const auto load_m = [&](std::size_t i) { return Mask ? load_as<A, T>(mask + i) : B(T(0)); };
  // (without a mask, measured no faster on Zen 5: docs/tuning.md, "Rows ahead")
  const bool far = Mask && read_loop_prefetches<T>(n);
  std::size_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    if (far) {
      prefetch_as<A, 2, T>(x + i);
      prefetch_as<A, 2, T>(mask + i);
    }
    const B z0 = f(load_as<A, T>(x + i), load_m(i));
    const B z1 = f(load_as<A, T>(x + i + W), load_m(i + W));
    if (y) {
      z0.store_unaligned(y + i);
      z1.store_unaligned(y + i + W);
    }
    m0 = xsimd::max(m0, z0);
    m1 = xsimd::max(m1, z1);
  }
  for (; i + W <= n; i += W) {
    const B z = f(load_as<A, T>(x + i), load_m(i));
    if (y) z.store_unaligned(y + i);
    m0 = xsimd::max(m0, z);
  }
  if (i < n) {
    const std::size_t r = n - i;
    const B z = f(load_as_partial<A, T>(x + i, r, T(0)), Mask ? load_as_partial<A, T>(mask + i, r, T(0)) : B(T(0)));
    if (y) store_partial<A>(y + i, r, z);
    m1 = xsimd::max(m1, xsimd::select(lane_index<A, T>() < B(static_cast<T>(r)), z, B(ninf)));
  }
  return hmax<A>(xsimd::max(m0, m1));
}

// The rescaling sums' step (online and two-pass softmax, softpick, ssmax):
// each lane sums its terms against a reference (a running max, or an
// exponent E for 2^E) that moves only where `moved`, to `candidate`; the
// lane's partial sums are then multiplied by factor(old, new) (e^(old - new)
// or 2^(old - new)). mul_normal: terms that fall far below the new reference
// become 0, never a subnormal. False (nothing done) when no lane moved.
template <class A, class T, std::size_t U, class Factor>
SMAX_INLINE bool move_reference(xsimd::batch_bool<T, A> moved, xsimd::batch<T, A> candidate,
                                xsimd::batch<T, A>& ref, xsimd::batch<T, A> (&acc)[U], compensated<A, T>& total,
                                Factor&& factor) noexcept {
  using B = xsimd::batch<T, A>;
  if (!xsimd::any(moved)) return false;
  const B next = xsimd::select(moved, candidate, ref);
  const B f = factor(ref, next);
#pragma GCC unroll 16
  for (std::size_t u = 0; u < U; ++u) acc[u] = mul_normal<A, T>(acc[u], f);
  total.scale(f);
  ref = next;
  return true;
}

// Lanes of vector u (of W lanes) that hold data when r elements remain:
// the tail chunk's loads.
constexpr std::size_t live_lanes(std::size_t r, std::size_t u, std::size_t W) noexcept {
  return r > u * W ? (r - u * W < W ? r - u * W : W) : 0;
}

// Adds four partial sums to total as (a0 + a1) + (a2 + a3) and clears them:
// a rescaling sum's block end.
template <class A, class T>
SMAX_INLINE void drain_into(compensated<A, T>& total, xsimd::batch<T, A> (&acc)[4]) noexcept {
  total.add((acc[0] + acc[1]) + (acc[2] + acc[3]));
#pragma GCC unroll 4
  for (std::size_t u = 0; u < 4; ++u) acc[u] = xsimd::batch<T, A>(T(0));
}

// Calls chunk(v) on x[0..n) four vectors at a time (v: B[4]), the last
// chunk padded with `pad`; prefetches ahead when x is out of cache. x may
// be 16-bit (batches of float, each widened as loaded).
template <class A, class S, class Chunk>
SMAX_INLINE void for_each_chunk4(const S* x, std::size_t n, compute_t<S> pad, Chunk&& chunk) noexcept {
  using T = compute_t<S>;
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  const bool far = read_loop_prefetches<S>(n);
  for (; i + 4 * W <= n; i += 4 * W) {
    if (far) prefetch_as<A, 4, T>(x + i);
    B v[4] = {load_as<A, T>(x + i), load_as<A, T>(x + i + W), load_as<A, T>(x + i + 2 * W),
              load_as<A, T>(x + i + 3 * W)};
    chunk(v);
  }
  if (i < n) {
    B v[4];
#pragma GCC unroll 4
    for (std::size_t u = 0; u < 4; ++u) v[u] = load_as_partial<A, T>(x + i + u * W, live_lanes(n - i, u, W), pad);
    chunk(v);
  }
}

// Pass 1 of the scaled two-pass kernels (ssmax, gumbel_softmax): the sum
// over all elements of p 2^K, for terms given as pairs (p in [0, 2), K
// integer-valued), kept per lane against a power-of-two reference 2^E. E
// moves up only when a chunk's K exceeds it by more than `slack`, so a
// lane's terms stay below 2^17 and every rescale is an exact power of two;
// blocks of chunks go into a compensated total, so the error does not grow
// with n. get(i, v0, v1, v2, v3) gives the input of elements [i, i + 4 W)
// (the last chunk may be partial: its lanes past n contribute nothing);
// term(v, K) returns p and sets K (K >= kfloor; NaN input must give a NaN
// p or K; with nan_shows::in_term, a NaN p). Everything lives in locals of
// this one function: kept in a struct, the accumulators were stored and
// reloaded every chunk (a batch may alias any float, so the compiler cannot
// keep them in registers across the loads of x).
struct pow2_sum {
  double sum;   // the total is sum * 2^emax
  double emax;
  double kmax;  // largest K met
  bool nan;     // a NaN was met
};

// Where a NaN input shows in term(v, K)'s result: in K (the loop keeps a
// running sum of the K to see it), or always in p (no such sum needed).
enum class nan_shows { in_exponent, in_term };

template <class A, class T, nan_shows Nan = nan_shows::in_exponent, class Get, class Term>
SMAX_FLATTEN pow2_sum pow2_rescaled_sum(std::size_t n, T e0, T kfloor, Get&& get, Term&& term) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr T slack = T(16);
  B E(e0), kmax(kfloor), ksum(T(0));
  B acc[4] = {B(T(0)), B(T(0)), B(T(0)), B(T(0))};
  compensated<A, T> total;
  std::size_t chunks = 0;
  const auto feed = [&](B v0, B v1, B v2, B v3, std::size_t valid) {
    B k[4];
    B p[4] = {term(v0, k[0]), term(v1, k[1]), term(v2, k[2]), term(v3, k[3])};
    if (valid < 4 * W) {
      const B idx = lane_index<A, T>();
#pragma GCC unroll 4
      for (std::size_t u = 0; u < 4; ++u) {
        const auto live = idx < B(static_cast<T>(live_lanes(valid, u, W)));
        p[u] = xsimd::select(live, p[u], B(T(0)));
        k[u] = xsimd::select(live, k[u], B(kfloor));
      }
    }
    // A NaN K may be dropped by x86's max (it returns its second operand
    // when either is NaN) and turned into a 0 term by the non-AVX-512 ldexp:
    // a running sum of the K keeps it (|K| < 6000: no overflow; +inf input
    // gives K = +inf, which kmax shows). A term that makes p NaN for NaN
    // input needs no guard (nan_shows::in_term): the NaN p stays in its lane.
    if constexpr (Nan == nan_shows::in_exponent) ksum += (k[0] + k[1]) + (k[2] + k[3]);
    const B km = xsimd::max(xsimd::max(k[0], k[1]), xsimd::max(k[2], k[3]));
    kmax = xsimd::max(kmax, km);
    move_reference<A, T>(km > E + B(slack), km, E, acc, total,
                         [](B old, B next) { return ldexp_normal<A, T>(B(T(1)), old - next); });
#pragma GCC unroll 4
    for (std::size_t u = 0; u < 4; ++u) acc[u] += ldexp_normal<A, T>(p[u], k[u] - E);
    if (++chunks == loop_shape<A>::block_chunks) {
      drain_into(total, acc);
      chunks = 0;
    }
  };
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    B v0, v1, v2, v3;
    get(i, v0, v1, v2, v3);
    feed(v0, v1, v2, v3, 4 * W);
  }
  if (i < n) {
    B v0, v1, v2, v3;
    get(i, v0, v1, v2, v3);
    feed(v0, v1, v2, v3, n - i);
  }
  drain_into(total, acc);
  pow2_sum r;
  const T em = hmax<A>(E);
  const double raw = total.sum();  // before the rescale flushes far lanes
  const double ks = hsum<A>(ksum);
  r.sum = total.dot(ldexp_normal<A, T>(B(T(1)), E - B(em)));
  r.emax = em;
  r.kmax = hmax<A>(kmax);
  r.nan = !(raw == raw) || !(ks == ks) || !(r.sum == r.sum);
  return r;
}

// Writes a sequence of values, produced in order from y[0] on, to y with
// streaming stores at y's vector-aligned positions (y + head is aligned,
// stream_output). The values go through a small buffer in L1 and out a
// chunk at a time (stream_chunk_bytes), from y + head on, at any offset
// from where the producer's vectors start: so the producer keeps the lanes
// of x (sum_map's sum is then the same, bit for bit, at any alignment of
// y). Elements below head and the last partial vector are written with
// ordinary stores.
template <class A, class T>
struct stream_writer {
  using B = xsimd::batch<T, A>;
  static constexpr std::size_t W = B::size;
  // 4 KiB: the flush reads the staged values back at an offset from how
  // they were stored; with 1 KiB chunks those stores were often still in
  // the store buffer (a failed store-to-load forward per vector).
  static constexpr std::size_t C = 4 * stream_chunk_bytes / sizeof(T);
  T* y;
  std::size_t head;
  std::size_t s0 = 0, cnt = 0;  // stage holds y[s0 .. s0 + cnt)
  alignas(64) T stage[C + W];

  stream_writer(T* out, std::size_t h) noexcept : y(out), head(h) {}
  SMAX_INLINE void put(B e) noexcept {
    e.store_unaligned(stage + cnt);
    cnt += W;
    if (cnt >= C) flush();
  }
  // The first r (< W) lanes of e (the stage has room for a whole vector:
  // cnt < C here).
  SMAX_INLINE void put_partial(B e, std::size_t r) noexcept {
    e.store_unaligned(stage + cnt);
    cnt += r;
  }
  // Every whole aligned vector staged goes out; what is left (less than a
  // vector) moves to the front.
  SMAX_INLINE void flush() noexcept {
    std::size_t j = s0;
    const std::size_t end = s0 + cnt;
    for (; j < head && j < end; ++j) y[j] = stage[j - s0];
    for (; j + W <= end; j += W) store_stream<A>(y + j, B::load_unaligned(stage + (j - s0)));
    for (std::size_t k = j; k < end; ++k) stage[k - j] = stage[k - s0];
    s0 = j;
    cnt = end - j;
  }
  // The rest, then the fence.
  void finish() noexcept {
    flush();
    for (std::size_t k = 0; k < cnt; ++k) y[s0 + k] = stage[k];
    cnt = 0;
    stream_fence<A>();
  }
};

namespace sum_map_impl {

// How sum_map's values reach y.
enum class sink { ordinary, stream_aligned, stream_writer };

// The body of sum_map on x[0..n-1]: the values go to y with ordinary
// stores, with streaming stores (y vector-aligned), or through a
// stream_writer (in order). Adds into total.
template <class A, sink S, class T, class X, class F, class Keep>
SMAX_INLINE void run(X x, T* y, std::size_t n, F& f, Keep& keep, compensated<A, T>& total,
                     std::size_t head) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t U = loop_shape<A>::unroll;
  constexpr std::size_t block = U * W * loop_shape<A>::block_chunks;
  // A local object (its address never escapes): the compiler knows that
  // its stores do not alias x or the sums (a pointer parameter cost the
  // misaligned streaming path 30-50%).
  struct none {
    none(T*, std::size_t) noexcept {}
    void put(xsimd::batch<T, A>) noexcept {}
    void put_partial(xsimd::batch<T, A>, std::size_t) noexcept {}
    void finish() noexcept {}
  };
  using writer_type = std::conditional_t<S == sink::stream_writer, stream_writer<A, T>, none>;
  writer_type writer(y, head);
  const auto put = [&](std::size_t i, B e) {
    if constexpr (S == sink::stream_writer)
      writer.put(e);
    else if constexpr (S == sink::stream_aligned)
      store_stream<A>(y + i, e);
    else
      e.store_unaligned(y + i);
  };
  std::size_t i = 0;
  const bool far = n * source_bytes(x) >= prefetch_min_bytes;
  while (i + U * W <= n) {
    B acc[U];
#pragma GCC unroll 16
    for (std::size_t u = 0; u < U; ++u) acc[u] = B(T(0));
    const std::size_t end = (n - i >= block) ? i + block : i + ((n - i) / (U * W)) * (U * W);
    for (; i < end; i += U * W) {
      if (far) prefetch_as<A, U, T>(x + i);
      B v[U], e[U];
#pragma GCC unroll 16
      for (std::size_t u = 0; u < U; ++u) {
        v[u] = load_as<A, T>(x + i + u * W);
        e[u] = f(v[u]);
      }
      if (y) {
#pragma GCC unroll 16
        for (std::size_t u = 0; u < U; ++u) put(i + u * W, keep(v[u], e[u]));
      }
#pragma GCC unroll 16
      for (std::size_t u = 0; u < U; ++u) acc[u] += e[u];
    }
    // Pairwise: the U accumulators are added as a balanced tree.
#pragma GCC unroll 16
    for (std::size_t w = U / 2; w >= 1; w /= 2) {
#pragma GCC unroll 16
      for (std::size_t u = 0; u < w; ++u) acc[u] = acc[u] + acc[u + w];
    }
    total.add(acc[0]);
  }
  B rest(T(0));
  for (; i + W <= n; i += W) {
    const B v = load_as<A, T>(x + i);
    const B e = f(v);
    if (y) put(i, keep(v, e));
    rest += e;
  }
  if (i < n) {
    const std::size_t r = n - i;
    const B v = load_as_partial<A, T>(x + i, r, T(0));
    const B e = f(v);
    if constexpr (S == sink::stream_writer)
      writer.put_partial(keep(v, e), r);
    else if (y)
      store_partial<A>(y + i, r, keep(v, e));
    rest += xsimd::select(lane_index<A, T>() < B(static_cast<T>(r)), e, B(T(0)));
  }
  total.add(rest);
  if constexpr (S == sink::stream_writer) writer.finish();
}

}  // namespace sum_map_impl

// The value sum_map stores by default: the term it sums.
struct store_term {
  template <class B>
  SMAX_INLINE B operator()(const B&, const B& e) const noexcept {
    return e;
  }
};

// Sum over i of f(x[i]) (f: batch -> batch), in double; when `y` is not null
// also stores keep(x[i], f(x[i])) (by default f(x[i]) itself) to y[i], each
// after its own load, so y may be x (the reload variant; streaming stores
// when the output is large, see stream_min_bytes). Tail lanes are masked out
// of the sum, so f may return anything for the padding. x may be 16-bit (T
// float), or a paired_source.
template <class A, class T, class X, class F, class Keep = store_term>
SMAX_FLATTEN double sum_map(X x, T* y, std::size_t n, F&& f_arg, Keep&& keep_arg = Keep{}) noexcept {
  local_copy_t<F> f(f_arg);
  local_copy_t<Keep> keep(keep_arg);
  static_assert((loop_shape<A>::unroll & (loop_shape<A>::unroll - 1)) == 0, "unroll must be a power of two");
  compensated<A, T> total;
  std::size_t head = 0;
  if (y && stream_output<A>(y, n, head)) {
    // The lanes of the sum follow x either way, so y's alignment changes no
    // bit. An aligned y is streamed to directly; a misaligned one goes
    // through stream_writer (about 10% slower: docs/tuning.md, "Streaming
    // stores").
    if (head == 0) {
      sum_map_impl::run<A, sum_map_impl::sink::stream_aligned>(x, y, n, f, keep, total, 0);
      stream_fence<A>();
    } else {
      sum_map_impl::run<A, sum_map_impl::sink::stream_writer>(x, y, n, f, keep, total, head);  // fences
    }
  } else {
    sum_map_impl::run<A, sum_map_impl::sink::ordinary>(x, y, n, f, keep, total, 0);
  }
  return total.sum();
}

namespace map_impl {

template <class A, bool Stream, bool Staged, class T, class F>
SMAX_INLINE void run(const T* x, T* y, std::size_t n, F& f) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t U = loop_shape<A>::unroll;
  const auto put = [y](std::size_t i, B e) {
    if (Stream)
      store_stream<A>(y + i, e);
    else
      e.store_unaligned(y + i);
  };
  std::size_t i = 0;
  if constexpr (Stream && Staged && is_avx512_v<A>) {
    // A chunk at a time (stream_chunk_bytes); all of a chunk's loads come
    // before its stores, so y may be x.
    constexpr std::size_t C = stream_chunk_bytes / sizeof(T);
    static_assert(C % (U * W) == 0, "a stream chunk must be whole iterations");
    alignas(64) T stage[C];
    for (; i + C <= n; i += C) {
      for (std::size_t k = 0; k < C; k += U * W) {
        prefetch_ahead<A, U>(x + i + k);
        B v[U];
#pragma GCC unroll 16
        for (std::size_t u = 0; u < U; ++u) v[u] = B::load_unaligned(x + i + k + u * W);
#pragma GCC unroll 16
        for (std::size_t u = 0; u < U; ++u) f(v[u]).store_aligned(stage + k + u * W);
      }
#pragma GCC unroll 16
      for (std::size_t k = 0; k < C; k += W) store_stream<A>(y + i + k, B::load_aligned(stage + k));
    }
  }
  for (; i + U * W <= n; i += U * W) {
    if (Stream) prefetch_ahead<A, U>(x + i);
    // All loads first: y may be x (in place).
    B v[U];
#pragma GCC unroll 16
    for (std::size_t u = 0; u < U; ++u) v[u] = B::load_unaligned(x + i + u * W);
#pragma GCC unroll 16
    for (std::size_t u = 0; u < U; ++u) put(i + u * W, f(v[u]));
  }
  for (; i + W <= n; i += W) put(i, f(B::load_unaligned(x + i)));
  if (i < n) store_partial<A>(y + i, n - i, f(load_partial<A>(x + i, n - i, T(0))));
}

}  // namespace map_impl

// y[i] = f(x[i]); x == y allowed. Large outputs are written with streaming
// stores (see stream_min_bytes); Staged (map<A, staged>) for a heavy f: see
// stream_chunk_bytes.
template <class A, bool Staged = false, class T, class F>
SMAX_FLATTEN void map(const T* x, T* y, std::size_t n, F&& f_arg) noexcept {
  local_copy_t<F> f(f_arg);
  std::size_t head = 0;
  if (stream_output<A>(y, n, head)) {
    if (head) store_partial<A>(y, head, f(load_partial<A>(x, head, T(0))));
    map_impl::run<A, true, Staged>(x + head, y + head, n - head, f);
    stream_fence<A>();
  } else {
    map_impl::run<A, false, false>(x, y, n, f);
  }
}

// map with streaming stores at any n (where A has them) and no fence: for
// one block of an output that as a whole is too large for the cache
// (batched.hpp's long rows). The caller fences (stream_fence) once its
// blocks are written.
template <class A, bool Staged = false, class T, class F>
SMAX_FLATTEN void map_streamed(const T* x, T* y, std::size_t n, F&& f_arg) noexcept {
  local_copy_t<F> f(f_arg);
  std::size_t head = 0;
  if (stream_output<A>(y, n, head, /*any_size=*/true)) {
    if (head) store_partial<A>(y, head, f(load_partial<A>(x, head, T(0))));
    map_impl::run<A, true, Staged>(x + head, y + head, n - head, f);
  } else {
    map_impl::run<A, false, false>(x, y, n, f);
  }
}

template <class T>
void fill(T* y, std::size_t n, T v) noexcept {
  for (std::size_t i = 0; i < n; ++i) y[i] = v;
}

// fill with A's vector stores: the plain loop above compiles to memset,
// whose rep stosb made the attention forward's masked tails 10% slower on
// Zen 5 (docs/tuning.md, "Masked tails"; the backward's were faster).
template <class A, class T>
void vector_fill(T* y, std::size_t n, T v) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  const B b(v);
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    b.store_unaligned(y + i);
    b.store_unaligned(y + i + W);
    b.store_unaligned(y + i + 2 * W);
    b.store_unaligned(y + i + 3 * W);
  }
  for (; i + W <= n; i += W) b.store_unaligned(y + i);
  if (i < n) store_partial<A>(y + i, n - i, b);
}

}  // namespace detail
}  // namespace smax
