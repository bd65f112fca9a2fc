// smax — softmax-family kernels on xsimd.
// detail/config.hpp: the one place that includes xsimd; the macros and
// traits every kernel header uses (the public types: types.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include <xsimd/xsimd.hpp>

#define SMAX_VERSION_MAJOR 0
#define SMAX_VERSION_MINOR 1
#define SMAX_VERSION_PATCH 0

// The special-value rules (NaN in -> NaN out, +inf shares the mass, -inf is
// masked) are implemented with comparisons against NaN and infinity, which
// -ffast-math (-ffinite-math-only) lets the compiler delete. Refuse rather
// than silently break them; a user who accepts that may define
// SMAX_ALLOW_FAST_MATH, and then inputs must be finite.
#if defined(__FAST_MATH__) && !defined(SMAX_ALLOW_FAST_MATH)
#error "smax: -ffast-math removes the NaN/inf handling smax documents; compile smax TUs without it, or define SMAX_ALLOW_FAST_MATH to accept finite-input-only behaviour"
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SMAX_INLINE inline __attribute__((always_inline))
#else
#define SMAX_INLINE inline
#endif

// On a per-vector lambda handed to a loop skeleton ([&](B v) SMAX_LAMBDA_INLINE
// { ... }): g++ 12 calls some of them out of line, one call per vector with
// the batches passed through memory (entmax_backward 1.6-2.3x, softmax_backward
// 1.2-1.4x the time in cache on Zen 5; docs/tuning.md, "Outlined lambdas").
#if defined(__GNUC__) || defined(__clang__)
#define SMAX_LAMBDA_INLINE __attribute__((always_inline))
#else
#define SMAX_LAMBDA_INLINE
#endif

// On a rarely taken branch whose code, inlined, moved the common path's
// (the 16-bit backward's streamed write: 3-5% on the in-cache path, Zen 5).
#if defined(__GNUC__) || defined(__clang__)
#define SMAX_NOINLINE __attribute__((noinline))
#else
#define SMAX_NOINLINE
#endif

namespace smax {

namespace detail {

// The IEEE binary layout of T (float or double): its bits as unsigned and
// signed integers, the mantissa field's width and the exponent's bias.
template <class T>
struct float_layout {
  static_assert(std::numeric_limits<T>::is_iec559 && (sizeof(T) == 4 || sizeof(T) == 8), "IEEE float or double");
  using uint_type = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  using int_type = std::make_signed_t<uint_type>;
  static constexpr int mantissa_bits = std::numeric_limits<T>::digits - 1;
  static constexpr int exponent_bias = std::numeric_limits<T>::max_exponent - 1;
};

// Keeps a scalar parameter (alpha, eps, tau, ...) out of template argument
// deduction, so that smax::entmax_bisect(xf, yf, n, 1.5) compiles for float.
template <class T>
struct identity {
  using type = T;
};
template <class T>
using nodeduce_t = typename identity<T>::type;

template <class T>
using enable_if_real_t = std::enable_if_t<std::is_same<T, float>::value || std::is_same<T, double>::value>;

// True for xsimd architecture tags (every one derives from xsimd::generic).
template <class A>
constexpr bool is_arch_v = std::is_base_of<xsimd::generic, A>::value;

template <class A>
using enable_if_arch_t = std::enable_if_t<is_arch_v<A>>;

// A scalar's finiteness without <cmath> (and without -ffinite-math-only's
// licence to drop it: config.hpp refuses -ffast-math).
template <class T>
SMAX_INLINE bool is_finite(T v) noexcept {
  return v - v == T(0);  // false for NaN and +-inf
}

}  // namespace detail
}  // namespace smax
