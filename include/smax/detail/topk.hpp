// smax — top-k softmax and token sampling (the LLM sampler's inner loop),
// without sorting the vocabulary.
//
// Selection (select_top): one read of x keeps a candidate buffer and a
// threshold t, the value of the k-th best candidate so far. A chunk of four
// vectors costs four compares against t; only the lanes of a chunk above t
// (or NaN) are looked at one by one (x86: from the compare's bit mask), and
// appended.
// When the buffer reaches 2k + 16 entries, nth_element keeps the k best and
// raises t. On random input t settles after a few thousand elements and
// about k ln(n / k) entries are ever appended; on sorted input every entry
// is, and the pruning still costs O(1) amortized per entry. Only the k
// survivors are sorted (the output order). "Best" is the library's order:
// larger value first, lower index on ties; an entry equal to t never enters,
// since everything already kept at t has a lower index.
//
// topk_softmax: the selection, then the softmax sum of softmax's three-pass
// kernel (sum_map of exp_ref against the max, the best candidate) in a
// second read, then the k outputs with the same exp_ref: probs[j] is
// bitwise softmax(x, three_pass_recompute)[index[j]].
//
// sample: weights w_i = e^((x_i - m) / T) (m = max, so the top weight is 1).
//  * top_k > 0 (below n): select the top_k, weights in double, then top_p
//    (a prefix of the sorted candidates) and min_p (w >= min_p) on them.
//  * top_k = 0, top_p < 1: a histogram of the mass over buckets of
//    log-weight (one exp pass) gives the bucket where the nucleus ends; only
//    that bucket's entries are collected and sorted (a second pass), which
//    fixes the boundary entry. Then as below, with the kept set cut there.
//  * top_k = 0, top_p = 1: no order is needed: the kept set is w >= min_p;
//    one exp pass for its mass, and a second, by blocks, until the draw's
//    point is passed.
// The draw: u in (0, 1) from Philox4x32-10 (philox.hpp's generator and key
// schedule, see sample_uniform), then the first kept entry whose running
// mass passes u times the kept mass, walking the kept set sorted where it
// was selected, by index otherwise. No step depends on a thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "arguments.hpp"
#include "exp.hpp"
#include "loops.hpp"
#include "philox.hpp"
#include "softmax.hpp"

namespace smax {
namespace detail {

template <class T>
struct topk_entry {
  T v;
  std::size_t i;
};

template <class T>
SMAX_INLINE bool ranks_before(const topk_entry<T>& a, const topk_entry<T>& b) noexcept {
  return a.v > b.v || (a.v == b.v && a.i < b.i);
}

// Bit l set where lane l of v is above t or NaN (not v <= t), on the ISAs
// with a compare-to-bits instruction (x86: AVX-512 masks, movemask);
// has_hit_bits_v is false elsewhere (NEON), where the lanes are tested one
// by one. xsimd 8.1 has no batch_bool to bits.
template <class A>
constexpr bool has_hit_bits_v =
    std::is_base_of<xsimd::sse2, A>::value || std::is_base_of<xsimd::avx, A>::value || is_avx512_v<A>;

template <class A, class T>
SMAX_INLINE std::uint32_t hit_bits(xsimd::batch<T, A> v, xsimd::batch<T, A> t) noexcept {
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    if constexpr (std::is_same<T, float>::value)
      return _mm512_cmp_ps_mask(v, t, _CMP_NLE_UQ);
    else
      return _mm512_cmp_pd_mask(v, t, _CMP_NLE_UQ);
  }
#endif
#if defined(__AVX__)
  if constexpr (std::is_base_of<xsimd::avx, A>::value && !is_avx512_v<A>) {
    if constexpr (std::is_same<T, float>::value)
      return static_cast<std::uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(v, t, _CMP_NLE_UQ)));
    else
      return static_cast<std::uint32_t>(_mm256_movemask_pd(_mm256_cmp_pd(v, t, _CMP_NLE_UQ)));
  }
