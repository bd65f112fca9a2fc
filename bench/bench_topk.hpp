// Shared by bench_topk.cpp and peer_torch_topk.cpp: the inputs and the
// sampler settings of the top-k / sampling benchmarks.
#pragma once

#include <map>
#include <vector>

#include <smax/types.hpp>
#include <smax/detail/topk.hpp>

#include "common.hpp"

namespace smax_bench {
namespace topk_bench {

inline std::vector<std::size_t> vocab_sizes() { return {32000, 128256, 151936, 1000000}; }

// One logit row per size, filled once.
inline const std::vector<float>& logits(std::size_t n) {
  static std::map<std::size_t, std::vector<float>> rows;
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  auto& v = rows[n];
  if (v.size() != n) {
    v.resize(n);
    fill_logits(v.data(), n, 19);
  }
  return v;
}

// The target setting: top_k 40, top_p 0.95 (temperature 0.8).
inline smax::sampling sampler_settings() {
  smax::sampling s;
  s.temperature = 0.8f;
  s.top_k = 40;
  s.top_p = 0.95f;
  return s;
}

// The u smax::sample draws with (scalar code, no ISA).
inline double uniform(std::uint64_t seed, std::uint64_t offset) { return smax::detail::sample_uniform(seed, offset); }

}  // namespace topk_bench
}  // namespace smax_bench
