// Softmax of an attention score matrix: S = Q K^T / sqrt(d) with a causal
// mask (token i may not look at j > i: -inf, which smax masks to exactly 0),
// every row normalized on a thread pool. The result does not depend on the
// number of threads, bit for bit. Then the multi-head form with the
// options fused in (scale, a mask broadcast over heads, ALiBi, causal
// lengths, sinks).
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
  const bool single_ok = worst < 1e-5 && masked_zero && same && std::fabs(probs[0] - 1.0f) <= 1e-6f;

  // Multi-head, with the options fused into the softmax (attention_options):
  // the raw dot products Q_h K_h^T of 4 heads ([head][query][key]), the
  // 1/sqrt(d) scale, a padding mask shared by every head (the last 32 keys
  // are padding: -inf), ALiBi position biases in that same mask scaled per
  // head by ggml's slopes (max_bias = 8), causality as a length per row
  // (causal(0): query i sees keys 0..i) and a learned "sink" logit per head
  // in the denominator only (gpt-oss). x is read once; nothing is
  // materialized but the probabilities.
  const std::size_t heads = 4, queries = 256, keys = 256;
  std::vector<float> dots(heads * queries * keys);
  for (std::size_t h = 0; h < heads; ++h)
    for (std::size_t i = 0; i < queries; ++i)
      for (std::size_t j = 0; j < keys; ++j) {
        float dot = 0;
        for (std::size_t c = 0; c < dim; ++c) dot += q[(i + h) % tokens * dim + c] * k[(j + 3 * h) % tokens * dim + c];
        dots[(h * queries + i) * keys + j] = dot;
      }
  std::vector<float> mask(queries * keys);
  for (std::size_t i = 0; i < queries; ++i)
    for (std::size_t j = 0; j < keys; ++j)
      mask[i * keys + j] = j >= keys - 32 ? -std::numeric_limits<float>::infinity()
                                          : -static_cast<float>(i > j ? i - j : j - i);  // ALiBi distance
  const std::vector<float> sinks = {0.0f, 1.0f, -1.0f, 2.0f};
  smax::attention_options<float> o;
  o.scale = scale;
  o.mask = smax::matrix_view<const float>(mask.data(), queries, keys);
  o.heads = heads;
  o.max_bias = 8.0f;
  o.lengths = smax::causal(0);
  o.sinks = sinks.data();
  std::vector<float> p(dots.size());
  smax::softmax(smax::matrix_view<const float>(dots.data(), heads * queries, keys),
                smax::matrix_view<float>(p.data(), heads * queries, keys), o, &pool);

  // Check against a plain double computation of the same thing.
  double worst_mh = 0;
  bool hidden_zero = true;
  for (std::size_t h = 0; h < heads; ++h) {
    const double slope = smax::alibi_slope(h, heads, 8.0);
    for (std::size_t i = 0; i < queries; ++i) {
      const float* row = &dots[(h * queries + i) * keys];
      std::vector<double> z(keys, -INFINITY);
      double m = sinks[h];
      for (std::size_t j = 0; j <= i && j < keys - 32; ++j) {
        z[j] = static_cast<double>(scale) * row[j] + slope * mask[i * keys + j];
        m = std::max(m, z[j]);
      }
      double s = std::exp(sinks[h] - m);
      for (double v : z) s += std::exp(v - m);
      for (std::size_t j = 0; j < keys; ++j) {
        const double ref = std::exp(z[j] - m) / s, got = p[(h * queries + i) * keys + j];
        if (z[j] == -INFINITY && got != 0.0) hidden_zero = false;
        // float's rounding of z (scale x + slope mask) costs |z| 2^-24 each.
        const double bound = 1e-6 + (std::fabs(z[j]) + std::fabs(m)) * 0x1p-23;
        if (ref > 1e-30) worst_mh = std::max(worst_mh, std::fabs(got - ref) / ref / bound);
      }
    }
  }
  std::printf("%zu heads x %zu x %zu causal + padding + ALiBi + sinks: max error / bound %.2f, "
              "masked and future keys zero: %s\n",
              heads, queries, keys, worst_mh, hidden_zero ? "yes" : "no");

  // The training step's backward with the same options: given dL/dp (here
  // dp = V-like values), dL/d(dots) = scale p (dp - p.dp) per row; masked
  // and future keys get 0. Checked against double.
  std::vector<float> dp(p.size()), ddots(p.size());
  for (std::size_t i = 0; i < dp.size(); ++i) dp[i] = std::sin(0.001f * static_cast<float>(i));
  const smax::matrix_view<const float> dots_v(dots.data(), heads * queries, keys), p_v(p.data(), heads * queries, keys),
      dp_v(dp.data(), heads * queries, keys);
  smax::softmax_backward(dots_v, p_v, dp_v, smax::matrix_view<float>(ddots.data(), heads * queries, keys), o, &pool);
  double worst_bw = 0;
  for (std::size_t r = 0; r < heads * queries; ++r) {
    const float *pr = &p[r * keys], *dpr = &dp[r * keys], *dr = &ddots[r * keys];
    double dot = 0, mag = 0;
    for (std::size_t j = 0; j < keys; ++j) dot += double(pr[j]) * dpr[j], mag += std::fabs(double(pr[j]) * dpr[j]);
    for (std::size_t j = 0; j < keys; ++j) {
      const double ref = scale * double(pr[j]) * (dpr[j] - dot);
      const double bound = 1e-5 * scale * std::fabs(double(pr[j])) * (std::fabs(double(dpr[j])) + mag) + 1e-30;
      worst_bw = std::max(worst_bw, std::fabs(dr[j] - ref) / bound);
    }
  }
  std::printf("the backward of it: max error / bound %.2f\n", worst_bw);
  return (single_ok && worst_mh <= 1.0 && hidden_zero && worst_bw <= 1.0) ? 0 : 1;
}
