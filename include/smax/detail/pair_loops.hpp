// smax — the loops over pairs of arrays (a[i], b[i]) that the backward
// passes and the two-input kernels are made of: sums in double with an
// error independent of n (sum_of_pairs, dot_normal, sum_of_pairs_normal),
// optionally writing a map of the same loads, and the map alone (map_pairs).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <limits>
#include <type_traits>

#include "exp.hpp"
#include "loops.hpp"

namespace smax {
namespace detail {

// What a summing pass over pairs also writes: nothing, or out[i] =
// g(a[i], b[i]) from the same loads (pair_output; out may alias a or b),
// so that a kernel needing a sum and a map of the same pairs reads them once.
struct no_output {
  template <class A, class B>
  SMAX_INLINE void store(std::size_t, B, B) const noexcept {}
  template <class A, class B>
  SMAX_INLINE void store_partial(std::size_t, std::size_t, B, B) const noexcept {}
};
// (out may be 16-bit: each value rounded once.)
template <class T, class G>
struct pair_output {
  T* out;
  G g;
  template <class A, class B>
  SMAX_INLINE void store(std::size_t i, B a, B b) const noexcept {
    if constexpr (is_half_v<T>)
      narrow<A>(out + i, g(a, b));
    else
      g(a, b).store_unaligned(out + i);
  }
  template <class A, class B>
  SMAX_INLINE void store_partial(std::size_t i, std::size_t r, B a, B b) const noexcept {
    if constexpr (is_half_v<T>) {
      alignas(64) float lanes[B::size];
      g(a, b).store_aligned(lanes);
      for (std::size_t k = 0; k < r; ++k) out[i + k] = T(lanes[k]);
    } else {
      detail::store_partial<A>(out + i, r, g(a, b));
    }
  }
};
template <class T, class G>
pair_output<T, G> write_pairs(T* out, G g) noexcept {
  return {out, g};
}

// Sum over i of f(a[i], b[i]) in double, error independent of n (and
// `o`'s writes from the same loads).
template <class A, class T, class F, class O = no_output>
double sum_of_pairs(const T* a, const T* b, std::size_t n, F&& f, const O& o = {}) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t block = 4 * W * loop_shape<A>::block_chunks;
  compensated<A, T> total;
  std::size_t i = 0;
  const auto at = [&](std::size_t k) SMAX_LAMBDA_INLINE {
    const B va = B::load_unaligned(a + k), vb = B::load_unaligned(b + k);
    o.template store<A>(k, va, vb);
    return f(va, vb);
  };
  while (i + 4 * W <= n) {
    B s0(T(0)), s1(T(0)), s2(T(0)), s3(T(0));
    const std::size_t end = (n - i >= block) ? i + block : i + ((n - i) / (4 * W)) * (4 * W);
    for (; i < end; i += 4 * W) {
      s0 += at(i);
      s1 += at(i + W);
      s2 += at(i + 2 * W);
      s3 += at(i + 3 * W);
    }
    total.add((s0 + s1) + (s2 + s3));
  }
  B rest(T(0));
  for (; i + W <= n; i += W) rest += at(i);
  if (i < n) {
    // Zero padding: f(0, 0) is 0 for the products and sums used here, and the
    // lanes are masked anyway.
    const B va = load_partial<A>(a + i, n - i, T(0)), vb = load_partial<A>(b + i, n - i, T(0));
    o.template store_partial<A>(i, n - i, va, vb);
    rest += xsimd::select(lane_index<A, T>() < B(static_cast<T>(n - i)), f(va, vb), B(T(0)));
  }
  total.add(rest);
  return hsum<A>(total.value());
}

// D::size floats from p, widened to double (x86; xsimd's AVX and AVX-512
// tags do not derive from SSE2's).
template <class A>
SMAX_INLINE xsimd::batch<double, A> load_widened(const float* p) noexcept {
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) return _mm512_cvtps_pd(_mm256_loadu_ps(p));
  else
#endif
#if defined(__AVX__)
  if constexpr (std::is_base_of<xsimd::avx, A>::value) return _mm256_cvtps_pd(_mm_loadu_ps(p));
  else
#endif
#if defined(__SSE2__)
  if constexpr (std::is_base_of<xsimd::sse2, A>::value)
    return _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  else
#endif
    return xsimd::batch<double, A>(static_cast<double>(*p));  // (never used: dot_in_double_v)
}

