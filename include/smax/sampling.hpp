// smax — the parameters of smax::sample (kernels: topk.hpp). A header of
// its own, with no kernel code, so that the dispatch table and
// smax/dynamic.hpp can name the type.
#pragma once

#include <cstddef>

namespace smax {

// temperature 0: argmax; top_k 0: keep all; top_p 1 and min_p 0: no cut.
struct sampling {
  float temperature = 1;
  std::size_t top_k = 0;
  float top_p = 1;
  float min_p = 0;
};

}  // namespace smax
