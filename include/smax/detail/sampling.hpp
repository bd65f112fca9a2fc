// smax — the parameters of smax::sample (kernels: topk.hpp). A header of
// its own, with no kernel code, so that the dispatch table and
// smax/dynamic.hpp can name the type.
#pragma once

#include <cstddef>
#include <stdexcept>

namespace smax {

// temperature 0: argmax; top_k 0: keep all; top_p 1 and min_p 0: no cut.
struct sampling {
  float temperature = 1;
  std::size_t top_k = 0;
  float top_p = 1;
  float min_p = 0;
};

namespace detail {
// topk_softmax's arguments (k of n, 32-bit indices).
inline void check_topk(std::size_t n, std::size_t k) {
  if (k > n) throw std::invalid_argument("smax::topk_softmax: k must be <= n");
  if (k > 0 && n > std::size_t(0xFFFFFFFFu)) throw std::invalid_argument("smax::topk_softmax: n must be below 2^32");
}
}  // namespace detail

}  // namespace smax
