// smax::dynamic — the same functions as smax.hpp, run on the best ISA the CPU
// has among those compiled in (x86: AVX-512, AVX2+FMA, SSE2; aarch64: NEON).
//
// Link the per-ISA code into your target with the CMake helper:
//     find_package(smax)                       # or add_subdirectory(smax)
//     smax_add_dynamic_dispatch(my_target)     # compiles one TU per ISA
// The choice is made once, at the first call (thread-safe). The environment
// variable SMAX_ISA (sse2, avx2, avx512, neon) forces an ISA when it is
// compiled in and the CPU has it; otherwise it is ignored. set_isa() does the
// same from code (tests use it to run every ISA).
#pragma once

#include <cstddef>

#include "types.hpp"
#include "detail/batched.hpp"
#include "detail/attention.hpp"
#include "detail/losses.hpp"
#include "detail/config.hpp"
#include "detail/half.hpp"
#include "detail/half_family.hpp"
#include "detail/arguments.hpp"
#include "parameters.hpp"

namespace smax {
namespace dynamic {

// Name of the ISA that calls go to now ("avx512", "avx2", "sse2", "neon").
const char* active_isa() noexcept;
// ISAs compiled in that this CPU can run, best first; returns how many, and
// writes up to `cap` names into `names`.
std::size_t available_isas(const char** names, std::size_t cap) noexcept;
// Route every later call to `isa`; false (and no change) if it is not
// compiled in or the CPU lacks it. nullptr goes back to the default choice.
bool set_isa(const char* isa) noexcept;

void softmax(const float* x, float* y, std::size_t n, algorithm a = algorithm::automatic);
void softmax(const double* x, double* y, std::size_t n, algorithm a = algorithm::automatic);
void log_softmax(const float* x, float* y, std::size_t n);
void log_softmax(const double* x, double* y, std::size_t n);

// 16-bit logits (see smax.hpp, "16-bit logits"): bf16 or fp16 x, y of the
// same type or float; single rows and batched; and the bulk conversions.
#define SMAX_DYNAMIC_HALF(H)                                                                                  \
  void softmax(const H* x, H* y, std::size_t n, algorithm a = algorithm::automatic);                          \
  void softmax(const H* x, float* y, std::size_t n, algorithm a = algorithm::automatic);                      \
  void log_softmax(const H* x, H* y, std::size_t n);                                                          \
  void log_softmax(const H* x, float* y, std::size_t n);                                                      \
  void softmax(matrix_view<const H> x, matrix_view<H> y, algorithm a = algorithm::automatic,                  \
               executor* ex = nullptr);                                                                       \
  void softmax(matrix_view<const H> x, matrix_view<float> y, algorithm a = algorithm::automatic,              \
               executor* ex = nullptr);                                                                       \
  void log_softmax(matrix_view<const H> x, matrix_view<H> y, executor* ex = nullptr);                         \
  void log_softmax(matrix_view<const H> x, matrix_view<float> y, executor* ex = nullptr);                     \
  void softmax_backward(const H* y, const H* dy, H* dx, std::size_t n);                                       \
  void log_softmax_backward(const H* y, const H* dy, H* dx, std::size_t n);                                   \
  void softmax_backward(matrix_view<const H> y, matrix_view<const H> dy, matrix_view<H> dx,                   \
                        executor* ex = nullptr);                                                              \
  void log_softmax_backward(matrix_view<const H> y, matrix_view<const H> dy, matrix_view<H> dx,               \
                            executor* ex = nullptr);                                                          \
  double logsumexp(const H* x, std::size_t n);                                                                \
  double cross_entropy(const H* x, std::size_t n, std::size_t target, float label_smoothing = 0);             \
  void cross_entropy_backward(const H* x, std::size_t n, std::size_t target, double dloss, H* dx,             \
                              float label_smoothing = 0);                                                     \
  void cross_entropy_backward(const H* x, std::size_t n, std::size_t target, double dloss, H* dx,             \
                              float label_smoothing, double logsumexp_x);                                     \
  void stablemax(const H* x, H* y, std::size_t n);                                                           \
  void log_stablemax(const H* x, H* y, std::size_t n);                                                       \
  void stablemax_backward(const H* x, const H* dy, H* dx, std::size_t n);                                    \
  void ssmax(const H* x, H* y, std::size_t n, float s, float b = 0);                                          \
  void softpick(const H* x, H* y, std::size_t n, float eps = 1e-8f);                                         \
  void softpick_backward(const H* x, const H* y, const H* dy, H* dx, std::size_t n, float eps = 1e-8f);       \
  void sigmoid_attention(const H* x, H* y, std::size_t n, float b);                                          \
  void sigmoid_attention_backward(const H* x, const H* y, const H* dy, H* dx, std::size_t n, float b);        \
  void sa_softmax(const H* x, H* y, std::size_t n, bool normalized = false);                                 \
  void multimax(const H* x, H* y, std::size_t n, const multimax_params& p);                                  \
  void multimax_backward(const H* x, const H* y, const H* dy, H* dx, std::size_t n, const multimax_params& p); \
  void sa_softmax_backward(const H* x, const H* y, const H* dy, H* dx, std::size_t n, bool normalized = false); \
  void gumbel_noise(H* g, std::size_t n, std::uint64_t seed, std::uint64_t offset = 0);                         \
  void gumbel_softmax(const H* logits, H* y, std::size_t n, float tau, std::uint64_t seed, bool hard = false);  \
  void sparsemax(const H* x, H* y, std::size_t n);                                                           \
  void entmax15(const H* x, H* y, std::size_t n);                                                            \
  void entmax_bisect(const H* x, H* y, std::size_t n, float alpha, int n_iter = 50);                          \
  void asentmax(const H* x, H* y, std::size_t n, float alpha, float s, float b = 0);                          \
  void sparsemax_backward(const H* y, const H* dy, H* dx, std::size_t n);                                    \
  void entmax_backward(const H* y, const H* dy, H* dx, std::size_t n, float alpha);                          \
  void asentmax_backward(const H* x, const H* y, const H* dy, H* dx, std::size_t n, float alpha, float s,     \
                         float b = 0);                                                                        \
  void topk_softmax(const H* x, std::size_t n, std::size_t k, H* probs, std::uint32_t* index);                \
  std::size_t sample(const H* logits, std::size_t n, const sampling& s, std::uint64_t seed,                   \
                     std::uint64_t offset = 0);                                                               \
  void convert(const H* src, float* dst, std::size_t n);                                                      \
  void convert(const float* src, H* dst, std::size_t n);
SMAX_DYNAMIC_HALF(bf16)
SMAX_DYNAMIC_HALF(fp16)
#undef SMAX_DYNAMIC_HALF

// Sparse family (see smax.hpp): entmax_bisect and entmax_backward throw
// std::invalid_argument for a bad alpha or n_iter.
void sparsemax(const float* x, float* y, std::size_t n);
void sparsemax(const double* x, double* y, std::size_t n);
void entmax15(const float* x, float* y, std::size_t n);
void entmax15(const double* x, double* y, std::size_t n);
void entmax_bisect(const float* x, float* y, std::size_t n, float alpha, int n_iter = 50);
void entmax_bisect(const double* x, double* y, std::size_t n, double alpha, int n_iter = 50);
void sparsemax_backward(const float* y, const float* dy, float* dx, std::size_t n);
void sparsemax_backward(const double* y, const double* dy, double* dx, std::size_t n);
void entmax_backward(const float* y, const float* dy, float* dx, std::size_t n, float alpha);
void entmax_backward(const double* y, const double* dy, double* dx, std::size_t n, double alpha);

void softmax_backward(const float* y, const float* dy, float* dx, std::size_t n);
void softmax_backward(const double* y, const double* dy, double* dx, std::size_t n);
void log_softmax_backward(const float* y, const float* dy, float* dx, std::size_t n);
void log_softmax_backward(const double* y, const double* dy, double* dx, std::size_t n);

// Other variants (see smax.hpp "other variants").
void stablemax(const float* x, float* y, std::size_t n);
void stablemax(const double* x, double* y, std::size_t n);
void log_stablemax(const float* x, float* y, std::size_t n);
void log_stablemax(const double* x, double* y, std::size_t n);
void softpick(const float* x, float* y, std::size_t n, float eps = 1e-8f);
void softpick(const double* x, double* y, std::size_t n, double eps = 1e-8);
void ssmax(const float* x, float* y, std::size_t n, float s, float b = 0.0f);
void ssmax(const double* x, double* y, std::size_t n, double s, double b = 0.0);
void gumbel_noise(float* g, std::size_t n, std::uint64_t seed, std::uint64_t offset = 0);
void gumbel_noise(double* g, std::size_t n, std::uint64_t seed, std::uint64_t offset = 0);
void gumbel_softmax(const float* logits, float* y, std::size_t n, float tau, std::uint64_t seed, bool hard = false);
void gumbel_softmax(const double* logits, double* y, std::size_t n, double tau, std::uint64_t seed,
                    bool hard = false);
void stablemax_backward(const float* x, const float* dy, float* dx, std::size_t n);
void stablemax_backward(const double* x, const double* dy, double* dx, std::size_t n);
void softpick_backward(const float* x, const float* y, const float* dy, float* dx, std::size_t n, float eps = 1e-8f);
void softpick_backward(const double* x, const double* y, const double* dy, double* dx, std::size_t n,
                       double eps = 1e-8);

// Batched rows (see smax.hpp "batched"); ex = nullptr runs on this thread.
void softmax(matrix_view<const float> x, matrix_view<float> y, algorithm a = algorithm::automatic,
             executor* ex = nullptr);
void softmax(matrix_view<const double> x, matrix_view<double> y, algorithm a = algorithm::automatic,
             executor* ex = nullptr);
void log_softmax(matrix_view<const float> x, matrix_view<float> y, executor* ex = nullptr);
void log_softmax(matrix_view<const double> x, matrix_view<double> y, executor* ex = nullptr);

// The rest of the family over rows (smax.hpp, "batched: the rest of the
// family"): each row exactly the single-vector function of that row.
#define SMAX_DYNAMIC_BATCHED_DECLS(T, Z)                                                                          \
  void sparsemax(matrix_view<const T> x, matrix_view<T> y, executor* ex = nullptr);                              \
  void entmax15(matrix_view<const T> x, matrix_view<T> y, executor* ex = nullptr);                               \
  void entmax_bisect(matrix_view<const T> x, matrix_view<T> y, T alpha, int n_iter = 50, executor* ex = nullptr); \
  void stablemax(matrix_view<const T> x, matrix_view<T> y, executor* ex = nullptr);                              \
  void log_stablemax(matrix_view<const T> x, matrix_view<T> y, executor* ex = nullptr);                          \
  void softpick(matrix_view<const T> x, matrix_view<T> y, T eps = T(1e-8), executor* ex = nullptr);              \
  void ssmax(matrix_view<const T> x, matrix_view<T> y, T s, T b = Z, executor* ex = nullptr);                    \
  void gumbel_softmax(matrix_view<const T> logits, matrix_view<T> y, T tau, std::uint64_t seed, bool hard = false, \
                      executor* ex = nullptr);                                                                   \
  void softmax_backward(matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, executor* ex = nullptr); \
  void log_softmax_backward(matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx,                  \
                            executor* ex = nullptr);                                                             \
  void sparsemax_backward(matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx,                    \
                          executor* ex = nullptr);                                                               \
  void entmax_backward(matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, T alpha,              \
                       executor* ex = nullptr);                                                                  \
  void stablemax_backward(matrix_view<const T> x, matrix_view<const T> dy, matrix_view<T> dx,                    \
                          executor* ex = nullptr);                                                               \
  void softpick_backward(matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, \
                         T eps = T(1e-8), executor* ex = nullptr);
SMAX_DYNAMIC_BATCHED_DECLS(float, 0.0f)
SMAX_DYNAMIC_BATCHED_DECLS(double, 0.0)
#undef SMAX_DYNAMIC_BATCHED_DECLS

// Losses (see smax.hpp "losses"; declared in losses.hpp: loss_options,
// reduction). Return double.
#define SMAX_DYNAMIC_LOSS_DECLS(T)                                                                              \
  double logsumexp(const T* x, std::size_t n);                                                                 \
  double cross_entropy(const T* x, std::size_t n, std::size_t target, float label_smoothing = 0);              \
  void cross_entropy_backward(const T* x, std::size_t n, std::size_t target, double dloss, T* dx,              \
                              float label_smoothing = 0);                                                      \
  void cross_entropy_backward(const T* x, std::size_t n, std::size_t target, double dloss, T* dx,              \
                              float label_smoothing, double lse);                                              \
  void logsumexp(matrix_view<const T> x, double* out, executor* ex = nullptr);                                 \
  double cross_entropy(matrix_view<const T> x, const std::int64_t* targets, const loss_options& o = {},        \
                       double* row_loss = nullptr, double* row_lse = nullptr, executor* ex = nullptr);         \
  void cross_entropy_backward(matrix_view<const T> x, const std::int64_t* targets, double dloss,                \
                              matrix_view<T> dx, const loss_options& o = {}, const double* row_dloss = nullptr, \
                              const double* lse = nullptr, executor* ex = nullptr);
SMAX_DYNAMIC_LOSS_DECLS(float)
SMAX_DYNAMIC_LOSS_DECLS(double)
#undef SMAX_DYNAMIC_LOSS_DECLS

// Attention options (see smax.hpp "attention"; declared in attention.hpp).
#define SMAX_DYNAMIC_ATTENTION_DECLS(T)                                                                        \
  void softmax(const T* x, T* y, std::size_t n, const softmax_options<T>& o);                                \
  void log_softmax(const T* x, T* y, std::size_t n, const softmax_options<T>& o);                            \
  void softmax_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, const softmax_options<T>& o); \
  void softmax(matrix_view<const T> x, matrix_view<T> y, const attention_options<T>& o, executor* ex = nullptr); \
  void log_softmax(matrix_view<const T> x, matrix_view<T> y, const attention_options<T>& o, executor* ex = nullptr); \
  void softmax_backward(matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, \
                        const attention_options<T>& o, executor* ex = nullptr);
SMAX_DYNAMIC_ATTENTION_DECLS(float)
SMAX_DYNAMIC_ATTENTION_DECLS(double)
#undef SMAX_DYNAMIC_ATTENTION_DECLS
// Top-k softmax and sampling (see smax.hpp, "top-k and sampling").
void topk_softmax(const float* x, std::size_t n, std::size_t k, float* probs, std::uint32_t* index);
void topk_softmax(const double* x, std::size_t n, std::size_t k, double* probs, std::uint32_t* index);
std::size_t sample(const float* logits, std::size_t n, const sampling& s, std::uint64_t seed, std::uint64_t offset = 0);
std::size_t sample(const double* logits, std::size_t n, const sampling& s, std::uint64_t seed,
                   std::uint64_t offset = 0);
void topk_softmax(matrix_view<const float> x, std::size_t k, matrix_view<float> probs,
                  matrix_view<std::uint32_t> index, executor* ex = nullptr);
void topk_softmax(matrix_view<const double> x, std::size_t k, matrix_view<double> probs,
                  matrix_view<std::uint32_t> index, executor* ex = nullptr);
void sample(matrix_view<const float> logits, std::size_t* out, const sampling& s, std::uint64_t seed,
            std::uint64_t offset = 0, executor* ex = nullptr);
void sample(matrix_view<const double> logits, std::size_t* out, const sampling& s, std::uint64_t seed,
            std::uint64_t offset = 0, executor* ex = nullptr);
// More of the seeds' family (see smax.hpp; multimax_params: seeds.hpp).
#define SMAX_DYNAMIC_SEEDS_DECLS(T, Z)                                                                             \
  void sigmoid_attention(const T* x, T* y, std::size_t n, T b);                                                    \
  void sa_softmax(const T* x, T* y, std::size_t n, bool normalized = false);                                       \
  void multimax(const T* x, T* y, std::size_t n, const multimax_params& p);                                        \
  void asentmax(const T* x, T* y, std::size_t n, T alpha, T s, T b = Z);                                           \
  void sigmoid_attention_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, T b);                 \
  void sa_softmax_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, bool normalized = false);    \
  void multimax_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, const multimax_params& p);     \
  void asentmax_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, T alpha, T s, T b = Z);        \
  void sigmoid_attention(matrix_view<const T> x, matrix_view<T> y, T b, executor* ex = nullptr);                   \
  void sa_softmax(matrix_view<const T> x, matrix_view<T> y, bool normalized = false, executor* ex = nullptr);      \
  void multimax(matrix_view<const T> x, matrix_view<T> y, const multimax_params& p, executor* ex = nullptr);       \
  void asentmax(matrix_view<const T> x, matrix_view<T> y, T alpha, T s, T b = Z, executor* ex = nullptr);          \
  void sigmoid_attention_backward(matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy,         \
                                  matrix_view<T> dx, T b, executor* ex = nullptr);                                 \
  void sa_softmax_backward(matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy,                \
                           matrix_view<T> dx, bool normalized = false, executor* ex = nullptr);                    \
  void multimax_backward(matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy,                  \
                         matrix_view<T> dx, const multimax_params& p, executor* ex = nullptr);                     \
  void asentmax_backward(matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy,                  \
                         matrix_view<T> dx, T alpha, T s, T b = Z, executor* ex = nullptr);
