// smax — softmax and log_softmax of 16-bit logits (bf16, fp16), to 16-bit or
// float outputs. The float kernels' passes of softmax.hpp read x as 16-bit
// (widening each vector as loaded) or run on blocks widened into an L1
// buffer; the final pass computes and rounds each output once, straight
// into y. The sums are float per block and double across blocks; no 16-bit
// value is ever an intermediate. Softmax to 16-bit y takes the cheaper exp
// that its rounding allows (exp_accuracy, exp.hpp; not in the rare
// |max| > split_limit form); float y and log_softmax the full one.
//
//   n <= 2^18, softmax, any algorithm:
//                     three-pass reload on x: max; the float terms stored
//                     (on the stack up to half_block, else in a per-thread
//                     buffer) and summed; y = term / s
//   two_pass, online, automatic (longer rows):
//                     pass 1: two_pass_sum on x, widened as loaded; pass 2:
//                     y = e^x 2^-Emax / s. Reads 2n, writes n of 16-bit
//                     data: the 16-bit rw2 roofline.
//   three_pass_* (or anything pass 1 cannot take: NaN, inf, |x| beyond the
//                     single-pass range), and
//                     log_softmax at any n: max; sum; write (recompute).
//                     Reads 3n, writes n.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <new>

#include "backward.hpp"
#include "half.hpp"
#include "softmax.hpp"

namespace smax {
namespace detail {

// Elements staged per block: 8 KiB of float, in L1 beside the exp's
// constants on every core smax targets.
constexpr std::size_t half_block = 2048;
// Rows up to this many elements (1 MiB of float terms: L2 on the cores smax
// targets) run softmax_half_reload.
constexpr std::size_t half_whole_row = std::size_t(1) << 18;

// softmax_nonfinite for 16-bit x (see softmax.hpp): NaN -> all NaN, +inf
// entries share the mass, all -inf -> 0 (log: -inf).
template <class H, class Y>
void softmax_nonfinite_half(const H* x, Y* y, std::size_t n, result_form form) noexcept {
  const bool log = form == result_form::logs;
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::size_t n_posinf = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = to_float(x[i]);
    if (v != v) return fill(y, n, from_float<Y>(std::numeric_limits<float>::quiet_NaN()));
    n_posinf += (v == inf);
  }
  const Y rest = from_float<Y>(log ? -inf : 0.0f);
  if (n_posinf == 0) return fill(y, n, rest);
  const Y share = from_float<Y>(log ? static_cast<float>(-std::log(static_cast<double>(n_posinf)))
                                    : static_cast<float>(1.0 / static_cast<double>(n_posinf)));
  for (std::size_t i = 0; i < n; ++i) y[i] = (to_float(x[i]) == inf) ? share : rest;
}

template <class A, narrow_input In, class Y>
SMAX_INLINE void put_float(Y* p, xsimd::batch<float, A> v) noexcept {
  if constexpr (std::is_same<Y, float>::value)
    v.store_unaligned(p);
  else
    narrow<A, In>(p, v);
}

// y[i] = f(float(x[i])), rounded once to Y. x == y allowed (H == Y): every
// load of an iteration (or of a streamed chunk) comes before its stores. In:
// what f returns (narrow_input).
template <class A, narrow_input In, class H, class Y, class F>
SMAX_INLINE void map_half_plain(const H* x, Y* y, std::size_t n, F& f, bool far) noexcept {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    if (far) prefetch_as<A, 4, float>(x + i);
    B v[4];
#pragma GCC unroll 4
    for (std::size_t u = 0; u < 4; ++u) v[u] = widen<A>(x + i + u * W);
    if constexpr (narrow_pair_in_cache_v<A, Y>) {
      // one whole-vector store per two vectors' values
      float* d = reinterpret_cast<float*>(y + i);
      narrow_pair<A, In, Y>(f(v[0]), f(v[1])).store_unaligned(d);
      narrow_pair<A, In, Y>(f(v[2]), f(v[3])).store_unaligned(d + W);
    } else {
#pragma GCC unroll 4
      for (std::size_t u = 0; u < 4; ++u) put_float<A, In>(y + i + u * W, f(v[u]));
    }
  }
  for (; i + W <= n; i += W) put_float<A, In>(y + i, f(widen<A>(x + i)));
  if (i < n) {
    alignas(64) H in[W] = {};
    alignas(64) Y out[W];
    std::memcpy(in, x + i, (n - i) * sizeof(H));
    put_float<A, In>(out, f(widen<A>(in)));
    std::memcpy(y + i, out, (n - i) * sizeof(Y));
  }
}

