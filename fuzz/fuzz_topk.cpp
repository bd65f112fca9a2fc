// libFuzzer target: topk_softmax and sample, float and double, every ISA the
// CPU has, misaligned guarded outputs. topk_softmax: the indices against a
// sort, the probabilities bitwise against softmax(three_pass_recompute) at
// those indices, the NaN rule, k > n throwing before any write. sample: bad
// settings throw; otherwise n exactly for NaN or all -inf input, the argmax
// at temperature 0, a drawn index ranked inside top_k and not below
// min_p * max p (with a rounding margin), the same index twice, and the
// batched form's row 0 equal to the call with gumbel_row_seed(seed, 0).
// bf16 and fp16 (any bit patterns): both read x as 16-bit, and must give
// the float call's indices, probabilities (rounded once) and draws on the
// widened x, and refuse exactly what it refuses.
#include "common.hpp"

#include <numeric>
#include <stdexcept>

namespace {

using smax_fuzz::fail;

template <class T>
std::vector<std::size_t> ranked(const std::vector<T>& x) {
  std::vector<std::size_t> r(x.size());
  std::iota(r.begin(), r.end(), std::size_t(0));
  std::sort(r.begin(), r.end(), [&](std::size_t a, std::size_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  return r;
}

template <class T>
void fuzz_topk(smax_fuzz::stream& in, const std::vector<T>& x) {
  const std::size_t n = x.size();
  const std::size_t k = std::min<std::size_t>(in.size(n + 1), n + 1);
  const std::size_t off = in.byte();
  smax_fuzz::guarded<T> probs(k, off);
  smax_fuzz::guarded<std::uint32_t> index(k, off >> 2);
  if (k > n) {
    try {
      smax::dynamic::topk_softmax(x.data(), n, k, probs.data(), index.data());
      fail("topk_softmax: k > n did not throw");
    } catch (const std::invalid_argument&) {
    }
    probs.check_guards("topk_softmax probs");
    index.check_guards("topk_softmax index");
    return;
  }
  smax::dynamic::topk_softmax(x.data(), n, k, probs.data(), index.data());
  probs.check_guards("topk_softmax probs");
  index.check_guards("topk_softmax index");
  {
    // The batched form on the same data as a one-row matrix: the same bits.
    std::vector<T> bp(k);
    std::vector<std::uint32_t> bi(k);
    smax::dynamic::topk_softmax(smax::matrix_view<const T>(x.data(), 1, n), k, smax::matrix_view<T>(bp.data(), 1, k),
                                smax::matrix_view<std::uint32_t>(bi.data(), 1, k));
    for (std::size_t j = 0; j < k; ++j)
      if (bi[j] != index[j] || std::memcmp(&bp[j], &probs[j], sizeof(T)) != 0)
        fail("topk_softmax: the batched form's row differs from the vector call");
  }
  if (k == 0) return;
  if (smax_fuzz::any_nan(x)) {
    for (std::size_t j = 0; j < k; ++j)
      if (probs[j] == probs[j] || index[j] != j) fail("topk_softmax: NaN input, output not NaN / 0..k-1");
    return;
  }
  const auto order = ranked(x);
  std::vector<T> y(n);
  smax::dynamic::softmax(x.data(), y.data(), n, smax::algorithm::three_pass_recompute);
  for (std::size_t j = 0; j < k; ++j) {
    if (index[j] != order[j]) fail("topk_softmax: index " + std::to_string(j) + " differs from the sort");
    if (std::memcmp(&probs[j], &y[order[j]], sizeof(T)) != 0)
      fail("topk_softmax: probability " + std::to_string(j) + " differs from softmax's");
  }
}

template <class T>
void fuzz_sample(smax_fuzz::stream& in, const std::vector<T>& x) {
  const std::size_t n = x.size();
  smax::sampling s;
  s.temperature = smax_fuzz::param<float>(in, {0.0f, 0.5f, 1.0f, 1.0f, 2.0f, 1e-30f, 1e30f});
  s.top_k = in.byte() < 128 ? 0 : in.size(n + 1);
  s.top_p = smax_fuzz::param<float>(in, {1.0f, 1.0f, 0.95f, 0.9f, 0.5f, 1e-6f, 2.0f});
  s.min_p = smax_fuzz::param<float>(in, {0.0f, 0.0f, 0.05f, 0.1f, 0.5f, 1.0f, 1.5f});
  const std::uint64_t seed = in.u64(), offset = in.u64();
  const bool valid = n > 0 && s.temperature >= 0 && std::isfinite(s.temperature) && s.top_k <= n && s.top_p > 0 &&
                     s.top_p <= 1 && s.min_p >= 0 && s.min_p <= 1;
  std::size_t got;
  try {
    got = smax::dynamic::sample(x.data(), n, s, seed, offset);
  } catch (const std::invalid_argument&) {
    if (valid) fail("sample: valid settings threw");
    return;
  }
  if (!valid) fail("sample: invalid settings did not throw");
  if (got != smax::dynamic::sample(x.data(), n, s, seed, offset)) fail("sample: not reproducible");
  std::size_t batched = n + 1;
  smax::dynamic::sample(smax::matrix_view<const T>(x.data(), 1, n), &batched, s, seed, offset);
  if (batched != smax::dynamic::sample(x.data(), n, s, smax::gumbel_row_seed(seed, 0), offset))
    fail("sample: batched row 0 differs from the single call");
  const bool none = smax_fuzz::any_nan(x) ||
                    std::all_of(x.begin(), x.end(), [](T v) { return v == -std::numeric_limits<T>::infinity(); });
  if (none) {
    if (got != n) fail("sample: NaN or all -inf input did not give n");
    return;
  }
  if (got >= n) fail("sample: index out of range");
  const auto order = ranked(x);
  const std::size_t rank = static_cast<std::size_t>(std::find(order.begin(), order.end(), got) - order.begin());
  if (s.temperature == 0) {
    if (got != order[0]) fail("sample: temperature 0 is not the argmax");
    return;
  }
  if (s.top_k && rank >= s.top_k) fail("sample: drawn index outside top_k");
  const long double m = x[order[0]];
  if (m == std::numeric_limits<T>::infinity()) {
    if (x[got] != x[order[0]]) fail("sample: +inf present, drew a finite entry");
    return;
  }
  const long double c = std::min<long double>(1.0L / s.temperature, std::numeric_limits<T>::max());
  const long double w = std::exp(c * (static_cast<long double>(x[got]) - m));
  if (w < static_cast<long double>(s.min_p) * (1 - 1e-5L) - 1e-300L) fail("sample: drawn index below min_p");
}

template <class T>
void run(smax_fuzz::stream& in) {
  const std::vector<T> x = in.values<T>(in.size(3000));
  smax_fuzz::context().clear();
  smax_fuzz::describe("x", x);
  if (in.byte() & 1)
    fuzz_sample(in, x);
  else
    fuzz_topk(in, x);
}

template <class H>
void run_half(smax_fuzz::stream& in) {
  const std::size_t n = in.size(3000);
  std::vector<H> x(n);
  std::vector<float> xf(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t lo = in.byte(), hi = in.byte();
    x[i] = H::from_bits(static_cast<std::uint16_t>(lo | hi << 8));
    xf[i] = static_cast<float>(x[i]);
  }
  smax_fuzz::context().clear();
  smax_fuzz::describe("x (widened)", xf);
  const std::size_t k = std::min<std::size_t>(in.size(n + 1), n + 1);
  std::vector<H> p(k);
  std::vector<float> pf(k);
  std::vector<std::uint32_t> ix(k), ixf(k);
  bool threw = false, threw_f = false;
  try {
    smax::dynamic::topk_softmax(x.data(), n, k, p.data(), ix.data());
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  try {
    smax::dynamic::topk_softmax(xf.data(), n, k, pf.data(), ixf.data());
  } catch (const std::invalid_argument&) {
    threw_f = true;
  }
  if (threw != threw_f) fail("16-bit topk_softmax: refused where the float call was not, or the reverse");
  if (!threw) {
    if (ix != ixf) fail("16-bit topk_softmax: indices differ from the float call's");
    for (std::size_t j = 0; j < k; ++j)
      if (p[j].bits != H(pf[j]).bits) fail("16-bit topk_softmax: probability " + std::to_string(j) + " differs");
  }
  smax::sampling s;
  s.temperature = smax_fuzz::param<float>(in, {0.0f, 0.5f, 1.0f, 2.0f, 1e-30f, -1.0f});
  s.top_k = in.byte() < 128 ? 0 : in.size(n + 1);
  s.top_p = smax_fuzz::param<float>(in, {1.0f, 0.95f, 0.5f, 1e-6f, 2.0f});
  s.min_p = smax_fuzz::param<float>(in, {0.0f, 0.05f, 0.5f, 1.0f, 1.5f});
  const std::uint64_t seed = in.u64(), offset = in.u64();
  std::size_t got = 0, want = 0;
  threw = threw_f = false;
  try {
    got = smax::dynamic::sample(x.data(), n, s, seed, offset);
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  try {
    want = smax::dynamic::sample(xf.data(), n, s, seed, offset);
  } catch (const std::invalid_argument&) {
    threw_f = true;
  }
  if (threw != threw_f) fail("16-bit sample: refused where the float call was not, or the reverse");
  if (!threw && got != want) fail("16-bit sample: the draw differs from the float call's");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  smax_fuzz::stream in(data, size);
  in.pick_isa();
  switch (in.byte() & 3) {
    case 0: run<float>(in); break;
    case 1: run<double>(in); break;
    case 2: run_half<smax::bf16>(in); break;
    default: run_half<smax::fp16>(in); break;
  }
  return 0;
}
