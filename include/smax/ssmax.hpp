// smax — Scalable-Softmax (Nakanishi 2025): y = softmax(c x) with the
// effective scale c = s log(n) + b, and the scaled-softmax kernel that
// gumbel_softmax shares (softmax((logits + g) / tau) is the scale 1/tau).
//
// No temporary is written: the scale is folded into the exponent.
//
//   two-pass (always tried first; reads 2n, writes n): pass 1 sums e^(c v)
//   as (p, 2^K) pairs against a per-lane power-of-two reference, with no max
//   pass (Dukhan & Ablavatski 2020, as softmax's two_pass); pass 2 writes
//   p 2^(K - Kmax) / sum. The reduced argument is d = c v - K ln2_hi - ...,
//   and its first step is one fma(c, v, -K ln2_hi): where the ISA has FMA the
//   product c v is never rounded on its own, so the error stays flat in |c v|
//   (~1e-6 relative, like softmax two_pass); SSE2 emulates fma as c * v + .,
//   which adds the rounding of c v (|c v_i| 2^-24 relative).
//
//   three-pass fallback (special values, |c v| beyond the two-pass range):
//   max (min for c < 0), sum e^(c (v - m)), write: exponent <= 0, never
//   overflows; error |c (v_i - m)| 2^-23 from the two roundings of c (v - m).
#pragma once

#include <cmath>
#include <limits>

#include "exp.hpp"
#include "reduce.hpp"
#include "softmax.hpp"

namespace smax {
namespace detail {

// Sum of p * 2^K over terms given as pairs (p in [0, 2), K integer-valued),
// kept per lane as a sum against a power-of-two reference 2^E. E moves up
// only when a chunk's K exceeds it by more than `slack`, so a lane's terms
// stay below 2^17 and every rescale is an exact power of two; blocks of
// chunks go into a compensated total, so the error does not grow with n.
template <class A, class T>
struct ext_sum {
  using B = xsimd::batch<T, A>;
  static constexpr T slack = T(16);
  B E, a0, a1, a2, a3;
  compensated<A, T> total;
  std::size_t chunks = 0;

  explicit ext_sum(T e0) noexcept : E(e0), a0(T(0)), a1(T(0)), a2(T(0)), a3(T(0)) {}

  SMAX_INLINE void add(B p0, B k0, B p1, B k1, B p2, B k2, B p3, B k3) noexcept {
    const B km = xsimd::max(xsimd::max(k0, k1), xsimd::max(k2, k3));
    const auto moved = km > E + B(slack);
    if (xsimd::any(moved)) {
      const B nE = xsimd::select(moved, km, E);
      const B f = ldexp_small<A, T>(B(T(1)), E - nE);
      a0 *= f;
      a1 *= f;
      a2 *= f;
      a3 *= f;
      total.scale(f);
      E = nE;
    }
    a0 += ldexp_small<A, T>(p0, k0 - E);
    a1 += ldexp_small<A, T>(p1, k1 - E);
    a2 += ldexp_small<A, T>(p2, k2 - E);
    a3 += ldexp_small<A, T>(p3, k3 - E);
    if (++chunks == loop_shape<A>::block_chunks) {
      total.add((a0 + a1) + (a2 + a3));
      a0 = a1 = a2 = a3 = B(T(0));
      chunks = 0;
    }
  }

  // The sum is result * 2^emax (result in double, emax the largest lane E).
  double finish(T& emax) noexcept {
    total.add((a0 + a1) + (a2 + a3));
    a0 = a1 = a2 = a3 = B(T(0));
    emax = hmax<A>(E);
    return hsum<A>(ldexp_small<A, T>(total.value(), E - B(emax)));
  }
};

// e^(c v) = p 2^K for the two-pass kernel, plus t = c v rounded (for the
// range check). Terms with c v below -limit are dropped (p = 0): -inf input
// (with c > 0), padding, and terms the accepted range makes negligible. NaN
// stays NaN.
template <class A, class T>
struct scaled_extexp {
  using B = xsimd::batch<T, A>;
  using C = exp_constants<T>;
  // ln2 - ln2_hi in one T (for the FMA path): K times it is computed
  // exactly inside the fma; its own rounding is 2^-p of 2^-12 ln2, i.e. at
  // most |K| 2^-37 (float) absolute in d, below 2^-24 for every |K| < 5909.
  static constexpr T ln2_rest = C::ln2_mid + C::ln2_lo;
  T scale;
  B c, floor;
  explicit scaled_extexp(T c_scalar) noexcept
      : scale(c_scalar), c(c_scalar), floor(-single_pass_limits<T>::limit) {}