template <class A, narrow_input In, class H, class Y, class F>
SMAX_FLATTEN void map_half(const H* x, Y* y, std::size_t n, F&& f_arg) noexcept {
  local_copy_t<F> f(f_arg);  // (loops.hpp)
  using B = xsimd::batch<float, A>;
  constexpr std::size_t W = B::size;
  const bool far = n * sizeof(H) >= prefetch_min_bytes;
  if constexpr (has_stream_v<A>) {
    // Large outputs: non-temporal stores of whole vectors (no read for
    // ownership). 16-bit y: each pair of vectors rounded and packed into
    // one (narrow_pair) and streamed as it is computed; float y, or where
    // there is no narrow_pair: through a chunk staged in L1 as map<A,
    // staged> does. Why: docs/half.md, "Streaming 16-bit outputs".
    constexpr std::size_t align = W * sizeof(float);
    const auto addr = reinterpret_cast<std::uintptr_t>(y);
    if (n * sizeof(Y) >= stream_min_bytes && addr % sizeof(Y) == 0) {
      const std::size_t head = ((align - addr % align) % align) / sizeof(Y);
      map_half_plain<A, In>(x, y, head, f, /*far=*/false);
      std::size_t i = head;
      if constexpr (!std::is_same<Y, float>::value && has_narrow_pair_v<A, Y>) {
        for (; i + 4 * W <= n; i += 4 * W) {
          prefetch_as<A, 4, float>(x + i);
          B v[4];
#pragma GCC unroll 4
          for (std::size_t u = 0; u < 4; ++u) v[u] = widen<A>(x + i + u * W);
          float* d = reinterpret_cast<float*>(y + i);  // y + i: vector-aligned
          store_stream<A>(d, narrow_pair<A, In, Y>(f(v[0]), f(v[1])));
          store_stream<A>(d + W, narrow_pair<A, In, Y>(f(v[2]), f(v[3])));
        }
      } else {
        constexpr std::size_t C = stream_chunk_bytes / sizeof(Y);
        static_assert(C % (4 * W) == 0, "a chunk must be whole iterations");
        alignas(64) Y stage[C];
        for (; i + C <= n; i += C) {
          for (std::size_t k = 0; k < C; k += 4 * W) {
            prefetch_as<A, 4, float>(x + i + k);
            B v[4];
#pragma GCC unroll 4
            for (std::size_t u = 0; u < 4; ++u) v[u] = widen<A>(x + i + k + u * W);
#pragma GCC unroll 4
            for (std::size_t u = 0; u < 4; ++u) put_float<A, In>(stage + k + u * W, f(v[u]));
          }
          const float* s = reinterpret_cast<const float*>(stage);
          float* d = reinterpret_cast<float*>(y + i);
#pragma GCC unroll 16
          for (std::size_t b = 0; b < C * sizeof(Y) / sizeof(float); b += W) store_stream<A>(d + b, B::load_aligned(s + b));
        }
      }
      stream_fence<A>();
      return map_half_plain<A, In>(x + i, y + i, n - i, f, /*far=*/false);
    }
  }
  map_half_plain<A, In>(x, y, n, f, far);
}

// How accurately the terms of an output rounded to Y are computed
// (exp_accuracy): the float contract for float outputs.
template <class Y>
constexpr exp_accuracy output_exp_accuracy = std::is_same<Y, bf16>::value   ? exp_accuracy::bf16_output
                                             : std::is_same<Y, fp16>::value ? exp_accuracy::fp16_output
                                                                            : exp_accuracy::full;

// Calls g(block, offset, length) for x widened a block at a time.
template <class A, class H, class G>
SMAX_INLINE void for_each_widened(const H* x, std::size_t n, G&& g) noexcept {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t W = B::size;
  const bool far = n * sizeof(H) >= prefetch_min_bytes;
  alignas(64) float buf[half_block];
  for (std::size_t o = 0; o < n; o += half_block) {
    const std::size_t len = std::min(half_block, n - o);
    const H* p = x + o;
    std::size_t i = 0;
    for (; i + 4 * W <= len; i += 4 * W) {
      if (far) prefetch_as<A, 4, float>(p + i);
#pragma GCC unroll 4
      for (std::size_t u = 0; u < 4; ++u) widen<A>(p + i + u * W).store_aligned(buf + i + u * W);
    }
    for (; i < len; ++i) buf[i] = to_float(p[i]);
    if (!g(static_cast<const float*>(buf), o, len)) return;
  }
}