#endif
#if defined(__SSE2__)
  if constexpr (std::is_base_of<xsimd::sse2, A>::value && !std::is_base_of<xsimd::avx, A>::value) {
    if constexpr (std::is_same<T, float>::value)
      return static_cast<std::uint32_t>(_mm_movemask_ps(_mm_cmpnle_ps(v, t)));
    else
      return static_cast<std::uint32_t>(_mm_movemask_pd(_mm_cmpnle_pd(v, t)));
  }
#endif
  (void)v;
  (void)t;
  return 0;  // not called: has_hit_bits_v<A> is false
}

// The min(k, number of entries above -inf) best entries of x[0..n), sorted
// best first, into `best`; k >= 1. False, with `best` unspecified, if x holds
// a NaN. x may be 16-bit (S) with T float: each value compared as widened.
template <class A, class S, class T>
SMAX_FLATTEN bool select_top(const S* x, std::size_t n, std::size_t k, std::vector<topk_entry<T>>& best) {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  // k + 16 entries between prunes: the threshold keeps up with the k-th
  // best so far (with more, it lags, and many more chunks get scanned),
  // and a prune, O(cap), still costs O(1) per entry appended.
  const std::size_t cap = 2 * k + 16;
  best.clear();
  best.reserve(cap);
  T t = -std::numeric_limits<T>::infinity();
  B tb(t);
  const auto prune = [&] {
    std::nth_element(best.begin(), best.begin() + static_cast<std::ptrdiff_t>(k - 1), best.end(), ranks_before<T>);
    best.resize(k);
    t = best[k - 1].v;
    tb = B(t);
  };
  // Entry i if above t; false at a NaN (v > t and v <= t both false).
  const auto offer = [&](std::size_t i) {
    const T v = static_cast<T>(x[i]);
    if (v > t) {
      best.push_back({v, i});
      if (best.size() == cap) prune();
    } else if (!(v <= t)) {
      return false;
    }
    return true;
  };
  const auto scan = [&](std::size_t i0, std::size_t len) {
    for (std::size_t j = 0; j < len; ++j)
      if (!offer(i0 + j)) return false;
    return true;
  };
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    // v <= t is false for v > t and for NaN: one test for both.
    if (xsimd::all((load_as<A, T>(x + i) <= tb) & (load_as<A, T>(x + i + W) <= tb) &
                   (load_as<A, T>(x + i + 2 * W) <= tb) & (load_as<A, T>(x + i + 3 * W) <= tb)))
      continue;
    // Only the lanes with a hit (t may rise meanwhile). The vectors are
    // loaded again (from L1): kept from above, they were spilled to the
    // stack on every chunk.
    for (std::size_t u = 0; u < 4; ++u) {
      const B v = load_as<A, T>(x + i + u * W);
      if constexpr (has_hit_bits_v<A>) {
        for (std::uint32_t bits = hit_bits<A, T>(v, tb); bits; bits &= bits - 1)
          if (!offer(i + u * W + static_cast<std::size_t>(__builtin_ctz(bits)))) return false;
      } else if (!xsimd::all(v <= tb) && !scan(i + u * W, W)) {
        return false;
      }
    }
  }
  if (!scan(i, n - i)) return false;
  if (best.size() > k) prune();
  std::sort(best.begin(), best.end(), ranks_before<T>);
  return true;
}

// Number of +inf entries.
template <class S>
std::size_t count_posinf(const S* x, std::size_t n) noexcept {
  using T = compute_t<S>;
  std::size_t c = 0;
  for (std::size_t i = 0; i < n; ++i) c += (static_cast<T>(x[i]) == std::numeric_limits<T>::infinity());
  return c;
}

