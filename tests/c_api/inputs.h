/* Inputs shared by the C test (c_api_test.c) and its C++ reference
 * (c_api_reference.cpp): both must generate exactly the same arrays. C99 and
 * C++. */
#ifndef SMAX_C_API_TEST_INPUTS_H
#define SMAX_C_API_TEST_INPUTS_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define CASE_N 1031     /* crosses every vector width with a tail */
#define CASE_ROWS 5
#define CASE_COLS 263
#define CASE_LD 270     /* row stride above cols */

/* Uniform in [lo, hi) from a 64-bit LCG; the high bits only. */
static double case_uniform(uint64_t* s, double lo, double hi) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (double)(*s >> 11) * (1.0 / 9007199254740992.0);
}

/* logits in [-12, 8) with a -inf every 97th entry; probabilities in [0, 1);
 * upstream gradients in [-1, 1). len elements each. */
#define CASE_FILL(T, x, p, d, len, seed)                                   \
  do {                                                                     \
    uint64_t s_ = (seed);                                                  \
    for (size_t i_ = 0; i_ < (len); ++i_) {                                \
      (x)[i_] = (T)case_uniform(&s_, -12.0, 8.0);                          \
      if (i_ % 97 == 13) (x)[i_] = (T)(-INFINITY);                         \
      (p)[i_] = (T)case_uniform(&s_, 0.0, 1.0);                            \
      (d)[i_] = (T)case_uniform(&s_, -1.0, 1.0);                           \
    }                                                                      \
  } while (0)

#endif