// The two halves of a float vector as double vectors (x86, as load_widened).
template <class A>
SMAX_INLINE void widen_halves(xsimd::batch<float, A> v, xsimd::batch<double, A>& lo,
                              xsimd::batch<double, A>& hi) noexcept {
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    return;
  }
#endif
#if defined(__AVX__)
  if constexpr (std::is_base_of<xsimd::avx, A>::value) {
    lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
    hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    return;
  }
#endif
#if defined(__SSE2__)
  if constexpr (std::is_base_of<xsimd::sse2, A>::value) {
    lo = _mm_cvtps_pd(v);
    hi = _mm_cvtps_pd(_mm_movehl_ps(v, v));
    return;
  }
#endif
  (void)v, (void)lo, (void)hi;  // (never used: dot_in_double_v)
}

// Whether dot_normal forms float products in double here (x86).
template <class A, class T>
constexpr bool dot_in_double_v = std::is_same<T, float>::value &&
#if defined(__SSE2__)
                                 (is_avx512_v<A> || std::is_base_of<xsimd::avx, A>::value ||
                                  std::is_base_of<xsimd::sse2, A>::value);
#else
                                 false;
#endif

// A scalar Neumaier sum of block sums in double.
struct neumaier_sum {
  double total = 0, carry = 0;
  void add(double part) noexcept {
    const double t = total + part;
    carry += std::fabs(total) >= std::fabs(part) ? (total - t) + part : (part - t) + total;
    total = t;
  }
  // total + rest + carry (an infinite total has a NaN carry: inf - inf)
  double value(double rest = 0) const noexcept {
    return total - total == 0 ? (total + rest) + carry : total + rest;
  }
};

// v, or 0 where it lies below T's smallest normal number (a dot product
// that would be a subnormal factor of every dx).
template <class T>
double normal_or_zero(double v) noexcept {
  return std::fabs(v) < static_cast<double>(std::numeric_limits<T>::min()) ? 0.0 : v;
}

// sum_i a_i b_i. Float on x86, with no subnormal formed or read: every
// product in double, where it is exact and never subnormal, and so is every
// partial sum (a multiple of 2^-298); blocks of 256 products, the blocks
// compensated. In float, the lane sums of tiny products can cancel to a
// subnormal (an FMA's tiny result: an assist on Intel), and AVX2's exponent
// test of each product (mul_normal) costs seven integer instructions a vector
// (softmax_backward 1.3x its plain-product time in cache, Zen 5). Elsewhere
// (double, NEON) the products through mul_summable: none below 2^-103
// (double 2^-970), so that no lane sum is subnormal either.
template <class A, class T>
double dot_normal(const T* a, const T* b, std::size_t n) noexcept {
  if constexpr (dot_in_double_v<A, T>) {
    using D = xsimd::batch<double, A>;
    constexpr std::size_t W = D::size, step = 8 * W, block = 256;
    neumaier_sum total;
    std::size_t i = 0;
    const bool far = read_loop_prefetches<T>(n);
    while (i + step <= n) {
      D s[8] = {D(0.0), D(0.0), D(0.0), D(0.0), D(0.0), D(0.0), D(0.0), D(0.0)};
      const std::size_t end = i + std::min(block, (n - i) / step * step);
      for (; i < end; i += step) {
        if (far) {
          static_assert(step == 4 * xsimd::batch<T, A>::size, "a step is four vectors of T");
          prefetch_ahead<A, 4>(a + i);
          prefetch_ahead<A, 4>(b + i);
        }
#pragma GCC unroll 8
        for (std::size_t u = 0; u < 8; ++u)
          s[u] = xsimd::fma(load_widened<A>(a + i + W * u), load_widened<A>(b + i + W * u), s[u]);
      }
      total.add(xsimd::hadd(((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))));
    }
    double rest = 0;
    for (; i < n; ++i) rest += static_cast<double>(a[i]) * static_cast<double>(b[i]);
    return normal_or_zero<T>(total.value(rest));
  } else {
    using B = xsimd::batch<T, A>;
    return normal_or_zero<T>(sum_of_pairs<A>(a, b, n, [](B x, B y) { return mul_summable<A, T>(x, y); }));
  }
}