// The k largest of softmax(x) (k >= 1, k <= n < 2^32), best first. x may
// be 16-bit (S) with T float: the float kernel's results on the widened x.
template <class A, class S, class T>
void topk_softmax(const S* x, std::size_t n, std::size_t k, T* probs, std::uint32_t* index) {
  if (k == 0) return;
  constexpr T inf = std::numeric_limits<T>::infinity();
  std::vector<topk_entry<T>> best;
  if (!select_top<A>(x, n, k, best)) {
    // Any NaN: every probability NaN, indices 0 .. k-1.
    for (std::size_t j = 0; j < k; ++j) index[j] = static_cast<std::uint32_t>(j);
    return fill(probs, k, std::numeric_limits<T>::quiet_NaN());
  }
  // Fewer than k entries above -inf: the -inf ones follow, lowest index first.
  for (std::size_t i = 0; i < n && best.size() < k; ++i)
    if (static_cast<T>(x[i]) == -inf) best.push_back({-inf, i});
  for (std::size_t j = 0; j < k; ++j) {
    index[j] = static_cast<std::uint32_t>(best[j].i);
    probs[j] = best[j].v;
  }
  const T m = best[0].v;
  if (m == -inf) return fill(probs, k, T(0));
  if (m == inf) {
    const T share = static_cast<T>(1.0 / static_cast<double>(count_posinf(x, n)));
    for (std::size_t j = 0; j < k; ++j) probs[j] = best[j].v == inf ? share : T(0);
    return;
  }
  // softmax_three_pass's sum and output, on the k entries only.
  if (use_split(m)) {
    double r;
    const T E = ref_exponent(m, r);
    const T lo = clamp_floor(m);
    const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, exp_ref<A, T>(lo, E, T(1)));
    map<A>(probs, probs, k, exp_ref<A, T>(lo, E, static_cast<T>(1.0 / s)));
  } else {
    const shifted_exp<A, T, false> ex(m);
    const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, ex);
    map<A>(probs, probs, k, scaled_shifted_exp<A, T, false>(ex, static_cast<T>(1.0 / s)));
  }
}

// u in (0, 1): 52 random bits (word 1's 32 and word 0's top 20) plus 1/2,
// times 2^-52, from the counter (offset low, offset high, 1, 0) under the
// key seed. gumbel_noise's counters have a third word 0, so the sampler's
// stream never shares a block with the noise of the same seed.
inline double sample_uniform(std::uint64_t seed, std::uint64_t offset) noexcept {
  std::uint32_t c[4] = {static_cast<std::uint32_t>(offset), static_cast<std::uint32_t>(offset >> 32), 1u, 0u};
  philox_scalar(c, philox_key(seed));
  const std::uint64_t bits = (std::uint64_t(c[1]) << 20) | (c[0] >> 12);
  return (static_cast<double>(bits) + 0.5) * 0x1p-52;
}

// e^(c (v - m)) in double for a finite m (v <= m); 0 where it would be
// subnormal. m = +inf: 1 for the +inf entries, 0 for the rest.
template <class T>
SMAX_INLINE double sample_weight(T v, T m, double c) noexcept {
  if (m == std::numeric_limits<T>::infinity()) return v == m ? 1.0 : 0.0;
  const double a = c * (static_cast<double>(v) - static_cast<double>(m));
  return a > -700.0 ? std::exp(a) : 0.0;
}

// The draw from sorted candidates: the nucleus (smallest prefix whose mass
// reaches top_p * total), cut at w >= min_p (the top weight is 1), then u.
template <class T>
std::size_t draw_sorted(const std::vector<topk_entry<T>>& cand, const std::vector<double>& w, double total,
                        const sampling& s, double u) {
  const double need = static_cast<double>(s.top_p) * total;
  std::size_t len = 0;
  double mass = 0;
  while (len < cand.size()) {
    if (len > 0 && w[len] < static_cast<double>(s.min_p)) break;
    mass += w[len++];
    if (mass >= need) break;
  }
  const double target = u * mass;
  double acc = 0;
  for (std::size_t j = 0; j < len; ++j) {
    acc += w[j];
    if (acc > target && w[j] > 0) return cand[j].i;
  }
  std::size_t j = len - 1;  // rounding: the last kept entry of positive weight
  while (j > 0 && !(w[j] > 0)) --j;
  return cand[j].i;
}