  SMAX_INLINE B operator()(B v, B& t, B& K) const noexcept {
    t = c * v;
    // max(floor, t) keeps NaN on every ISA (see softmax_online).
    K = round_mul<A, T>(xsimd::max(floor, t), B(C::log2e));
    // c v - K ln2 in the Cody-Waite split (K ln2_hi exact); the first step
    // in one fma, so the product c v is not rounded by itself where the ISA
    // has FMA (fma_: also on AVX-512, where xsimd 8.1 has no fma).
    B d = fma_<A, T>(c, v, K * B(-C::ln2_hi));
    if constexpr (has_fma_v<A>) {
      d = fnma_<A, T>(K, B(ln2_rest), d);
    } else {
      d = xsimd::fnma(K, B(C::ln2_mid), d);
      d = xsimd::fnma(K, B(C::ln2_lo), d);
    }
    return xsimd::select(t < floor, B(T(0)), exp_poly<A, T>(d));
  }
};

// Pass 1 state: feed every input value once through chunk(), in any order;
// finish() says whether the two-pass result is exact and gives the
// normalizer as sum * 2^emax.
template <class A, class T>
struct scaled_pass1 {
  using B = xsimd::batch<T, A>;
  using L = single_pass_limits<T>;
  using C = exp_constants<T>;
  static constexpr std::size_t W = B::size;
  const scaled_extexp<A, T>& ex;
  ext_sum<A, T> acc;
  B vmax;

  explicit scaled_pass1(const scaled_extexp<A, T>& e) noexcept
      : ex(e), acc(std::nearbyint(-L::limit / 2 * C::log2e)), vmax(-L::limit) {}

  // Four vectors of which the first `valid` lanes are input (the rest
  // contribute nothing, whatever they hold: c * padding may be NaN).
  SMAX_INLINE void chunk(B v0, B v1, B v2, B v3, std::size_t valid = 4 * W) noexcept {
    B t0, t1, t2, t3, k0, k1, k2, k3;
    B p0 = ex(v0, t0, k0), p1 = ex(v1, t1, k1), p2 = ex(v2, t2, k2), p3 = ex(v3, t3, k3);
    if (valid < 4 * W) {
      const B idx = lane_index<A, T>();
      const auto keep = [&](B& p, B& t, std::size_t k) {
        const auto live = idx < B(static_cast<T>(valid > k * W ? valid - k * W : 0));
        p = xsimd::select(live, p, B(T(0)));
        t = xsimd::select(live, t, B(-L::limit));
      };
      keep(p0, t0, 0);
      keep(p1, t1, 1);
      keep(p2, t2, 2);
      keep(p3, t3, 3);
    }
    // A NaN t may or may not survive max on x86; the sum catches it then.
    vmax = xsimd::max(vmax, xsimd::max(xsimd::max(t0, t1), xsimd::max(t2, t3)));
    acc.add(p0, k0, p1, k1, p2, k2, p3, k3);
  }

  // x[0 .. r-1], r < 4 W.
  SMAX_INLINE void tail(const T* x, std::size_t r) noexcept {
    const auto part = [&](std::size_t k) {
      return load_partial<A>(x + k * W, r > k * W ? (r - k * W < W ? r - k * W : W) : 0, T(0));
    };
    chunk(part(0), part(1), part(2), part(3), r);
  }

  bool finish(double& sum, T& emax) noexcept {
    sum = acc.finish(emax);
    return L::accepts(hmax<A>(vmax), sum);
  }
};

// Pass 1 over x.
template <class A, class T>
bool scaled_two_pass_sum(const T* x, std::size_t n, const scaled_extexp<A, T>& ex, double& sum, T& emax) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  scaled_pass1<A, T> st(ex);
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W)
    st.chunk(B::load_unaligned(x + i), B::load_unaligned(x + i + W), B::load_unaligned(x + i + 2 * W),
             B::load_unaligned(x + i + 3 * W));
  if (i < n) st.tail(x + i, n - i);
  return st.finish(sum, emax);
}

// p 2^(K - emax) * scale for p in [0, 2) (0 included), without subnormal
// arithmetic: results below the normal range are flushed to 0 (they are
// below 1e-37, under every accuracy floor), everything else is formed from
// normal numbers. (A multiply by a subnormal p 2^(K - emax) costs a
// microcode assist on x86: 3.4x slower when a quarter of a row's outputs
// are subnormal, as ssmax with a large scale gives.) The scale's exponent
// is moved into the power of two, so p * scale_mantissa stays in [0, 4).
template <class A, class T>
struct normal_scale {
  using B = xsimd::batch<T, A>;
  using C = exp_constants<T>;
  B mant, shift, cut;
  normal_scale(double scale, T emax) noexcept : mant(T(0)), shift(T(0)), cut(T(C::min_k + 1)) {
    int e = 0;
    const double m = std::frexp(scale, &e);  // scale = m 2^e, m in [0.5, 1)
    mant = B(static_cast<T>(2 * m));
    shift = B(static_cast<T>(e - 1) - emax);
  }
  SMAX_INLINE B operator()(B p, B K) const noexcept {
    const B k = K + shift;  // p * mant in [0, 4): the result is >= 2^k / 2 when nonzero
    return xsimd::select(k < cut, B(T(0)), ldexp_small<A, T>(p * mant, k));
  }
};