// Sum over i of f(a[i], b[i]) for an f whose values are normal or 0, with
// no subnormal formed: float on x86 adds the values in double lanes (float
// lane sums of tiny values of either sign can cancel to a subnormal;
// mul_summable's cut at 2^-102 loses too much where the sum is later
// divided by a small range, sa_softmax_backward's P), in blocks of 256,
// compensated; elsewhere (double, NEON) sum_of_pairs over the values with
// those below 2^mantissa_bits times the smallest normal number min zeroed
// (double 2^-970, float 2^-103): the rest are multiples of min, so no lane
// sum cancels to a subnormal (tests/test_subnormal.cpp's kind 4 found
// sa_softmax_backward's P doing so, double); the sum's absolute error grows
// by at most n times that cut. On x86 a and b may be 16-bit (widened as
// loaded: the float sum of the widened arrays, bit for bit).
template <class A, class S, class F, class O = no_output>
double sum_of_pairs_normal(const S* a, const S* b, std::size_t n, F&& f, const O& o = {}) noexcept {
  using T = compute_t<S>;
  if constexpr (dot_in_double_v<A, T>) {
    using B = xsimd::batch<float, A>;
    using D = xsimd::batch<double, A>;
    constexpr std::size_t W = B::size, block = 256;
    neumaier_sum total;
    std::size_t i = 0;
    const auto at = [&](std::size_t k) SMAX_LAMBDA_INLINE {
      const B va = load_as<A, float>(a + k), vb = load_as<A, float>(b + k);
      o.template store<A>(k, va, vb);
      return f(va, vb);
    };
    while (i < n) {
      // Two vectors per step into four double accumulators (one pair of
      // chains made the pass bound by the adds' latency).
      D s0(0.0), s1(0.0), s2(0.0), s3(0.0), lo, hi;
      const std::size_t end = i + std::min(block, n - i);
      for (; i + 2 * W <= end; i += 2 * W) {
        widen_halves<A>(at(i), lo, hi);
        s0 += lo;
        s1 += hi;
        widen_halves<A>(at(i + W), lo, hi);
        s2 += lo;
        s3 += hi;
      }
      for (; i < end; i += W) {
        const std::size_t r = std::min(W, end - i);
        B v;
        if (r == W) {
          v = at(i);
        } else {
          const B va = load_as_partial<A, float>(a + i, r, 0.0f), vb = load_as_partial<A, float>(b + i, r, 0.0f);
          o.template store_partial<A>(i, r, va, vb);
          v = xsimd::select(lane_index<A, float>() < B(static_cast<float>(r)), f(va, vb), B(0.0f));
        }
        widen_halves<A>(v, lo, hi);
        s0 += lo;
        s1 += hi;
      }
      total.add(xsimd::hadd((s0 + s2) + (s1 + s3)));
    }
    return total.value();
  } else {
    static_assert(std::is_same<S, T>::value, "16-bit sources: x86 only");
    using B = xsimd::batch<T, A>;
    const B cut(std::numeric_limits<T>::min() * static_cast<T>(std::uint64_t(1) << exp_constants<T>::mantissa_bits));
    return sum_of_pairs<A>(
        a, b, n,
        [&](B va, B vb) SMAX_LAMBDA_INLINE {
          const B v = f(va, vb);
          return xsimd::select(xsimd::abs(v) >= cut, v, B(T(0)));
        },
        o);
  }
}