SMAX_DYNAMIC_SEEDS_DECLS(float, 0.0f)
SMAX_DYNAMIC_SEEDS_DECLS(double, 0.0)
#undef SMAX_DYNAMIC_SEEDS_DECLS

// The batched 16-bit forms of the rest of the family (rows of the
// dispatched single-row forms) and the attention options on 16-bit
// (widened with the dispatched convert, the dispatched float kernel, each
// output rounded once). Defined here, inline: they add nothing to the
// per-ISA objects.
}  // namespace dynamic
namespace detail {
struct dynamic_conversion {
  template <class H>
  static void widen(const H* src, float* dst, std::size_t n) noexcept {
    dynamic::convert(src, dst, n);
  }
  template <class H>
  static void narrow(const float* src, H* dst, std::size_t n) noexcept {
    dynamic::convert(src, dst, n);
  }
};
}  // namespace detail
namespace dynamic {

#define SMAX_DYNAMIC_HALF_XY(H, name, params, args)                                                            \
  inline void name(matrix_view<const H> x, matrix_view<H> y SMAX_HALF_PARENS params, executor* ex = nullptr) { \
    name(matrix_view<const float>(nullptr, 0, x.cols), matrix_view<float>(nullptr, 0, x.cols)                 \
             SMAX_HALF_PARENS args);                                                                          \
    detail::check_shapes("smax::" #name, x, y);                                                               \
    detail::for_each_half_row(x.rows, x.cols, ex, [&](std::size_t r) {                                        \
      name(static_cast<const H*>(x.row(r)), y.row(r), x.cols SMAX_HALF_PARENS args);                          \
    });                                                                                                       \
  }
#define SMAX_DYNAMIC_HALF_YDYDX(H, name, a, params, args)                                                      \
  inline void name(matrix_view<const H> a, matrix_view<const H> dy, matrix_view<H> dx SMAX_HALF_PARENS params, \
                   executor* ex = nullptr) {                                                                  \
    const matrix_view<const float> none(nullptr, 0, dx.cols);                                                 \
    name(none, none, matrix_view<float>(nullptr, 0, dx.cols) SMAX_HALF_PARENS args);                          \
    detail::check_shapes("smax::" #name, a, dx, #a, "dx");                                                    \
    detail::check_shapes("smax::" #name, dy, dx, "dy", "dx");                                                 \
    detail::for_each_half_row(dx.rows, dx.cols, ex, [&](std::size_t r) {                                      \
      name(a.row(r), dy.row(r), dx.row(r), dx.cols SMAX_HALF_PARENS args);                                    \
    });                                                                                                       \
  }
#define SMAX_DYNAMIC_HALF_XYDYDX(H, name, params, args)                                                        \
  inline void name(matrix_view<const H> x, matrix_view<const H> y, matrix_view<const H> dy, matrix_view<H> dx  \
                       SMAX_HALF_PARENS params,                                                               \
                   executor* ex = nullptr) {                                                                  \
    const matrix_view<const float> none(nullptr, 0, dx.cols);                                                 \
    name(none, none, none, matrix_view<float>(nullptr, 0, dx.cols) SMAX_HALF_PARENS args);                    \
    detail::check_shapes("smax::" #name, x, dx, "x", "dx");                                                   \
    detail::check_shapes("smax::" #name, y, dx, "y", "dx");                                                   \
    detail::check_shapes("smax::" #name, dy, dx, "dy", "dx");                                                 \
    detail::for_each_half_row(dx.rows, dx.cols, ex, [&](std::size_t r) {                                      \
      name(x.row(r), y.row(r), dy.row(r), dx.row(r), dx.cols SMAX_HALF_PARENS args);                          \
    });                                                                                                       \
  }
#define SMAX_DYNAMIC_HALF(H)                                                                                   \
  SMAX_HALF_BATCHED_XY(H, SMAX_DYNAMIC_HALF_XY)                                                               \
  SMAX_HALF_BATCHED_YDYDX(H, SMAX_DYNAMIC_HALF_YDYDX)                                                         \
  SMAX_HALF_BATCHED_XYDYDX(H, SMAX_DYNAMIC_HALF_XYDYDX)                                                       \
  inline void softmax(const H* x, H* y, std::size_t n, const softmax_options<H>& o) {                         \
    detail::call_widened_options<detail::dynamic_conversion>(                                                 \
        n, o, [n](const float* xf, float* yf, const softmax_options<float>& fo) { softmax(xf, yf, n, fo); },   \
        x, y);                                                                                                \
  }                                                                                                           \
  inline void log_softmax(const H* x, H* y, std::size_t n, const softmax_options<H>& o) {                     \
    detail::call_widened_options<detail::dynamic_conversion>(                                                 \
        n, o,                                                                                                 \
        [n](const float* xf, float* yf, const softmax_options<float>& fo) { log_softmax(xf, yf, n, fo); }, x, \
        y);                                                                                                   \
  }                                                                                                           \
  inline void softmax_backward(const H* x, const H* y, const H* dy, H* dx, std::size_t n,                     \
                               const softmax_options<H>& o) {                                                 \
    detail::call_widened_options<detail::dynamic_conversion>(                                                 \
        n, o,                                                                                                 \
        [n](const float* xf, const float* yf, const float* dyf, float* dxf, const softmax_options<float>& fo) { \
          softmax_backward(xf, yf, dyf, dxf, n, fo);                                                          \
        },                                                                                                    \
        x, y, dy, dx);                                                                                        \
  }                                                                                                           \
  inline void topk_softmax(matrix_view<const H> x, std::size_t k, matrix_view<H> probs,                       \
                           matrix_view<std::uint32_t> index, executor* ex = nullptr) {                        \
    detail::half_topk_rows(x, k, probs, index, ex,                                                            \
                           [](const H* xr, std::size_t n, std::size_t kk, H* p, std::uint32_t* ix) {          \
                             topk_softmax(xr, n, kk, p, ix);                                                  \
                           });                                                                                \
  }                                                                                                           \
  inline void sample(matrix_view<const H> logits, std::size_t* out, const sampling& s, std::uint64_t seed,    \
                     std::uint64_t offset = 0, executor* ex = nullptr) {                                      \
    detail::half_sample_rows(logits, out, s, seed, offset, ex,                                                \
                             [](const H* xr, std::size_t n, const sampling& ss, std::uint64_t sd,             \
                                std::uint64_t off) { return sample(xr, n, ss, sd, off); });                   \
  }                                                                                                           \
  inline void logsumexp(matrix_view<const H> x, double* out, executor* ex = nullptr) {                        \
    detail::half_logsumexp_rows(x, out, ex, [](const H* xr, std::size_t n) { return logsumexp(xr, n); });     \
  }                                                                                                           \
  inline void softmax(matrix_view<const H> x, matrix_view<H> y, const attention_options<H>& o,                \
                      executor* ex = nullptr) {                                                               \
    detail::half_attention_rows("smax::softmax", x, y, o, ex, [](auto... a) { softmax(a...); });              \
  }                                                                                                           \
  inline void log_softmax(matrix_view<const H> x, matrix_view<H> y, const attention_options<H>& o,            \
                          executor* ex = nullptr) {                                                           \
    detail::half_attention_rows("smax::log_softmax", x, y, o, ex, [](auto... a) { log_softmax(a...); });      \
  }                                                                                                           \
  inline void softmax_backward(matrix_view<const H> x, matrix_view<const H> y, matrix_view<const H> dy,         \
                               matrix_view<H> dx, const attention_options<H>& o, executor* ex = nullptr) {    \
    detail::half_attention_backward_rows(x, y, dy, dx, o, ex, [](auto... a) { softmax_backward(a...); });     \
  }                                                                                                           \
  inline double cross_entropy(matrix_view<const H> x, const std::int64_t* targets, const loss_options& o = {},\
                              double* row_loss = nullptr, double* row_lse = nullptr, executor* ex = nullptr) {\
    return detail::half_cross_entropy_rows(                                                                   \
        x, targets, o, row_loss, row_lse, ex, [](const H* xr, std::size_t n) { return logsumexp(xr, n); },    \
        [](const H* xr, std::size_t n, std::size_t t, float ls) { return cross_entropy(xr, n, t, ls); });     \
  }                                                                                                           \
  inline void cross_entropy_backward(matrix_view<const H> x, const std::int64_t* targets, double dloss,       \
                                     matrix_view<H> dx, const loss_options& o = {},                           \
                                     const double* row_dloss = nullptr, const double* lse = nullptr,          \
                                     executor* ex = nullptr) {                                                \
    detail::half_cross_entropy_backward_rows(                                                                 \
        x, targets, dloss, dx, o, row_dloss, lse, ex,                                                         \
        [](const H* xr, std::size_t n, std::size_t t, double g, H* dr, float ls, const double* l) {           \
          if (l)                                                                                              \
            cross_entropy_backward(xr, n, t, g, dr, ls, *l);                                                  \
          else                                                                                                \
            cross_entropy_backward(xr, n, t, g, dr, ls);                                                      \
        });                                                                                                   \
  }                                                                                                           \
  inline void gumbel_softmax(matrix_view<const H> logits, matrix_view<H> y, float tau, std::uint64_t seed,    \
                             bool hard = false, executor* ex = nullptr) {                                     \
    gumbel_softmax(static_cast<const float*>(nullptr), static_cast<float*>(nullptr), 0, tau, seed, hard);     \
    detail::check_shapes("smax::gumbel_softmax", logits, y);                                                  \
    detail::for_each_half_row(logits.rows, logits.cols, ex, [&](std::size_t r) {                              \
      gumbel_softmax(logits.row(r), y.row(r), logits.cols, tau, gumbel_row_seed(seed, r), hard);              \
    });                                                                                                       \
  }
SMAX_DYNAMIC_HALF(bf16)
SMAX_DYNAMIC_HALF(fp16)
#undef SMAX_DYNAMIC_HALF
#undef SMAX_DYNAMIC_HALF_XY
#undef SMAX_DYNAMIC_HALF_YDYDX
#undef SMAX_DYNAMIC_HALF_XYDYDX

}  // namespace dynamic
}  // namespace smax
