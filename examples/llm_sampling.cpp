// Sampling tokens from an LLM's logits: temperature, top-k, top-p and min-p
// without sorting the vocabulary.
//
// A synthetic logit row of Qwen's vocabulary size (151936 entries: a long
// tail of small logits and a few dozen plausible tokens), then a few hundred
// tokens drawn with the usual settings, each step at its own offset of the
// same seed (the generator is counter-based: step t's draw does not depend
// on the steps before it, or on threads). Checks that every token lies in
// the kept set (the top 40 by logit), that the most drawn token is among the
// three most probable (they are close), that a step repeated gives the same
// token, that temperature 0 is the argmax, and prints the top 5 of softmax
// with topk_softmax.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include <smax/smax.hpp>

int main() {
  const std::size_t vocab = 151936, steps = 400;
  std::mt19937_64 gen(7);
  std::normal_distribution<float> tail(-2.0f, 1.5f);
  std::vector<float> logits(vocab);
  for (auto& v : logits) v = tail(gen);
  // A few dozen plausible next tokens well above the tail.
  std::uniform_int_distribution<std::size_t> pick(0, vocab - 1);
  for (int j = 0; j < 30; ++j) logits[pick(gen)] = 12.0f - 0.25f * static_cast<float>(j);

  smax::sampling s;
  s.temperature = 0.8f;
  s.top_k = 40;
  s.top_p = 0.95f;
  s.min_p = 0.05f;
  const std::uint64_t seed = 1234;

  // The top 40 by logit: what top_k keeps.
  std::vector<float> probs(40);
  std::vector<std::uint32_t> index(40);
  smax::topk_softmax(logits.data(), vocab, 40, probs.data(), index.data());
  std::printf("top 5 of softmax(logits):");
  for (int j = 0; j < 5; ++j) std::printf("  %u: %.4f", index[j], probs[j]);
  std::printf("\n");

  std::vector<std::size_t> count(vocab, 0);
  bool ok = true;
  for (std::size_t t = 0; t < steps; ++t) {
    const std::size_t token = smax::sample(logits.data(), vocab, s, seed, t);
    bool kept = false;
    for (std::uint32_t i : index) kept = kept || i == token;
    if (!kept) {
      std::printf("step %zu: token %zu is outside the top 40\n", t, token);
      ok = false;
    }
    ++count[token];
  }
  std::size_t most = 0;
  for (std::size_t i = 0; i < vocab; ++i)
    if (count[i] > count[most]) most = i;
  std::printf("%zu tokens drawn; most drawn %zu (%zu times), the argmax is %u\n", steps, most, count[most], index[0]);
  ok = ok && (most == index[0] || most == index[1] || most == index[2]);
  ok = ok && smax::sample(logits.data(), vocab, s, seed, 17) == smax::sample(logits.data(), vocab, s, seed, 17);
  smax::sampling greedy = s;
  greedy.temperature = 0;
  ok = ok && smax::sample(logits.data(), vocab, greedy, seed, 0) == index[0];
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