// Pass 2: y = e^(c x) / (sum 2^emax). x == y allowed.
template <class A, class T>
void scaled_two_pass_write(const T* x, T* y, std::size_t n, const scaled_extexp<A, T>& ex, double sum,
                           T emax) noexcept {
  using B = xsimd::batch<T, A>;
  const normal_scale<A, T> out(1.0 / sum, emax);
  map<A>(x, y, n, [&](B v) {
    B t, K;
    const B p = ex(v, t, K);
    return out(p, K);
  });
}

// Smallest element (NaN if the lanes saw one; +inf for n = 0).
template <class A, class T>
T reduce_min(const T* x, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr T inf = std::numeric_limits<T>::infinity();
  B m0(inf), m1(inf), m2(inf), m3(inf);
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    m0 = xsimd::min(m0, B::load_unaligned(x + i));
    m1 = xsimd::min(m1, B::load_unaligned(x + i + W));
    m2 = xsimd::min(m2, B::load_unaligned(x + i + 2 * W));
    m3 = xsimd::min(m3, B::load_unaligned(x + i + 3 * W));
  }
  for (; i + W <= n; i += W) m0 = xsimd::min(m0, B::load_unaligned(x + i));
  if (i < n) m1 = xsimd::min(m1, load_partial<A>(x + i, n - i, inf));
  // -hmax(-v): hmax's NaN rule for the minimum.
  return -hmax<A>(-xsimd::min(xsimd::min(m0, m1), xsimd::min(m2, m3)));
}

// The special-value rules for softmax(c x) when the extreme element (max
// for c > 0, min for c < 0) is not finite: NaN -> all NaN; the entries at
// the infinity that c maps to +inf share the mass; otherwise (every entry at
// the other infinity) all 0. c == 0 makes 0 * inf = NaN: all NaN.
template <class T>
void scaled_nonfinite(const T* x, T* y, std::size_t n, T c) noexcept {
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  if (c == T(0)) return fill(y, n, nan);
  const T top = c > T(0) ? inf : -inf;
  std::size_t count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] != x[i]) return fill(y, n, nan);
    count += (x[i] == top);
  }
  if (count == 0) return fill(y, n, T(0));
  const T share = static_cast<T>(1.0 / static_cast<double>(count));
  for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] == top) ? share : T(0);
}

// softmax(c x) by three passes with exponent c (x - m) <= 0.
template <class A, class T>
void scaled_softmax_three_pass(const T* x, T* y, std::size_t n, T c) noexcept {
  using B = xsimd::batch<T, A>;
  const T m = c < T(0) ? reduce_min<A>(x, n) : reduce_max<A>(x, n);
  if (!is_finite(m)) return scaled_nonfinite(x, y, n, c);
  if (c == T(0)) {
    // Every finite entry gets 1/n; an infinite one makes 0 * inf = NaN.
    for (std::size_t i = 0; i < n; ++i)
      if (!is_finite(x[i])) return fill(y, n, std::numeric_limits<T>::quiet_NaN());
    return fill(y, n, static_cast<T>(1.0 / static_cast<double>(n)));
  }
  const B mb(m), cb(c);
  const shifted_exp<A, T, false> ex(T(0));
  const auto f = [&](B v) { return ex(cb * (v - mb)); };
  const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, f);
  if (!(s == s)) return fill(y, n, std::numeric_limits<T>::quiet_NaN());
  const B inv(static_cast<T>(1.0 / s));
  map<A>(x, y, n, [&](B v) { return f(v) * inv; });
}

// softmax(c x) for any finite c.
template <class A, class T>
void scaled_softmax(const T* x, T* y, std::size_t n, T c) noexcept {
  if (n == 0) return;
  const scaled_extexp<A, T> ex(c);
  double sum;
  T emax;
  if (scaled_two_pass_sum<A>(x, n, ex, sum, emax)) return scaled_two_pass_write<A>(x, y, n, ex, sum, emax);
  scaled_softmax_three_pass<A>(x, y, n, c);
}

// The effective scale s log(n) + b, in double.
inline double ssmax_scale(double s, double b, std::size_t n) noexcept {
  return s * std::log(static_cast<double>(n)) + b;
}

template <class A, class T>
void ssmax(const T* x, T* y, std::size_t n, T s, T b) noexcept {
  if (n == 0) return;
  scaled_softmax<A>(x, y, n, static_cast<T>(ssmax_scale(s, b, n)));
}

}  // namespace detail
}  // namespace smax
