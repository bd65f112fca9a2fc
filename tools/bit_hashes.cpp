// Output bits of every single-row function, for a refactor that must not
// move one (tools/compare_bits.sh compiles this against two revisions and
// diffs the lines): every single-row function on
// several inputs (ordinary, wide / subnormal band, special values, sizes
// around the vector widths and out of cache), three ISAs, float and double;
// one FNV-1a hash of the outputs per line.
#include <smax/smax.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

static std::uint64_t fnv(const void* p, std::size_t bytes, std::uint64_t h = 1469598103934665603ull) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

template <class T>
std::vector<T> input(int kind, std::size_t n, unsigned seed) {
  std::mt19937_64 g(seed);
  std::vector<T> x(n);
  std::normal_distribution<double> nd(0, kind == 1 ? 20.0 : 3.0);
  std::uniform_real_distribution<double> ud(-150, 150);
  for (auto& v : x) v = static_cast<T>(kind == 2 ? ud(g) : nd(g));
  if (kind == 3 && n > 3) {  // specials
    x[n / 3] = -std::numeric_limits<T>::infinity();
    x[n / 2] = std::numeric_limits<T>::infinity();
  }
  if (kind == 4 && n > 3) x[n / 2] = std::numeric_limits<T>::quiet_NaN();
  if (kind == 5) for (auto& v : x) v = static_cast<T>(v * 1e-3);  // near-flat
  if (kind == 6) for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<T>(double(i) * 0.01);  // sorted
  return x;
}

