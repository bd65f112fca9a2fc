// smax_attention_bench: the fused attention softmax and the losses against
// the same work composed from separate passes, the memory rooflines, and
// (built with -DSMAX_BENCH_TORCH) libtorch's composed versions. One thread.
// Contenders run interleaved, `reps` rounds; each line prints the median
// time per call and ns per element, and the ratios the issue asks for.
//
//   smax_attention_bench [reps] [which: attn,attnb,ce,cebatch,ce16; default all]
//                        [batch rows, default 1024]
// Torch: OMP_NUM_THREADS=1 (ATEN_CPU_CAPABILITY=avx512 for its AVX-512 code).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <smax/dynamic.hpp>

#ifdef SMAX_BENCH_TORCH
#include <torch/torch.h>
#endif

namespace {

using clk = std::chrono::steady_clock;

struct contender {
  std::string name;
  std::function<void()> run;
  std::vector<double> t;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs every contender once per round, in turn, `reps` rounds (plus one
// warm-up); returns the median seconds of each. The call that follows a
// libtorch contender runs once untimed first: after libtorch 1.13's calls
// the next 0.4-0.5 s of work ran 15-25x slow (AMD EPYC Zen 5, 2026-12-03;
// docs/attention_losses.md).
std::vector<double> interleave(std::vector<contender>& cs, int reps) {
  for (auto& c : cs) c.run();
  for (int r = 0; r < reps; ++r)
    for (std::size_t i = 0; i < cs.size(); ++i) {
      contender& c = cs[i];
      if (cs[(i + cs.size() - 1) % cs.size()].name.rfind("libtorch", 0) == 0) c.run();
      const auto t0 = clk::now();
      c.run();
      c.t.push_back(std::chrono::duration<double>(clk::now() - t0).count());
    }
  std::vector<double> m;
  for (auto& c : cs) m.push_back(median(c.t));
  return m;
}

void report(const std::vector<contender>& cs, const std::vector<double>& m, double elems) {
  for (std::size_t i = 0; i < cs.size(); ++i)
    std::printf("  %-44s %9.3f ms  %7.4f ns/elem\n", cs[i].name.c_str(), m[i] * 1e3, m[i] * 1e9 / elems);
}

// The attention benches' header line, interleaved run and report.
std::vector<double> run_attention_case(const char* what, std::vector<contender>& cs, int reps, std::size_t heads,
                                       std::size_t q, std::size_t k) {
  std::printf("%s: %zu heads x %zu queries x %zu keys (float, 1 thread, %s)\n", what, heads, q, k,
              smax::dynamic::active_isa());
  const auto m = interleave(cs, reps);
  report(cs, m, double(heads * q * k));
  return m;
}

#ifdef SMAX_BENCH_TORCH
// [heads][queries][keys] scores as a tensor over p (no copy).
at::Tensor scores_tensor(float* p, std::size_t heads, std::size_t q, std::size_t k) {
  return torch::from_blob(p, {long(heads), long(q), long(k)}, torch::TensorOptions().dtype(torch::kFloat32));
}
#endif

std::vector<float> logits(std::size_t n, std::uint64_t seed) {
  std::vector<float> x(n);
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (std::size_t i = 0; i < n; i += 4096) {
    const float v = d(g);  // cheap fill: blocks of a ramp around a random level
    const std::size_t e = std::min(n, i + 4096);
    for (std::size_t j = i; j < e; ++j) x[j] = v + 0.001f * static_cast<float>(j - i);
  }
  return x;
}

// The memory rooflines: a read of n floats (sum), and a read of 2 arrays
// plus a write (rw2), compiled with the flags of this TU (the plain loops
// vectorize).
float read_sum(const float* x, std::size_t n) {
  float a[16] = {};
  const std::size_t whole = n / 16 * 16;
  for (std::size_t i = 0; i < whole; i += 16)
    for (int k = 0; k < 16; ++k) a[k] += x[i + k];
  float s = 0;
  for (std::size_t i = whole; i < n; ++i) s += x[i];
  for (float v : a) s += v;
  return s;
}
// The same read as two streams, the halves of x at once: on the AMD EPYC
// Zen 5 faster than one (docs/tuning.md, "Two halves"), so the read
// roofline is the faster of the two.
float read_sum_halves(const float* x, std::size_t n) {
  float a[16] = {}, b[16] = {};
  const std::size_t h = n / 32 * 16;
  for (std::size_t i = 0; i < h; i += 16)
    for (int k = 0; k < 16; ++k) {
      a[k] += x[i + k];
      b[k] += x[h + i + k];
    }
  float s = 0;
  for (std::size_t i = 2 * h; i < n; ++i) s += x[i];
  for (int k = 0; k < 16; ++k) s += a[k] + b[k];
  return s;
}
void rw2(const float* a, const float* b, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
void copy1(const float* a, float* y, std::size_t n) { std::memcpy(y, a, n * sizeof(float)); }

volatile float sink_f;
volatile double sink_d;

void bench_attention(int reps) {
  // 16 heads x 1024 queries x 2048 keys (128 MiB of scores), a causal mask
  // row per query broadcast over heads (8 MiB), scale 1/sqrt(128), a sink
  // per head; causal offset = keys - queries (the last query sees every key).
  const std::size_t heads = 16, q = 1024, k = 2048, rows = heads * q, n = rows * k;
  std::vector<float> x = logits(n, 1), y(n), mask(q * k), sinks(heads, 0.5f);
  for (std::size_t r = 0; r < q; ++r)
    for (std::size_t c = 0; c < k; ++c)
      mask[r * k + c] = (c <= r + (k - q)) ? -0.01f * static_cast<float>((r + k - q) - c)
                                           : -std::numeric_limits<float>::infinity();
  const float scale = 1.0f / std::sqrt(128.0f);
  smax::attention_options<float> o;
  o.scale = scale;
  o.mask = smax::matrix_view<const float>(mask.data(), q, k);
  o.heads = heads;
  o.lengths = smax::causal(static_cast<std::ptrdiff_t>(k - q));
  o.sinks = sinks.data();
  const smax::matrix_view<const float> xv(x.data(), rows, k);
  const smax::matrix_view<float> yv(y.data(), rows, k);
  std::vector<contender> cs;
  cs.push_back({"plain softmax (batched, no options)", [&] { smax::dynamic::softmax(xv, yv); }, {}});
  cs.push_back({"fused scale+mask+causal+sink", [&] { smax::dynamic::softmax(xv, yv, o); }, {}});
  cs.push_back({"composed: y = scale x + mask; softmax(y)", [&] {
                  for (std::size_t r = 0; r < rows; ++r) {
                    const float* xr = x.data() + r * k;
                    const float* mr = mask.data() + (r % q) * k;
                    float* yr = y.data() + r * k;
                    for (std::size_t c = 0; c < k; ++c) yr[c] = scale * xr[c] + mr[c];
                  }
                  smax::dynamic::softmax(smax::matrix_view<const float>(y.data(), rows, k), yv);
                },
                {}});
  cs.push_back({"roofline: copy x -> y", [&] { copy1(x.data(), y.data(), n); }, {}});
  // The yardstick: plain softmax plus the mask's own read (each
  // row's mask row, in row order, as the fused kernel reads it).
  cs.push_back({"plain softmax + read of the mask rows", [&] {
                  smax::dynamic::softmax(xv, yv);
                  float acc = 0;
                  for (std::size_t r = 0; r < rows; ++r) acc += read_sum(mask.data() + (r % q) * k, k);
                  sink_f = acc;
                },
                {}});
#ifdef SMAX_BENCH_TORCH
  const at::Tensor tx = scores_tensor(x.data(), heads, q, k), tm = scores_tensor(mask.data(), 1, q, k);
  cs.push_back({"libtorch softmax(x * scale + mask, -1)", [&] {
                  at::Tensor r = at::softmax(tx * scale + tm, -1);
                  sink_f = r.data_ptr<float>()[0];
                },
                {}});
#endif
  const auto m = run_attention_case("attention", cs, reps, heads, q, k);
  std::printf("  fused / plain (elements per ns): %.3f; fused / (plain + mask read): %.3f\n", m[0] / m[1],
              m[4] / m[1]);
#ifdef SMAX_BENCH_TORCH
  std::printf("  fused vs libtorch composed: %.2fx\n", m[5] / m[1]);
#endif
}

// The backward pass of the same attention rows: dx = scale y (dy - y.dy)
// per row, causal rows' masked tail written as 0 without a read.
void bench_attention_backward(int reps) {
  const std::size_t heads = 16, q = 1024, k = 2048, rows = heads * q, n = rows * k;
  const float scale = 1.0f / std::sqrt(128.0f);
  std::vector<float> x = logits(n, 1), y(n), dy = logits(n, 5), dx(n), sinks(heads, 0.5f);
  smax::attention_options<float> o;
  o.scale = scale;
  o.heads = heads;
  o.lengths = smax::causal(static_cast<std::ptrdiff_t>(k - q));
  o.sinks = sinks.data();
  const smax::matrix_view<const float> xv(x.data(), rows, k), yc(y.data(), rows, k), dyv(dy.data(), rows, k);
  const smax::matrix_view<float> yv(y.data(), rows, k), dxv(dx.data(), rows, k);
  smax::dynamic::softmax(xv, yv, o);
  std::vector<contender> cs;
  cs.push_back({"plain softmax_backward (batched, no options)", [&] { smax::dynamic::softmax_backward(yc, dyv, dxv); },
                {}});
  cs.push_back({"fused backward scale+causal+sink", [&] { smax::dynamic::softmax_backward(xv, yc, dyv, dxv, o); },
                {}});
  cs.push_back({"composed: softmax_backward; dx *= scale", [&] {
                  smax::dynamic::softmax_backward(yc, dyv, dxv);
                  for (std::size_t i = 0; i < n; ++i) dx[i] *= scale;
                },
                {}});
  cs.push_back({"roofline: rw2 (y, dy -> dx)", [&] { rw2(y.data(), dy.data(), dx.data(), n); }, {}});
#ifdef SMAX_BENCH_TORCH
  const at::Tensor ty = scores_tensor(y.data(), heads, q, k), tdy = scores_tensor(dy.data(), heads, q, k);
  cs.push_back({"libtorch _softmax_backward_data(dy, y) * scale", [&] {
                  at::Tensor r = at::_softmax_backward_data(tdy, ty, -1, at::kFloat) * scale;
                  sink_f = r.data_ptr<float>()[0];
                },
                {}});
#endif
  const auto m = run_attention_case("attention backward", cs, reps, heads, q, k);
  std::printf("  fused / plain (elements per ns): %.3f; fused vs composed: %.2fx; rw2 / fused: %.3f\n", m[0] / m[1],
              m[2] / m[1], m[3] / m[1]);
#ifdef SMAX_BENCH_TORCH
  std::printf("  fused vs libtorch: %.2fx\n", m[4] / m[1]);
#endif
}

void bench_ce(int reps) {
  const std::size_t n = std::size_t(64) << 20;
  std::vector<float> x = logits(n, 2), dx(n), other = logits(n, 3);
  const std::size_t t = 12345;
  const double lse = smax::dynamic::logsumexp(x.data(), n);
  std::vector<contender> cs;
  cs.push_back({"cross_entropy 64M", [&] { sink_d = smax::dynamic::cross_entropy(x.data(), n, t); }, {}});
  cs.push_back({"cross_entropy 64M, label smoothing 0.1", [&] {
                  sink_d = smax::dynamic::cross_entropy(x.data(), n, t, 0.1f);
                },
                {}});
  cs.push_back({"roofline: read (sum) 64M", [&] { sink_f = read_sum(x.data(), n); }, {}});
  cs.push_back({"roofline: read (sum), two halves at once, 64M", [&] { sink_f = read_sum_halves(x.data(), n); }, {}});
  cs.push_back({"cross_entropy_backward 64M, saved lse", [&] {
                  smax::dynamic::cross_entropy_backward(x.data(), n, t, 1.0, dx.data(), 0.0f, lse);
                },
                {}});
  cs.push_back({"cross_entropy_backward 64M", [&] {
                  smax::dynamic::cross_entropy_backward(x.data(), n, t, 1.0, dx.data());
                },
                {}});
  cs.push_back({"roofline: rw2 64M", [&] { rw2(x.data(), other.data(), dx.data(), n); }, {}});
  cs.push_back({"roofline: copy 64M", [&] { copy1(x.data(), dx.data(), n); }, {}});
#ifdef SMAX_BENCH_TORCH
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  const at::Tensor tx = torch::from_blob(x.data(), {1L, long(n)}, opts);
  const at::Tensor tt = torch::full({1}, long(t), torch::kLong);
  cs.push_back({"libtorch F::cross_entropy 64M", [&] {
                  sink_f = torch::nn::functional::cross_entropy(tx, tt).item<float>();
                },
                {}});
#endif
  std::printf("cross_entropy: n = %zu (float, 1 thread, %s)\n", n, smax::dynamic::active_isa());
  const auto m = interleave(cs, reps);
  report(cs, m, double(n));
  const double read = std::min(m[2], m[3]);  // the faster read
  std::printf("  cross_entropy vs read roofline (the faster read): %.3f (ls 0.1: %.3f); one stream / two: %.3f\n",
              read / m[0], read / m[1], m[2] / m[3]);
  std::printf("  backward (saved lse) vs rw2: %.3f, vs copy: %.3f; without lse vs rw2: %.3f\n", m[6] / m[4],
              m[7] / m[4], m[6] / m[5]);
#ifdef SMAX_BENCH_TORCH
  std::printf("  cross_entropy vs libtorch: %.2fx\n", m[8] / m[0]);
#endif
}

void bench_ce_batched(int reps, std::size_t rows) {
  const std::size_t v = 151936, n = rows * v;
  std::vector<float> x = logits(n, 4);
  std::vector<std::int64_t> tg(rows);
  for (std::size_t r = 0; r < rows; ++r) tg[r] = static_cast<std::int64_t>((r * 7919) % v);
  const smax::matrix_view<const float> xv(x.data(), rows, v);
  std::vector<contender> cs;
  cs.push_back({"cross_entropy batched (mean)", [&] { sink_d = smax::dynamic::cross_entropy(xv, tg.data()); }, {}});
  cs.push_back({"roofline: read (sum)", [&] { sink_f = read_sum(x.data(), n); }, {}});
  cs.push_back({"roofline: read (sum), two halves at once", [&] { sink_f = read_sum_halves(x.data(), n); }, {}});
#ifdef SMAX_BENCH_TORCH
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32);
  const at::Tensor tx = torch::from_blob(x.data(), {long(rows), long(v)}, opts);
  const at::Tensor tt = torch::from_blob(tg.data(), {long(rows)}, torch::TensorOptions().dtype(torch::kLong));
  cs.push_back({"libtorch F::cross_entropy", [&] {
                  sink_f = torch::nn::functional::cross_entropy(tx, tt).item<float>();
                },
                {}});
#endif
  std::printf("cross_entropy batched: %zu x %zu (float, 1 thread, %s)\n", rows, v, smax::dynamic::active_isa());
  const auto m = interleave(cs, reps);
  report(cs, m, double(n));
  std::printf("  vs read roofline (the faster read): %.3f; one stream / two: %.3f\n", std::min(m[1], m[2]) / m[0],
              m[1] / m[2]);
#ifdef SMAX_BENCH_TORCH
  std::printf("  vs libtorch: %.2fx\n", m[3] / m[0]);
#endif
}

// 16-bit rooflines: a read of n 16-bit values (their bit patterns summed)
// and a copy of them.
std::uint32_t read_sum16(const std::uint16_t* x, std::size_t n) {
  std::uint32_t a[32] = {};
  const std::size_t whole = n / 32 * 32;
  for (std::size_t i = 0; i < whole; i += 32)
    for (int k = 0; k < 32; ++k) a[k] += x[i + k];
  std::uint32_t s = 0;
  for (std::size_t i = whole; i < n; ++i) s += x[i];
  for (std::uint32_t v : a) s += v;
  return s;
}

std::vector<smax::bf16> bf16_logits(std::size_t n, std::uint64_t seed) {
  const std::vector<float> f = logits(n, seed);
  std::vector<smax::bf16> h(n);
  smax::dynamic::convert(f.data(), h.data(), n);
  return h;
}

// The losses on bf16 logits (read as bf16, no float copy), against the
// 16-bit rooflines, the same loss after converting the row to float by hand
// (a kept float buffer), and libtorch's bf16 cross_entropy.
void bench_ce16(int reps, std::size_t rows) {
  using smax::bf16;
  const std::size_t n = std::size_t(64) << 20;
  std::vector<bf16> x = bf16_logits(n, 5), dx(n);
  std::vector<float> xf(n);
  const std::size_t t = 12345;
  const double lse = smax::dynamic::logsumexp(x.data(), n);
  const auto* bits = reinterpret_cast<const std::uint16_t*>(x.data());
  std::vector<contender> cs;
  cs.push_back({"bf16 cross_entropy 64M", [&] { sink_d = smax::dynamic::cross_entropy(x.data(), n, t); }, {}});
  cs.push_back({"bf16 cross_entropy 64M, label smoothing 0.1", [&] {
                  sink_d = smax::dynamic::cross_entropy(x.data(), n, t, 0.1f);
                },
                {}});
  cs.push_back({"bf16 converted to float, float cross_entropy", [&] {
                  smax::dynamic::convert(x.data(), xf.data(), n);
                  sink_d = smax::dynamic::cross_entropy(xf.data(), n, t);
                },
                {}});
  cs.push_back({"roofline: read 64M bf16", [&] { sink_d = read_sum16(bits, n); }, {}});
  cs.push_back({"bf16 cross_entropy_backward 64M, saved lse", [&] {
                  smax::dynamic::cross_entropy_backward(x.data(), n, t, 1.0, dx.data(), 0.0f, lse);
                },
                {}});
  cs.push_back({"roofline: copy 64M bf16", [&] { std::memcpy(dx.data(), x.data(), n * sizeof(bf16)); }, {}});
#ifdef SMAX_BENCH_TORCH
  const at::Tensor tx = torch::from_blob(x.data(), {1L, long(n)}, torch::TensorOptions().dtype(torch::kBFloat16));
  const at::Tensor tt = torch::full({1}, long(t), torch::kLong);
  cs.push_back({"libtorch F::cross_entropy bf16 64M", [&] {
                  sink_f = torch::nn::functional::cross_entropy(tx, tt).item<float>();
                },
                {}});
#endif
  std::printf("cross_entropy on bf16: n = %zu (1 thread, %s)\n", n, smax::dynamic::active_isa());
  const auto m = interleave(cs, reps);
  report(cs, m, double(n));
  std::printf("  cross_entropy vs 16-bit read roofline: %.3f (ls 0.1: %.3f); vs converting to float first: %.2fx\n",
              m[3] / m[0], m[3] / m[1], m[2] / m[0]);
  std::printf("  backward (saved lse) vs 16-bit copy: %.3f\n", m[5] / m[4]);
#ifdef SMAX_BENCH_TORCH
  std::printf("  cross_entropy vs libtorch bf16: %.2fx\n", m[6] / m[0]);
#endif

  const std::size_t v = 151936, nb = rows * v;
  x = bf16_logits(nb, 6);
  std::vector<std::int64_t> tg(rows);
  for (std::size_t r = 0; r < rows; ++r) tg[r] = static_cast<std::int64_t>((r * 7919) % v);
  const smax::matrix_view<const bf16> xv(x.data(), rows, v);
  std::vector<double> row_loss(rows), row_lse(rows);
  smax::loss_options none;
  none.reduce = smax::reduction::none;
  bits = reinterpret_cast<const std::uint16_t*>(x.data());
  std::vector<contender> cb;
  cb.push_back({"bf16 cross_entropy batched (mean)", [&] { sink_d = smax::dynamic::cross_entropy(xv, tg.data()); }, {}});
  cb.push_back({"bf16 cross_entropy batched, rows' loss and lse", [&] {
                  smax::dynamic::cross_entropy(xv, tg.data(), none, row_loss.data(), row_lse.data());
                },
                {}});
  cb.push_back({"roofline: read bf16", [&] { sink_d = read_sum16(bits, nb); }, {}});
#ifdef SMAX_BENCH_TORCH
  const at::Tensor tb = torch::from_blob(x.data(), {long(rows), long(v)}, torch::TensorOptions().dtype(torch::kBFloat16));
  const at::Tensor tgt = torch::from_blob(tg.data(), {long(rows)}, torch::TensorOptions().dtype(torch::kLong));
  cb.push_back({"libtorch F::cross_entropy bf16", [&] {
                  sink_f = torch::nn::functional::cross_entropy(tb, tgt).item<float>();
                },
                {}});
#endif
  std::printf("cross_entropy batched on bf16: %zu x %zu (1 thread, %s)\n", rows, v, smax::dynamic::active_isa());
  const auto mb = interleave(cb, reps);
  report(cb, mb, double(nb));
  std::printf("  vs 16-bit read roofline: %.3f; with the rows' loss and lse: %.3f\n", mb[2] / mb[0], mb[2] / mb[1]);
#ifdef SMAX_BENCH_TORCH
  std::printf("  vs libtorch bf16: %.2fx\n", mb[3] / mb[0]);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  const std::string which = argc > 2 ? argv[2] : "attn,attnb,ce,cebatch,ce16";
  const std::size_t rows = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1024;
#ifdef SMAX_BENCH_TORCH
  at::set_num_threads(1);
#endif
  const auto has = [&](const char* t) { return ("," + which + ",").find("," + std::string(t) + ",") != std::string::npos; };
  if (has("attn")) bench_attention(reps);
  if (has("attnb")) bench_attention_backward(reps);
  if (has("ce")) bench_ce(reps);
  if (has("cebatch")) bench_ce_batched(reps, rows);
  if (has("ce16")) bench_ce16(reps, rows);
  return 0;
}
