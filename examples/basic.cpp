// The smallest use of smax: the softmax of a few logits, on the best ISA this
// file is compiled for (add -mavx2 -mfma or -march=native to your flags).
#include <cstdio>
#include <vector>

#include <smax/smax.hpp>

int main() {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f, 4.0f, -1.0f};
  std::vector<float> probs(logits.size());
  smax::softmax(logits.data(), probs.data(), logits.size());
  double total = 0;
  for (float p : probs) {
    std::printf("%.6f ", p);
    total += p;
  }
  std::printf("\nsum = %.7f\n", total);
  return total > 0.999999 && total < 1.000001 ? 0 : 1;
}
