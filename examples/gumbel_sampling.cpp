// Sampling categories with Gumbel-softmax.
//
// The Gumbel-max trick: argmax(logits + g), with g standard Gumbel noise, is
// a sample from softmax(logits). smax::gumbel_softmax with hard = true writes
// the one-hot of that argmax; with hard = false it writes the relaxed,
// differentiable sample softmax((logits + g) / tau) (Jang, Gu & Poole 2016).
// The noise comes from a counter-based generator keyed by the seed, so a
// seed gives the same sample on every ISA and for any number of threads.
//
// Here: 100000 samples of one categorical distribution in one batched call
// (row r draws with the seed smax::gumbel_row_seed(seed, r)), their
// frequencies against softmax(logits) by a chi-square test, a relaxed sample
// at two temperatures, and the reproducibility of a seed.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include <smax/smax.hpp>

int main() {
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f, -1.0f, 0.0f};
  const std::size_t k = logits.size(), samples = 100000;
  const std::uint64_t seed = 2026;

  std::vector<float> probs(k);
  smax::softmax(logits.data(), probs.data(), k);

  // One row per sample, every row the same logits; hard one-hot rows out.
  std::vector<float> rows(samples * k), onehot(samples * k);
  for (std::size_t r = 0; r < samples; ++r) std::memcpy(&rows[r * k], logits.data(), k * sizeof(float));
  smax::thread_pool pool;
  smax::gumbel_softmax(smax::matrix_view<const float>(rows.data(), samples, k),
                       smax::matrix_view<float>(onehot.data(), samples, k), 1.0f, seed, /*hard=*/true, &pool);

  std::vector<std::size_t> count(k, 0);
  bool one_hot = true;
  for (std::size_t r = 0; r < samples; ++r) {
    std::size_t ones = 0;
    for (std::size_t c = 0; c < k; ++c) {
      const float v = onehot[r * k + c];
      if (v == 1.0f) {
        ++count[c];
        ++ones;
      } else if (v != 0.0f) {
        one_hot = false;
      }
    }
    one_hot = one_hot && ones == 1;
  }
  // Pearson's chi-square against softmax(logits), k - 1 = 4 degrees of
  // freedom: 18.47 is its 99.9% quantile.
  double chi2 = 0;
  std::printf("category  logit  softmax  sampled\n");
  for (std::size_t c = 0; c < k; ++c) {
    const double expected = probs[c] * static_cast<double>(samples);
    chi2 += (count[c] - expected) * (count[c] - expected) / expected;
    std::printf("%8zu  %5.1f  %7.4f  %7.4f\n", c, logits[c], probs[c],
                static_cast<double>(count[c]) / static_cast<double>(samples));
  }
  std::printf("%zu samples, %zu threads: chi-square = %.2f (4 degrees of freedom; 99.9%% quantile 18.47)\n", samples,
              pool.concurrency(), chi2);

  // A relaxed sample: one row's noise at two temperatures. Low tau is close
  // to the one-hot of the same sample, high tau close to uniform.
  const std::uint64_t seed0 = smax::gumbel_row_seed(seed, 0);
  for (float tau : {0.1f, 5.0f}) {
    std::vector<float> soft(k);
    smax::gumbel_softmax(logits.data(), soft.data(), k, tau, seed0);
    std::printf("tau = %-4g:", tau);
    for (float v : soft) std::printf(" %.4f", v);
    std::printf("\n");
  }

  // Row 0 of the batch is the single-vector call with seed0, bit for bit,
  // and the same seed twice gives the same bits.
  std::vector<float> a(k), b(k);
  smax::gumbel_softmax(logits.data(), a.data(), k, 1.0f, seed0, /*hard=*/true);
  smax::gumbel_softmax(logits.data(), b.data(), k, 1.0f, seed0, /*hard=*/true);
  const bool reproducible = std::memcmp(a.data(), b.data(), k * sizeof(float)) == 0 &&
                            std::memcmp(a.data(), onehot.data(), k * sizeof(float)) == 0;
  std::printf("every row one-hot: %s; seed reproducible, row 0 == single call: %s\n", one_hot ? "yes" : "no",
              reproducible ? "yes" : "no");
  return one_hot && reproducible && chi2 < 18.47 ? 0 : 1;
}