// y[i] = f(float(x[i])) rounded once, as map_half, but through blocks of x
// widened into L1 and mapped there by the float map: for an f with many
// live constants (log1p), whose 4-vector interleave in map_half cost more
// (64K bf16 log_stablemax 0.43 against 0.39 ns per element; 64M 0.56
// against 0.52; AMD EPYC Zen 5). Not for a lighter f out of cache: its
// outputs are not streamed (64M bf16 ssmax 0.57 against 0.41-0.45 through
// map_half). x == y allowed: a block is read whole before its outputs are
// written.
template <class A, class H, class F>
void map_half_blocked(const H* x, H* y, std::size_t n, F&& f) noexcept {
  for_each_widened<A>(x, n, [&](const float* block, std::size_t o, std::size_t len) {
    alignas(64) float out[half_block];
    map<A>(block, out, len, f);
    narrow_block<A>(out, y + o, len);
    return true;
  });
}

// For an f of an exp's weight (ssmax, softpick): map_half_blocked where the
// output is not streamed (in cache it measured 2-3% faster: 64K bf16 ssmax
// 0.336 against 0.346 ns per element, softpick 0.449 against 0.457, AMD
// EPYC Zen 5), map_half's streamed stores where it is. In: as map_half's.
template <class A, narrow_input In, class H, class F>
void map_half_weighted(const H* x, H* y, std::size_t n, F&& f) noexcept {
  if (has_stream_v<A> && n * sizeof(H) >= stream_min_bytes)
    map_half<A, In>(x, y, n, f);
  else
    map_half_blocked<A>(x, y, n, f);
}

// Two-pass: pass 1 is two_pass_sum itself, widening each vector as it loads
// it; false (nothing written) when it cannot take x.
template <class A, class H, class Y>
bool softmax_half_two_pass(const H* x, Y* y, std::size_t n) noexcept {
  constexpr exp_accuracy acc = output_exp_accuracy<Y>;
  double s;
  float Emax;
  if (!two_pass_sum<A, acc>(x, n, s, Emax)) return false;
  map_half<A, narrow_input::finite_normal>(
      x, y, n, exp_ref<A, float, acc>(-single_pass_limits<float>::limit, Emax, static_cast<float>(1.0 / s)));
  return true;
}

// Max, sum, write over blocks (softmax_three_pass / log_softmax of
// softmax.hpp, recompute form).
template <class A, class H, class Y>
void softmax_half_three_pass(const H* x, Y* y, std::size_t n, result_form form) noexcept {
  const bool log = form == result_form::logs;
  using B = xsimd::batch<float, A>;
  float m = -std::numeric_limits<float>::infinity();
  for_each_widened<A>(x, n, [&](const float* b, std::size_t, std::size_t len) {
    const float bm = reduce_max<A>(b, len);
    m = (bm != bm) ? bm : std::max(m, bm);
    return m == m;
  });
  if (!is_finite(m)) return softmax_nonfinite_half(x, y, n, form);
  const auto sum = [&](auto&& f) {
    double s = 0;
    for_each_widened<A>(x, n, [&](const float* b, std::size_t, std::size_t len) {
      s += sum_map<A>(b, static_cast<float*>(nullptr), len, f);
      return true;
    });
    return s;
  };
  const B mb(m);
  // log: lse = log(c + s') with c the count of entries equal to m (each a
  // term of exactly 1) and s' the sum of the other terms, so that lse keeps
  // its relative precision when it is tiny (a 16-bit output near 0 has a
  // tiny ulp: the float kernels' log(s) - r carries ~1e-7 absolute there).
  // s' and c from one read of x (each widened block summed twice in L1).
  const auto write_log = [&](auto&& f, double scale_rest) {
    double c = 0, rest = 0;
    for_each_widened<A>(x, n, [&](const float* b, std::size_t, std::size_t len) {
      rest += sum_map<A>(b, static_cast<float*>(nullptr), len, [&](B v) { return xsimd::select(v == mb, B(0.0f), f(v)); });
      c += sum_map<A>(b, static_cast<float*>(nullptr), len, [&](B v) { return xsimd::select(v == mb, B(1.0f), B(0.0f)); });
      return true;
    });
    rest *= scale_rest;
    if (!(rest == rest)) return fill(y, n, from_float<Y>(std::numeric_limits<float>::quiet_NaN()));
    with_log_probability<A>(m, std::log(c) + std::log1p(rest / c),
                            [&](auto g) { map_half<A, narrow_input::any>(x, y, n, g); });
  };
  if (use_split(m)) {
    double r;
    const float E = ref_exponent(m, r);
    const float lo = clamp_floor(m);
    // terms e^x 2^-E = e^(x - m) e^r
    if (log) return write_log(exp_ref<A, float>(lo, E, 1.0f), std::exp(-r));
    constexpr exp_accuracy acc = output_exp_accuracy<Y>;
    const double s = sum(exp_ref<A, float, acc>(lo, E, 1.0f));
    if (!(s == s)) return fill(y, n, from_float<Y>(std::numeric_limits<float>::quiet_NaN()));
    map_half<A, narrow_input::finite_normal>(x, y, n, exp_ref<A, float, acc>(lo, E, static_cast<float>(1.0 / s)));
  } else {
    const shifted_exp<A, float, false> ex(m);
    if (log) return write_log(ex, 1.0);
    const double s = sum(ex);
    if (!(s == s)) return fill(y, n, from_float<Y>(std::numeric_limits<float>::quiet_NaN()));
    map_half<A, narrow_input::finite_normal>(x, y, n, scaled_shifted_exp<A, float, false>(ex, static_cast<float>(1.0 / s)));
  }
}