template <class A, class T>
void run(const char* isa) {
  const A a{};
  const std::size_t sizes[] = {1, 3, 7, 15, 16, 17, 33, 63, 64, 65, 100, 257, 1000, 4099, 65537, 300001, (1u << 20) + 13};
  for (std::size_t n : sizes)
    for (int kind = 0; kind < 7; ++kind) {
      const auto x = input<T>(kind, n, 7 + kind);
      const auto dy = input<T>(0, n, 99);
      std::vector<T> y(n), dx(n), y2(n);
      std::vector<std::uint32_t> idx(n);
      auto out = [&](const char* name, const std::vector<T>& v) {
        std::printf("%s %s %zu %d %s %016llx\n", isa, sizeof(T) == 4 ? "f32" : "f64", n, kind, name,
                    (unsigned long long)fnv(v.data(), v.size() * sizeof(T)));
      };
      const smax::algorithm algs[] = {smax::algorithm::automatic, smax::algorithm::three_pass_recompute,
                                      smax::algorithm::three_pass_reload, smax::algorithm::two_pass,
                                      smax::algorithm::online};
      for (auto al : algs) { smax::softmax(a, x.data(), y.data(), n, al); out(("softmax" + std::to_string(int(al))).c_str(), y); }
      smax::softmax(a, x.data(), y.data(), n);
      smax::softmax_backward(a, y.data(), dy.data(), dx.data(), n); out("softmax_backward", dx);
      smax::log_softmax(a, x.data(), y.data(), n); out("log_softmax", y);
      smax::log_softmax_backward(a, y.data(), dy.data(), dx.data(), n); out("log_softmax_backward", dx);
      smax::sparsemax(a, x.data(), y.data(), n); out("sparsemax", y);
      smax::sparsemax_backward(a, y.data(), dy.data(), dx.data(), n); out("sparsemax_backward", dx);
      smax::entmax15(a, x.data(), y.data(), n); out("entmax15", y);
      smax::entmax_backward(a, y.data(), dy.data(), dx.data(), n, T(1.5)); out("entmax_backward", dx);
      smax::entmax_backward(a, y.data(), dy.data(), dx.data(), n, T(1.25)); out("entmax_backward_1.25", dx);
      smax::entmax_backward(a, y.data(), dy.data(), dx.data(), n, T(3)); out("entmax_backward_3", dx);
      smax::entmax_bisect(a, x.data(), y.data(), n, T(1.3)); out("entmax_bisect", y);
      smax::stablemax(a, x.data(), y.data(), n); out("stablemax", y);
      smax::stablemax_backward(a, x.data(), dy.data(), dx.data(), n); out("stablemax_backward", dx);
      // (y: stablemax's output, positive everywhere)
      smax::entmax_backward(a, y.data(), dy.data(), dx.data(), n, T(1.25)); out("entmax_backward_1.25_dense", dx);
      smax::log_stablemax(a, x.data(), y.data(), n); out("log_stablemax", y);
      smax::softpick(a, x.data(), y.data(), n); out("softpick", y);
      smax::softpick_backward(a, x.data(), y.data(), dy.data(), dx.data(), n); out("softpick_backward", dx);
      smax::ssmax(a, x.data(), y.data(), n, T(0.4)); out("ssmax+", y);
      smax::ssmax(a, x.data(), y.data(), n, T(-0.4), T(0.1)); out("ssmax-", y);
      smax::gumbel_softmax(a, x.data(), y.data(), n, T(0.7), 42, false); out("gumbel_softmax", y);
      smax::gumbel_noise(a, y.data(), n, 5, 3); out("gumbel_noise", y);
      const std::size_t k = n < 10 ? n : 10;
      std::fill(y.begin(), y.end(), T(0));
      smax::topk_softmax(a, x.data(), n, k, y.data(), idx.data()); out("topk", y);
      for (std::size_t i = 0; i < k; ++i) y2[i] = static_cast<T>(idx[i]);
      out("topk_index", std::vector<T>(y2.begin(), y2.begin() + k));
      smax::sigmoid_attention(a, x.data(), y.data(), n, T(-1)); out("sigmoid_attention", y);
      smax::sigmoid_attention_backward(a, x.data(), y.data(), dy.data(), dx.data(), n, T(-1));
      out("sigmoid_attention_backward", dx);
      smax::sa_softmax(a, x.data(), y.data(), n, true); out("sa_softmax", y);
      smax::sa_softmax_backward(a, x.data(), y.data(), dy.data(), dx.data(), n, true); out("sa_softmax_backward", dx);
      smax::sa_softmax(a, x.data(), y.data(), n, false); out("sa_softmax_plain", y);
      smax::sa_softmax_backward(a, x.data(), y.data(), dy.data(), dx.data(), n, false);
      out("sa_softmax_backward_plain", dx);
      smax::multimax_params p; p.ranges[0] = -1; p.ranges[1] = 1; p.ts[0] = 0.5; p.ts[1] = 0.3;
      smax::multimax(a, x.data(), y.data(), n, p); out("multimax", y);
      smax::multimax_backward(a, x.data(), y.data(), dy.data(), dx.data(), n, p); out("multimax_backward", dx);
      smax::asentmax(a, x.data(), y.data(), n, T(1.5), T(0.5), T(0.1)); out("asentmax", y);
      smax::asentmax_backward(a, x.data(), y.data(), dy.data(), dx.data(), n, T(1.5), T(0.5), T(0.1));
      out("asentmax_backward", dx);
      {
        smax::sampling s;
        s.top_p = 0.9f;
        std::vector<T> drawn(8);
        for (std::size_t i = 0; i < 8; ++i) drawn[i] = static_cast<T>(smax::sample(a, x.data(), n, s, 17, i));
        out("sample", drawn);
      }
      std::vector<T> l(1, static_cast<T>(smax::logsumexp(a, x.data(), n))); out("logsumexp", l);
      l[0] = static_cast<T>(smax::cross_entropy(a, x.data(), n, n / 2, 0.1f)); out("cross_entropy", l);
      smax::cross_entropy_backward(a, x.data(), n, n / 2, 1.0, dx.data(), 0.1f); out("cross_entropy_backward", dx);
      smax::softmax_options<T> o; o.scale = T(0.5); o.softcap = T(30); o.sink = T(1);
      smax::softmax(a, x.data(), y.data(), n, o); out("softmax_opts", y);
      smax::softmax_options<T> so; so.scale = T(0.1); so.sink = T(1);  // z formed twice (no softcap, no mask)
      smax::softmax(a, x.data(), y.data(), n, so); out("softmax_opts_scale", y);
      smax::log_softmax(a, x.data(), y.data(), n, so); out("log_softmax_opts_scale", y);
      so.length = n / 2;
      smax::log_softmax(a, x.data(), y.data(), n, so); out("log_softmax_opts_length", y);
      smax::softmax(a, x.data(), y.data(), n, o);
      smax::softmax_backward(a, x.data(), y.data(), dy.data(), dx.data(), n, o); out("softmax_backward_opts", dx);
      smax::cross_entropy_backward(a, x.data(), n, n / 2, 1.0, dx.data(), 0.1f, smax::logsumexp(a, x.data(), n));
      out("cross_entropy_backward_lse", dx);
      smax::gumbel_softmax(a, x.data(), y.data(), n, T(0.7), 42, true); out("gumbel_softmax_hard", y);
      // The batched paths: one row of n (blocked from 2^18 elements, on the
      // calling thread), and attention rows (2 heads of 1 query, a mask
      // row, ALiBi from max_bias, causal lengths, a sink per head).
      {
        const smax::matrix_view<const T> xr(x.data(), 1, n);
        const smax::matrix_view<T> yr(y.data(), 1, n);
        smax::softmax(a, xr, yr); out("batched_softmax_row", y);
        smax::log_softmax(a, xr, yr); out("batched_log_softmax_row", y);
        const std::size_t cols = n / 2;
        if (cols > 0) {
          const T sinks[2] = {T(1), T(-2)};
          smax::attention_options<T> ao;
          ao.scale = T(0.5);
          ao.mask = smax::matrix_view<const T>(dy.data(), 1, cols);
          ao.lengths = smax::causal(static_cast<std::ptrdiff_t>(cols / 2));
          ao.heads = 2;
          ao.max_bias = T(8);
          ao.sinks = sinks;
          const smax::matrix_view<const T> xa(x.data(), 2, cols);
          std::fill(y.begin(), y.end(), T(0));
          std::fill(dx.begin(), dx.end(), T(0));
          smax::softmax(a, xa, smax::matrix_view<T>(y.data(), 2, cols), ao); out("attention_rows", y);
          smax::softmax_backward(a, xa, smax::matrix_view<const T>(y.data(), 2, cols),
                                 smax::matrix_view<const T>(dy.data(), 2, cols), smax::matrix_view<T>(dx.data(), 2, cols),
                                 ao);
          out("attention_rows_backward", dx);
          smax::log_softmax(a, xa, smax::matrix_view<T>(y.data(), 2, cols), ao); out("log_attention_rows", y);
        }
      }
      // The 16-bit softmax paths, from x rounded to bf16 and fp16.
      if constexpr (sizeof(T) == 4) {
        std::vector<smax::bf16> xb(n), yb(n);
        std::vector<smax::fp16> xh(n), yh(n);
        for (std::size_t i = 0; i < n; ++i) {
          xb[i] = smax::bf16(static_cast<float>(x[i]));
          xh[i] = smax::fp16(static_cast<float>(x[i]));
        }
        const auto out_bytes = [&](const char* name, const void* p, std::size_t bytes) {
          std::printf("%s f32 %zu %d %s %016llx\n", isa, n, kind, name, (unsigned long long)fnv(p, bytes));
        };
        smax::softmax(a, xb.data(), yb.data(), n); out_bytes("bf16_softmax", yb.data(), 2 * n);
        smax::log_softmax(a, xb.data(), yb.data(), n); out_bytes("bf16_log_softmax", yb.data(), 2 * n);
        smax::softmax(a, xh.data(), yh.data(), n); out_bytes("fp16_softmax", yh.data(), 2 * n);
        smax::log_softmax(a, xh.data(), yh.data(), n); out_bytes("fp16_log_softmax", yh.data(), 2 * n);
        std::vector<float> yf(n);
        smax::softmax(a, xb.data(), yf.data(), n);
        out_bytes("bf16_softmax_to_f32", yf.data(), 4 * n);
      }
    }
}

int main() {
  run<xsimd::avx512f, float>("avx512");
  run<xsimd::avx512f, double>("avx512");
  run<xsimd::fma3<xsimd::avx2>, float>("avx2");
  run<xsimd::fma3<xsimd::avx2>, double>("avx2");
  run<xsimd::sse2, float>("sse2");
  run<xsimd::sse2, double>("sse2");
}