// sample with every entry kept by top_k and a finite max m: the nucleus
// boundary from a histogram of the weights (top_p < 1), then a draw in
// index order over the kept set, by blocks.
template <class A, class S, class T>
std::size_t sample_all(const S* x, std::size_t n, const sampling& s, T m, double c, double u) {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t BS = 2048;  // elements per block (the buffers stay in L1)
  alignas(64) T wb[BS];
  alignas(64) T kb[BS];
  // x[b0 .. b0 + len) as T: x itself, or 16-bit x widened into xw.
  alignas(64) T xw[std::is_same<S, T>::value ? 1 : BS];
  const auto block_x = [&](std::size_t b0, std::size_t len) -> const T* {
    if constexpr (std::is_same<S, T>::value) {
      (void)len;
      (void)xw;
      return x + b0;
    } else {
      widen_block<A>(x + b0, xw, len);
      return xw;
    }
  };
  const B mb(m), cb(static_cast<T>(c)), zero(T(0));
  const shifted_exp<A, T, false> ex(T(0));
  const auto weight = [ex, mb, cb](B v) { return ex(cb * (v - mb)); };

  // Kept: x > xb, or x == xb and index <= ib (`dropped`: the indices of the
  // entries equal to xb above ib, ascending). xb = -inf: every entry.
  T xb = -std::numeric_limits<T>::infinity();
  std::vector<std::size_t> dropped;
  if (s.top_p < 1.0f) {
    // Buckets of 1/64 of a unit of log-weight, (m - x) c in [0, 64); the
    // last one takes everything below. A bucket's entries all rank after
    // those of the buckets before it, so the nucleus is whole buckets plus
    // a ranked prefix of the bucket where the mass reaches top_p.
    constexpr std::size_t NB = 4096;
    const auto key = [mb, cb](B v) { return xsimd::min(((mb - v) * cb) * B(T(64)), B(T(NB - 1))); };
    std::vector<double> hist(NB, 0.0);
    for (std::size_t b0 = 0; b0 < n; b0 += BS) {
      const std::size_t len = std::min(BS, n - b0);
      const T* xs = block_x(b0, len);
      map<A>(xs, wb, len, weight);
      map<A>(xs, kb, len, key);
      for (std::size_t j = 0; j < len; ++j) hist[static_cast<std::size_t>(kb[j])] += static_cast<double>(wb[j]);
    }
    double total = 0;
    for (double h : hist) total += h;
    const double need = static_cast<double>(s.top_p) * total;
    std::size_t bstar = 0;
    double before = 0;
    while (bstar + 1 < NB && before + hist[bstar] < need) before += hist[bstar++];
    struct entry {
      topk_entry<T> e;
      double w;
    };
    std::vector<entry> edge;
    for (std::size_t b0 = 0; b0 < n; b0 += BS) {
      const std::size_t len = std::min(BS, n - b0);
      const T* xs = block_x(b0, len);
      map<A>(xs, wb, len, weight);
      map<A>(xs, kb, len, key);
      for (std::size_t j = 0; j < len; ++j)
        if (static_cast<std::size_t>(kb[j]) == bstar) edge.push_back({{xs[j], b0 + j}, static_cast<double>(wb[j])});
    }
    std::sort(edge.begin(), edge.end(), [](const entry& a, const entry& b) { return ranks_before(a.e, b.e); });
    if (!edge.empty()) {  // (empty only if rounding left the mass short of need: keep all)
      std::size_t last = 0;
      double acc = before;
      while (last + 1 < edge.size() && (acc += edge[last].w) < need) ++last;
      xb = edge[last].e.v;
      for (std::size_t j = last + 1; j < edge.size() && edge[j].e.v == xb; ++j) dropped.push_back(edge[j].e.i);
      std::sort(dropped.begin(), dropped.end());
    }
  }

  // Block b's kept weights into wb (0 where not kept, w < min_p included),
  // and their sum: the same bits in the pass for the total and in the walk.
  const B xbv(xb), minp(static_cast<T>(s.min_p));
  const auto kept = [weight, xbv, minp, zero](B v) {
    const B e = weight(v);
    return xsimd::select((v >= xbv) & (e >= minp), e, zero);
  };
  const auto block = [&](std::size_t b0, std::size_t len) {
    map<A>(block_x(b0, len), wb, len, kept);
    for (auto it = std::lower_bound(dropped.begin(), dropped.end(), b0); it != dropped.end() && *it < b0 + len; ++it)
      wb[*it - b0] = T(0);
    return sum_map<A>(wb, static_cast<T*>(nullptr), len, [](B v) { return v; });
  };
  double total = 0;
  for (std::size_t b0 = 0; b0 < n; b0 += BS) total += block(b0, std::min(BS, n - b0));
  const double target = u * total;
  double acc = 0;
  std::size_t last = n;  // the last kept entry passed
  for (std::size_t b0 = 0; b0 < n; b0 += BS) {
    const std::size_t len = std::min(BS, n - b0);
    const double bs = block(b0, len);
    if (!(bs > 0)) continue;
    if (acc + bs > target) {
      double a = acc;
      for (std::size_t j = 0; j < len; ++j) {
        if (!(wb[j] > T(0))) continue;
        last = b0 + j;
        a += static_cast<double>(wb[j]);
        if (a > target) return last;
      }
      return last;  // the block's own rounding: its last kept entry
    }
    for (std::size_t j = len; j-- > 0;)
      if (wb[j] > T(0)) {
        last = b0 + j;
        break;
      }
    acc += bs;
  }
  return last;  // rounding: the last kept entry (the max is kept: total >= 1)
}