// This thread's float buffer of at least n elements (grown on demand to
// half_whole_row, kept for the thread's life); nullptr for a longer n, or
// if it cannot grow.
inline float* row_buffer(std::size_t n) noexcept {
  thread_local std::unique_ptr<float[]> buf;
  thread_local std::size_t capacity = 0;
  if (n > half_whole_row) return nullptr;
  if (capacity < n) {
    buf.reset(new (std::nothrow) float[half_whole_row]);
    capacity = buf ? half_whole_row : 0;
  }
  return buf.get();
}

// In cache, any algorithm: three-pass reload (one exp per element, where the
// staged two-pass takes two) reading x as 16-bit: max; the terms stored to
// the float buffer `terms` and summed; y = term / s, rounded once. No pass
// of its own to widen x or to narrow y.
template <class A, class H, class Y>
SMAX_FLATTEN void softmax_half_reload(const H* x, Y* y, std::size_t n, float* terms) noexcept {
  const auto finish = [&](double s, auto&&) {
    if (!(s == s)) return fill(y, n, from_float<Y>(std::numeric_limits<float>::quiet_NaN()));
    map_half<A, narrow_input::finite_normal>(static_cast<const float*>(terms), y, n,
                                            scale_normal<A, float>(static_cast<float>(1.0 / s)));
  };
  if (!three_pass_sum<A, output_exp_accuracy<Y>>(x, terms, n, finish))
    softmax_nonfinite_half(x, y, n, result_form::probabilities);
}

template <class A, class H, class Y>
void softmax_half(const H* x, Y* y, std::size_t n, algorithm a, result_form form) noexcept {
  const bool log = form == result_form::logs;
  if (n == 0) return;
  if (!log && n <= half_block) {
    alignas(64) float terms[half_block];
    return softmax_half_reload<A>(x, y, n, terms);
  }
  // The row's terms in a buffer kept per thread (a fresh 1 MiB allocation is
  // mapped and faulted in on every call); without it (allocation failed) the
  // staged passes below give the result.
  if (!log && n <= half_whole_row)
    if (float* terms = row_buffer(n)) return softmax_half_reload<A>(x, y, n, terms);
  const bool single = a == algorithm::automatic || a == algorithm::two_pass || a == algorithm::online;
  if (!log && single && softmax_half_two_pass<A>(x, y, n)) return;
  softmax_half_three_pass<A>(x, y, n, form);
}

// ------------------------------------------------------------- backward --
// softmax_backward / log_softmax_backward on 16-bit y, dy, dx: the float
// kernels' terms on y and dy widened as loaded (map2_half), each dx rounded
// once; the dot product the float kernel's own on x86 (dot_normal_half),
// else summed on blocks widened into L1 (float per block, double across).
// dx may be y or dy: each iteration (or block) reads before it writes.

// Calls g(a, b, offset, length) with a and b widened a block at a time into
// writable float buffers.
template <class A, class H, class G>
SMAX_INLINE void for_each_widened2(const H* a, const H* b, std::size_t n, G&& g) noexcept {
  alignas(64) float ba[half_block];
  alignas(64) float bb[half_block];
  for (std::size_t o = 0; o < n; o += half_block) {
    const std::size_t len = std::min(half_block, n - o);
    widen_block<A>(a + o, ba, len);
    widen_block<A>(b + o, bb, len);
    g(static_cast<float*>(ba), static_cast<float*>(bb), o, len);
  }
}