// out[i] = f(a[i], b[i]); out may alias a or b.
template <class A, class T, class F>
void map_pairs(const T* a, const T* b, T* out, std::size_t n, F&& f_arg) noexcept {
  local_copy_t<F> f(f_arg);  // (loops.hpp)
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    const B r0 = f(B::load_unaligned(a + i), B::load_unaligned(b + i));
    const B r1 = f(B::load_unaligned(a + i + W), B::load_unaligned(b + i + W));
    r0.store_unaligned(out + i);
    r1.store_unaligned(out + i + W);
  }
  for (; i + W <= n; i += W) f(B::load_unaligned(a + i), B::load_unaligned(b + i)).store_unaligned(out + i);
  if (i < n)
    store_partial<A>(out + i, n - i, f(load_partial<A>(a + i, n - i, T(0)), load_partial<A>(b + i, n - i, T(0))));
}

// A weighted mean of T values (weights >= 0 summing to about 1), computed
// in double, rounded to T: it lies between the smallest and the largest of
// the values, but its rounding (and the double's rounding to T) can carry
// it one ulp past the largest finite T, to an infinity that then poisons
// every dx (found by fuzz_variants / fuzz_sparse: dy all -DBL_MAX). Clamped
// to the finite range; NaN stays NaN.
template <class T>
T finite_mean(double v) noexcept {
  const double big = static_cast<double>(std::numeric_limits<T>::max());
  return static_cast<T>(v > big ? big : v < -big ? -big : v);
}

// Two sums over i at once (sum_of_pairs does one), in double: f(a, b,
// acc0, acc1) adds a vector's terms to the accumulators, which are flushed
// every block into compensated totals: the error does not grow with n.
// (The padding lanes of the tail read 0.) Where f returns a vector and
// `out` is given, it is stored to out[i] (out may alias a or b): f's own
// value, not a second map as sum_of_pairs's pair_output computes.
// a and b may be 16-bit (widened as loaded; T float). `stop(b0, b1)`
// sees each pair of b's vectors (a lone one as (b0, b0)) before their
// terms: where it holds, the sums end there and the call returns false
// (out0, out1 unset); true once every term is added.
struct never_stop {
  template <class B>
  constexpr bool operator()(B, B) const noexcept { return false; }
};
template <class A, class S, class F, class O = std::nullptr_t, class Stop = never_stop>
bool two_sums_of_pairs(const S* a, const S* b, std::size_t n, F&& f, double& out0, double& out1,
                       O out = nullptr, Stop stop = {}) noexcept {
  using T = compute_t<S>;
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t block = W * 4 * loop_shape<A>::block_chunks;
  constexpr bool stores = !std::is_same<O, std::nullptr_t>::value;
  const auto step = [&](std::size_t k, B va, B vb, B& acc0, B& acc1, std::size_t live) SMAX_LAMBDA_INLINE {
    if constexpr (stores) {
      const B v = f(va, vb, acc0, acc1);
      if (live == W)
        v.store_unaligned(out + k);
      else
        store_partial<A>(out + k, live, v);
    } else {
      f(va, vb, acc0, acc1);
    }
  };
  compensated<A, T> t0, t1;
  std::size_t i = 0;
  while (i < n) {
    B s0(T(0)), s1(T(0)), r0(T(0)), r1(T(0));
    const std::size_t end = std::min(n, i + block);
    for (; i + 2 * W <= end; i += 2 * W) {
      const B b0 = load_as<A, T>(b + i), b1 = load_as<A, T>(b + i + W);
      if (stop(b0, b1)) return false;
      step(i, load_as<A, T>(a + i), b0, s0, s1, W);
      step(i + W, load_as<A, T>(a + i + W), b1, r0, r1, W);
    }
    for (; i + W <= end; i += W) {
      const B b0 = load_as<A, T>(b + i);
      if (stop(b0, b0)) return false;
      step(i, load_as<A, T>(a + i), b0, s0, s1, W);
    }
    if (i < end) {
      const B b0 = load_as_partial<A, T>(b + i, end - i, T(0));
      if (stop(b0, b0)) return false;
      step(i, load_as_partial<A, T>(a + i, end - i, T(0)), b0, s0, s1, end - i);
      i = end;
    }
    t0.add(s0 + r0);
    t1.add(s1 + r1);
  }
  out0 = hsum<A>(t0.value());
  out1 = hsum<A>(t1.value());
  return true;
}

