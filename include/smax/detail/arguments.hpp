// smax — the argument checks of the public entries that more than one
// family shares: matrix shapes, top-k and sampling parameters. Each throws
// std::invalid_argument naming the function and the argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../types.hpp"
#include "config.hpp"

namespace smax {
namespace detail {

template <class T, class U>
void check_shapes(const char* fn, const matrix_view<T>& x, const matrix_view<U>& y, const char* xn = "x",
                  const char* yn = "y") {
  const std::string f(fn), a(xn), b(yn);
  if (x.stride < x.cols) throw std::invalid_argument(f + ": " + a + ".stride must be >= " + a + ".cols");
  if (y.stride < y.cols) throw std::invalid_argument(f + ": " + b + ".stride must be >= " + b + ".cols");
  if (x.rows != y.rows || x.cols != y.cols)
    throw std::invalid_argument(f + ": " + a + " and " + b + " must have the same rows and cols");
  if (x.rows && x.cols && (!x.data || !y.data)) throw std::invalid_argument(f + ": null data for a non-empty matrix");
}

// The batched top-k and sampling forms' arguments (float and 16-bit rows).
template <class X, class P>
void check_topk_views(const matrix_view<X>& x, std::size_t k, const matrix_view<P>& probs,
                      const matrix_view<std::uint32_t>& index) {
  if (k > x.cols) throw std::invalid_argument("smax::topk_softmax: k must be <= x.cols");
  if (k > 0 && x.cols > std::size_t(0xFFFFFFFFu))
    throw std::invalid_argument("smax::topk_softmax: x.cols must be below 2^32");
  check_shapes("smax::topk_softmax", x, x, "x", "x");
  if (probs.rows != x.rows || probs.cols != k || probs.stride < k)
    throw std::invalid_argument("smax::topk_softmax: probs must be x.rows x k, stride >= k");
  if (index.rows != x.rows || index.cols != k || index.stride < k)
    throw std::invalid_argument("smax::topk_softmax: index must be x.rows x k, stride >= k");
  if (x.rows && k && (!probs.data || !index.data))
    throw std::invalid_argument("smax::topk_softmax: null data for a non-empty matrix");
}
inline void check_sampling(const sampling& s, std::size_t n) {
  if (n == 0) throw std::invalid_argument("smax::sample: n must be > 0");
  if (!(s.temperature >= 0.0f) || !is_finite(s.temperature))
    throw std::invalid_argument("smax::sample: s.temperature must be finite and >= 0");
  if (s.top_k > n) throw std::invalid_argument("smax::sample: s.top_k must be <= n");
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) throw std::invalid_argument("smax::sample: s.top_p must be in (0, 1]");
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) throw std::invalid_argument("smax::sample: s.min_p must be in [0, 1]");
}
// false: no rows (nothing to check further, nothing to do)
template <class T>
bool check_sample_rows(const matrix_view<const T>& x, const std::size_t* out, const sampling& s) {
  check_shapes("smax::sample", x, x, "logits", "logits");
  if (x.rows == 0) return false;
  check_sampling(s, x.cols);
  if (!out) throw std::invalid_argument("smax::sample: null out");
  return true;
}

// topk_softmax's arguments (k of n, 32-bit indices).
inline void check_topk(std::size_t n, std::size_t k) {
  if (k > n) throw std::invalid_argument("smax::topk_softmax: k must be <= n");
  if (k > 0 && n > std::size_t(0xFFFFFFFFu)) throw std::invalid_argument("smax::topk_softmax: n must be below 2^32");
}

}  // namespace detail
}  // namespace smax