// sum_of_pairs and map_pairs of backward.hpp over the widened blocks.
template <class A, class H, class F>
double sum_map2_half(const H* a, const H* b, std::size_t n, F&& f) noexcept {
  double s = 0;
  for_each_widened2<A>(a, b, n, [&](float* p, float* q, std::size_t, std::size_t len) { s += sum_of_pairs<A>(p, q, len, f); });
  return s;
}
template <class A, class H, class F>
void map2_half_blocked(const H* a, const H* b, H* out, std::size_t n, F&& f) noexcept {
  for_each_widened2<A>(a, b, n, [&](float* p, float* q, std::size_t o, std::size_t len) {
    map_pairs<A>(p, q, p, len, f);
    narrow_block<A>(p, out + o, len);
  });
}
// out[i] = f(a[i], b[i]) rounded once; out may be a or b. Outputs of
// stream_min_bytes and more: each pair of vectors rounded and packed into
// one (narrow_pair) and streamed as computed, as map_half does (the blocks
// through L1 wrote them with ordinary stores: a read for ownership of every
// line of out); the same values either way. Only where out's vectors start
// at multiples of W elements from its start (map2_half): f may decide per
// vector (softmax_backward_term's fast path for a vector of y all 0 or
// large gives other bits than its general form), so the lanes must be
// grouped as the float kernel groups them.
template <class A, class H, class F>
SMAX_NOINLINE SMAX_FLATTEN void map2_half_streamed(const H* a, const H* b, H* out, std::size_t n, F& f_arg) noexcept {
  local_copy_t<F&> f(f_arg);  // (loops.hpp)
  using B = xsimd::batch<float, A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t align = W * sizeof(float);
  const auto addr = reinterpret_cast<std::uintptr_t>(out);
  const std::size_t head = ((align - addr % align) % align) / sizeof(H);
  map2_half_blocked<A>(a, b, out, head, f);
  std::size_t i = head;
  for (; i + 4 * W <= n; i += 4 * W) {
    prefetch_as<A, 4, float>(a + i);
    prefetch_as<A, 4, float>(b + i);
    B p[4], q[4];
#pragma GCC unroll 4
    for (std::size_t u = 0; u < 4; ++u) {
      p[u] = widen<A>(a + i + u * W);
      q[u] = widen<A>(b + i + u * W);
    }
    float* d = reinterpret_cast<float*>(out + i);  // out + i: vector-aligned
    store_stream<A>(d, narrow_pair<A, narrow_input::any, H>(f(p[0], q[0]), f(p[1], q[1])));
    store_stream<A>(d + W, narrow_pair<A, narrow_input::any, H>(f(p[2], q[2]), f(p[3], q[3])));
  }
  stream_fence<A>();
  map2_half_blocked<A>(a + i, b + i, out + i, n - i, f);
}
// Below that (or out not so aligned), four vectors of a and b widened as
// loaded, mapped and rounded per iteration (the tail through the blocks):
// 0.73-0.87x the blocks' time at 4K-64K (AVX512_BF16, Zen 5), the same
// values (NaN where NaN: which NaN's payload survives may differ).
template <class A, class H, class F>
SMAX_INLINE void map2_half_direct(const H* a, const H* b, H* out, std::size_t n, F& f) noexcept {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    B p[4], q[4];
#pragma GCC unroll 4
    for (std::size_t u = 0; u < 4; ++u) {
      p[u] = widen<A>(a + i + u * W);
      q[u] = widen<A>(b + i + u * W);
    }
    if constexpr (narrow_pair_in_cache_v<A, H>) {
      float* d = reinterpret_cast<float*>(out + i);
      narrow_pair<A, narrow_input::any, H>(f(p[0], q[0]), f(p[1], q[1])).store_unaligned(d);
      narrow_pair<A, narrow_input::any, H>(f(p[2], q[2]), f(p[3], q[3])).store_unaligned(d + W);
    } else {
#pragma GCC unroll 4
      for (std::size_t u = 0; u < 4; ++u) narrow<A>(out + i + u * W, f(p[u], q[u]));
    }
  }
  if (i < n) map2_half_blocked<A>(a + i, b + i, out + i, n - i, f);
}
template <class A, class H, class F>
void map2_half(const H* a, const H* b, H* out, std::size_t n, F&& f) noexcept {
  if constexpr (has_stream_v<A> && has_narrow_pair_v<A, H>) {
    constexpr std::size_t vector_bytes = xsimd::batch<float, A>::size * sizeof(H);
    if (n * sizeof(H) >= stream_min_bytes && reinterpret_cast<std::uintptr_t>(out) % vector_bytes == 0)
      return map2_half_streamed<A>(a, b, out, n, f);
  }
  map2_half_direct<A>(a, b, out, n, f);
}

