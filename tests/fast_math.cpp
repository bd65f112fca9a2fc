// Compiled (never run) by the fast_math.* tests: smax refuses -ffast-math
// with a clear #error, since it would delete the NaN/inf handling, unless
// the user opts in with SMAX_ALLOW_FAST_MATH.
#include <smax/smax.hpp>

int main() {
  float x[3] = {1, 2, 3}, y[3];
  smax::softmax(x, y, 3);
  return y[2] > y[0] ? 0 : 1;
}
