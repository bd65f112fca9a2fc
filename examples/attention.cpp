// Softmax of an attention score matrix: S = Q K^T / sqrt(d) with a causal
// mask (token i may not look at j > i: -inf, which smax masks to exactly 0),
// every row normalized on a thread pool. The result does not depend on the
// number of threads, bit for bit.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <smax/smax.hpp>

int main() {
  const std::size_t tokens = 512, dim = 64;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(tokens * dim), k(tokens * dim);
  for (auto& v : q) v = normal(gen);
  for (auto& v : k) v = normal(gen);

  // Scores, row-major, with rows padded to a multiple of 16 floats (a stride
  // larger than the row, as a real attention buffer often has).
  const std::size_t stride = (tokens + 15) / 16 * 16 + 16;
  std::vector<float> scores(tokens * stride, 0.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  for (std::size_t i = 0; i < tokens; ++i)
    for (std::size_t j = 0; j < tokens; ++j) {
      float dot = 0;
      for (std::size_t c = 0; c < dim; ++c) dot += q[i * dim + c] * k[j * dim + c];
      scores[i * stride + j] = j <= i ? dot * scale : -std::numeric_limits<float>::infinity();
    }

  // In place, on all cores.
  smax::thread_pool pool;
  std::vector<float> probs = scores;
  smax::softmax(smax::matrix_view<const float>(probs.data(), tokens, tokens, stride),
                smax::matrix_view<float>(probs.data(), tokens, tokens, stride), smax::algorithm::automatic, &pool);

  // Single-threaded, into another buffer: the same bits.
  std::vector<float> serial(tokens * stride, 0.0f);
  smax::softmax(smax::matrix_view<const float>(scores.data(), tokens, tokens, stride),
                smax::matrix_view<float>(serial.data(), tokens, tokens, stride));

  double worst = 0;
  bool masked_zero = true, same = true;
  for (std::size_t i = 0; i < tokens; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < tokens; ++j) {
      s += probs[i * stride + j];
      if (j > i && probs[i * stride + j] != 0.0f) masked_zero = false;
    }
    worst = std::max(worst, std::fabs(s - 1.0));
    same = same && std::memcmp(&probs[i * stride], &serial[i * stride], tokens * sizeof(float)) == 0;
  }
  std::printf("%zu x %zu attention, %zu threads: max |row sum - 1| = %.2e, masked entries zero: %s, "
              "threaded == serial: %s\n",
              tokens, tokens, pool.concurrency(), worst, masked_zero ? "yes" : "no", same ? "yes" : "no");
  // Row 0 attends only to itself: p[0][0] is 1 within softmax's stated
  // accuracy (1e-6 relative; e^x0 and 1/sum are rounded separately).
  std::printf("row 0 attends only to itself: p[0][0] = %.7f\n", probs[0]);
  return (worst < 1e-5 && masked_zero && same && std::fabs(probs[0] - 1.0f) <= 1e-6f) ? 0 : 1;
}