// dot_normal (pair_loops.hpp) on 16-bit a and b, where it forms the
// products in double (x86): the same lanes, blocks and order as on the
// widened arrays, so the same sum; each float vector widened as loaded
// gives two of its double vectors.
template <class A, class H>
double dot_normal_half(const H* a, const H* b, std::size_t n) noexcept {
  static_assert(dot_in_double_v<A, float>, "dot_normal_half: x86 only");
  using B = xsimd::batch<float, A>;
  using D = xsimd::batch<double, A>;
  constexpr std::size_t W = D::size, step = 8 * W, block = 256;
  static_assert(step == 4 * B::size, "a step is four float vectors");
  neumaier_sum total;
  std::size_t i = 0;
  while (i + step <= n) {
    D s[8] = {D(0.0), D(0.0), D(0.0), D(0.0), D(0.0), D(0.0), D(0.0), D(0.0)};
    const std::size_t end = i + std::min(block, (n - i) / step * step);
    for (; i < end; i += step) {
#pragma GCC unroll 4
      for (std::size_t v = 0; v < 4; ++v) {
        D alo, ahi, blo, bhi;
        widen_halves<A>(widen<A>(a + i + v * B::size), alo, ahi);
        widen_halves<A>(widen<A>(b + i + v * B::size), blo, bhi);
        s[2 * v] = xsimd::fma(alo, blo, s[2 * v]);
        s[2 * v + 1] = xsimd::fma(ahi, bhi, s[2 * v + 1]);
      }
    }
    total.add(xsimd::hadd(((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))));
  }
  double rest = 0;
  for (; i < n; ++i) rest += static_cast<double>(to_float(a[i])) * static_cast<double>(to_float(b[i]));
  return normal_or_zero<float>(total.value(rest));
}

template <class A, class H>
SMAX_FLATTEN void softmax_backward_half(const H* y, const H* dy, H* dx, std::size_t n) noexcept {
  using B = xsimd::batch<float, A>;
  if (n == 0) return;
  // x86: the float kernel's dot product of the widened arrays (its bits);
  // elsewhere summed in float per block of 2048, in double across blocks
  double dot;
  if constexpr (dot_in_double_v<A, float>)
    dot = dot_normal_half<A>(y, dy, n);
  else
    dot = sum_map2_half<A>(y, dy, n, [](B p, B q) SMAX_LAMBDA_INLINE { return mul_normal<A, float>(p, q); });
  with_backward_term<A, float>(finite_mean<float>(dot), [&](const auto& term) {
    map2_half<A>(y, dy, dx, n, [=](B p, B q) SMAX_LAMBDA_INLINE { return term(p, q); });
  });
}

template <class A, class H>
SMAX_FLATTEN void log_softmax_backward_half(const H* y, const H* dy, H* dx, std::size_t n) noexcept {
  using B = xsimd::batch<float, A>;
  if (n == 0) return;
  const float t = static_cast<float>(sum_map2_half<A>(y, dy, n, [](B, B q) SMAX_LAMBDA_INLINE { return q; }));
  const B tb(t);
  // as log_softmax_backward: t e^y folded into the exp (no subnormal
  // product), or the plain product's IEEE results for an inf or NaN total
  if (t - t != 0.0f) {
    const shifted_exp<A, float, false> ex(0.0f);
    return map2_half<A>(y, dy, dx, n, [=](B p, B q) SMAX_LAMBDA_INLINE { return xsimd::fnma(ex(p), tb, q); });
  }
  const shifted_exp<A, float, false> ex(0.0f, t);
  map2_half<A>(y, dy, dx, n, [=](B p, B q) SMAX_LAMBDA_INLINE { return q - ex(p); });
}

// Bulk conversions (smax::convert): float to 16-bit, or 16-bit to float.
template <class A, class S, class D>
void convert(const S* src, D* dst, std::size_t n) noexcept {
  if constexpr (std::is_same<S, float>::value)
    narrow_block<A>(src, dst, n);
  else
    widen_block<A>(src, dst, n);
}

}  // namespace detail
}  // namespace smax