// x may be 16-bit (S): the float kernel's draw on the widened x.
template <class A, class S>
std::size_t sample(const S* x, std::size_t n, const sampling& s, std::uint64_t seed, std::uint64_t offset) {
  using T = compute_t<S>;
  constexpr T inf = std::numeric_limits<T>::infinity();
  std::vector<topk_entry<T>> cand;
  const std::size_t top_k = (s.top_k == 0 || s.top_k >= n || s.temperature == 0.0f) ? n : s.top_k;
  // Any NaN, or every logit -inf: no entry can be drawn. (The top_k
  // selection finds the max too; otherwise the top 1 does.)
  if (!select_top<A>(x, n, top_k < n ? top_k : 1, cand) || cand.empty()) return n;
  if (s.temperature == 0.0f) return cand[0].i;
  const T m = cand[0].v;
  // 1 / temperature within T's normal range: a one-hot above it either
  // way, and c (v - m) is then never inf * 0 or subnormal.
  const double c = std::min(std::max(1.0 / static_cast<double>(s.temperature),
                                     static_cast<double>(std::numeric_limits<T>::min())),
                            static_cast<double>(std::numeric_limits<T>::max()));
  const double u = sample_uniform(seed, offset);
  if (top_k < n) {
    std::vector<double> w(cand.size());
    for (std::size_t j = 0; j < cand.size(); ++j) w[j] = sample_weight(cand[j].v, m, c);
    double total = 0;
    for (double v : w) total += v;
    return draw_sorted(cand, w, total, s, u);
  }

  // Every entry is kept by top_k.
  if (m == inf) {
    // The +inf entries share the mass: the nucleus is the first len of
    // them by index; min_p keeps them all.
    const std::size_t cnt = count_posinf(x, n);
    std::size_t len = 1;
    while (static_cast<double>(len) < static_cast<double>(s.top_p) * static_cast<double>(cnt)) ++len;
    const std::size_t target = static_cast<std::size_t>(u * static_cast<double>(len));
    std::size_t seen = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (static_cast<T>(x[i]) == inf && seen++ == target) return i;
    return cand[0].i;  // not reached: target < len <= cnt
  }
  return sample_all<A>(x, n, s, m, c, u);
}

}  // namespace detail
}  // namespace smax