// v's binary exponent as T, from its exponent field: floor(log2 |v|) for
// a normal v, 1 - bias for 0 and subnormals, bias + 1 for inf and NaN.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> exponent_estimate(xsimd::batch<T, A> v) noexcept {
  using B = xsimd::batch<T, A>;
  using L = float_layout<T>;
  using BI = xsimd::batch<typename L::int_type, A>;
  // (a field f as T: the bits of 2^mantissa_bits + f, less 2^mantissa_bits)
  const B magic(std::ldexp(T(1), L::mantissa_bits));
  const B f = xsimd::bitwise_cast<B>(exponent_field<A>(v) | xsimd::bitwise_cast<BI>(magic)) - magic;
  return xsimd::max(f, B(T(1))) - B(static_cast<T>(L::exponent_bias));
}

// log2 |v| within 0.09 for a normal v: its exponent plus its mantissa's
// fraction (log2 (1 + f) ~ f), from the bit fields alone.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> log2_estimate(xsimd::batch<T, A> v) noexcept {
  using B = xsimd::batch<T, A>;
  using L = float_layout<T>;
  using BI = xsimd::batch<typename L::int_type, A>;
  const BI mantissa((typename L::int_type(1) << L::mantissa_bits) - 1);
  const B one(T(1));
  const B m = xsimd::bitwise_cast<B>((xsimd::bitwise_cast<BI>(v) & mantissa) | xsimd::bitwise_cast<BI>(one));
  return exponent_estimate<A, T>(v) + (m - one);
}

// For the scaled forms of the backward passes, which scale dy by 2^K so
// that their largest product w dy lands near 1: over the lanes where
// on(a) holds, the largest finite |b| (M) and an estimate of log2 of the
// largest |w b| (E, within 1 + the error of log2_w(a), an estimate of
// log2 w; -inf where every such b is 0). False where b holds NaN or inf
// (on those lanes, or on any lane with CheckAll). One pass of vectors (a
// scalar std::ilogb per entry made entmax_backward's 4-8x its other
// passes).
template <class A, bool CheckAll, class S, class On, class LogWeight, class T = compute_t<S>>
bool largest_product_exponent(const S* a, const S* b, std::size_t n, On on, LogWeight log2_w, T& M, T& E) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  const B zero(T(0)), largest(std::numeric_limits<T>::max()), neg_inf(-std::numeric_limits<T>::infinity());
  B vm(zero), ve(neg_inf);
  auto bad = zero != zero;
  const auto step = [&](B va, B vb) {
    const auto counted = on(va);
    const B d = xsimd::abs(vb);
    const auto finite = d <= largest;
    bad = bad | (CheckAll ? !finite : counted & !finite);
    vm = xsimd::max(vm, xsimd::select(counted & finite, d, zero));
    ve = xsimd::max(ve, xsimd::select(counted & finite & (d > zero), exponent_estimate<A, T>(d) + log2_w(va), neg_inf));
  };
  std::size_t i = 0;
  for (; i + W <= n; i += W) step(load_as<A, T>(a + i), load_as<A, T>(b + i));
  if (i < n) step(load_as_partial<A, T>(a + i, n - i, T(0)), load_as_partial<A, T>(b + i, n - i, T(0)));
  if (xsimd::any(bad)) return false;
  M = hmax<A>(vm);
  E = hmax<A>(ve);
  return true;
}

}  // namespace detail
}  // namespace smax
