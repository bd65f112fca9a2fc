// smax — vector-Jacobian products of softmax and log_softmax.
//
// Both are a dot-product pass and an elementwise pass over the forward output
// (never the input), so they need no max and no special-value logic of their
// own: a NaN in y or dy reaches dx through the arithmetic. The dot product is
// accumulated like every smax sum (per-lane blocks, compensated), so its
// error does not grow with n.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "exp.hpp"
#include "loops.hpp"
#include "pair_loops.hpp"

namespace smax {
namespace detail {

// dx_i = y_i (dy_i - dot), dot = sum_j y_j dy_j, for one vector of lanes,
// evaluated as y_i dy_i - y_i dot: both products are bounded by the scale
// |y_i| (|dy_i| + sum_j |y_j dy_j|) of the result, so nothing overflows unless
// that scale does (dy_i - dot alone can, e.g. dy_i = -DBL_MAX with a positive
// dot). Lanes of y whose products with dy or dot, or whose results, could
// fall below the normal range are taken as 0, so no subnormal is formed
// (such dx are below 2^-124 anyway). Shared by every softmax-shaped backward.
// TinyDot: a dot below 2^digits min (rows of tiny gradients), where dy -
// dot could be subnormal: that difference is then taken by
// difference_normal_or_zero (0 below the normal range, and a0 g too). A
// type of its own, chosen per row by with_backward_term: in the one type,
// as a flag, it cost the fast path 1.1-1.2x in cache (softmax_backward,
// AVX2 and AVX-512, Zen 5).
template <class A, class T, bool TinyDot = false>
struct softmax_backward_term {
  using B = xsimd::batch<T, A>;
  B dot, y_floor;
  explicit softmax_backward_term(T dot_s) noexcept : dot(dot_s), y_floor(fast_floor(dot_s)) {}
  // 2^(min_exponent / 2): products of two values at least this large are normal
  static T big_value() noexcept { return static_cast<T>(std::ldexp(1.0, std::numeric_limits<T>::min_exponent / 2)); }
  // The least |y| the fast path takes: y dot and y (b - dot) are then 0
  // or normal. A nonzero b - dot exceeds |dot| 2^-digits / 2 (b at least
  // |dot| / 2: both are multiples of ulp(dot) / 2; below, it exceeds
  // |dot| / 2), so |y dot| >= lift = min 2^(digits + 1) suffices: y >=
  // lift / |dot|, and at least big_value() (rows with |dot| >= lift / big
  // take exactly that). A dot of 0 (or subnormal) takes no y but 0: there
  // y dy alone could be subnormal (dy ~ 2^-1000 with dot 0: double,
  // test_subnormal). A NaN or infinite dot: big_value(), as before.
  static T fast_floor(T dot_s) noexcept {
    constexpr T lift =
        std::numeric_limits<T>::min() * static_cast<T>(std::uint64_t(1) << (std::numeric_limits<T>::digits + 1));
    const T d = std::fabs(dot_s), big = big_value();
    if (!(d < lift / big)) return big;
    if (d >= std::numeric_limits<T>::min()) return lift / d;
    return std::numeric_limits<T>::infinity();
  }
  // The dot product itself, its products kept normal.
  static T dot_of(const T* y, const T* dy, std::size_t n) noexcept {
    return finite_mean<T>(dot_normal<A>(y, dy, n));
  }
  SMAX_INLINE B operator()(B a, B b) const noexcept {
    // Fast path: every y of the vector 0 or at least y_floor, so that y dot
    // and the result are 0 or normal (fast_floor).
    if (xsimd::all((xsimd::abs(a) >= y_floor) | (a == B(T(0))))) return fma_<A, T>(a, b, -(a * dot));
    // Here dx = a0 (b - dot), a0 zeroed where that product could be below
    // the normal range; where b - dot overflows, the two-product form.
    B g;
    if constexpr (TinyDot)
      g = difference_normal_or_zero<A, T>(b, dot);
    else
      g = b - dot;
    const B a0 = keep_if_normal_product<A, T>(a, g);
    const auto finite = xsimd::abs(g) < B(std::numeric_limits<T>::infinity());
    // (the two-product form only where needed: a0 b can be subnormal where
    // |b| < |g|, a lane the select would drop)
    if (xsimd::all(finite)) return a0 * g;
    // (judged by the exponents, not by a cut min / |dot|: a subnormal y
    // given as input times a huge dot is normal; found by fuzz_backward)
    const B ad = mul_normal<A, T>(a0, dot);
    return xsimd::select(finite, a0 * g, fma_<A, T>(a0, b, -ad));
  }
};

// f(term) with the softmax_backward_term for this dot (TinyDot or not).
template <class A, class T, class F>
SMAX_INLINE void with_backward_term(T dot, F&& f) {
  if (difference_always_normal(dot))
    f(softmax_backward_term<A, T, false>(dot));
  else
    f(softmax_backward_term<A, T, true>(dot));
}

// Flattened: g++ otherwise calls the per-vector lambdas of these two out of
// line (1.4x the time in cache on AVX2, 1.15x on AVX-512; Zen 5).
template <class A, class T>
SMAX_FLATTEN void softmax_backward(const T* y, const T* dy, T* dx, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  if (n == 0) return;
  with_backward_term<A, T>(softmax_backward_term<A, T>::dot_of(y, dy, n), [&](const auto& term) {
    map_pairs<A>(y, dy, dx, n, [=](B a, B b) { return term(a, b); });
  });
}

// y is the log_softmax output: dx_i = dy_i - e^(y_i) * sum_j dy_j
template <class A, class T>
SMAX_FLATTEN void log_softmax_backward(const T* y, const T* dy, T* dx, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  if (n == 0) return;
  const T t = static_cast<T>(sum_of_pairs<A>(y, dy, n, [](B, B b) { return b; }));
  const B total(t);
  // total * e^y for y <= 0 (y = -inf gives 0), the factor folded into the
  // exp so that no subnormal product is formed.
  if (t - t != T(0)) {  // inf or NaN total: the plain product's IEEE results
    const shifted_exp<A, T, false> ex(T(0));
    return map_pairs<A>(y, dy, dx, n, [=](B a, B b) { return xsimd::fnma(ex(a), total, b); });
  }
  const shifted_exp<A, T, false> ex(T(0), t);
  map_pairs<A>(y, dy, dx, n, [=](B a, B b) { return b - ex(a); });
}

}  // namespace detail
}  // namespace smax
