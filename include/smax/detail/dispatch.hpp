// smax — the one list that the runtime dispatch table, its per-ISA
// instantiations (src/smax_dynamic_isa.cpp) and the smax::dynamic wrappers
// (src/smax_dynamic.cpp) all expand. Adding a public function to the dynamic
// API is one SMAX_FUNCTIONS line here plus its declaration in dynamic.hpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "../types.hpp"
#include "config.hpp"
#include "batched.hpp"
#include "attention.hpp"
#include "losses.hpp"
#include "half.hpp"

// X(name, parameter list, argument list) for element type T.
#define SMAX_FUNCTIONS(T, X)                                                  \
  X(softmax, (const T* x, T* y, std::size_t n, algorithm a), (x, y, n, a))   \
  X(log_softmax, (const T* x, T* y, std::size_t n), (x, y, n))             \
  X(stablemax, (const T* x, T* y, std::size_t n), (x, y, n))               \
  X(log_stablemax, (const T* x, T* y, std::size_t n), (x, y, n))           \
  X(softpick, (const T* x, T* y, std::size_t n, T eps), (x, y, n, eps))    \
  X(ssmax, (const T* x, T* y, std::size_t n, T s, T b), (x, y, n, s, b))   \
  X(gumbel_noise, (T* g, std::size_t n, std::uint64_t seed, std::uint64_t offset), (g, n, seed, offset)) \
  X(gumbel_softmax, (const T* logits, T* y, std::size_t n, T tau, std::uint64_t seed, bool hard), (logits, y, n, tau, seed, hard)) \
  X(stablemax_backward, (const T* x, const T* dy, T* dx, std::size_t n), (x, dy, dx, n)) \
  X(softpick_backward, (const T* x, const T* y, const T* dy, T* dx, std::size_t n, T eps), (x, y, dy, dx, n, eps)) \
  X(sparsemax, (const T* x, T* y, std::size_t n), (x, y, n))               \
  X(entmax15, (const T* x, T* y, std::size_t n), (x, y, n))                \
  X(entmax_bisect, (const T* x, T* y, std::size_t n, T alpha, int n_iter), (x, y, n, alpha, n_iter)) \
  X(sparsemax_backward, (const T* y, const T* dy, T* dx, std::size_t n), (y, dy, dx, n)) \
  X(entmax_backward, (const T* y, const T* dy, T* dx, std::size_t n, T alpha), (y, dy, dx, n, alpha)) \
  X(softmax_backward, (const T* y, const T* dy, T* dx, std::size_t n), (y, dy, dx, n)) \
  X(log_softmax_backward, (const T* y, const T* dy, T* dx, std::size_t n), (y, dy, dx, n)) \
  X(topk_softmax, (const T* x, std::size_t n, std::size_t k, T* probs, std::uint32_t* index), (x, n, k, probs, index)) \
  X(sigmoid_attention, (const T* x, T* y, std::size_t n, T b), (x, y, n, b)) \
  X(sa_softmax, (const T* x, T* y, std::size_t n, bool normalized), (x, y, n, normalized)) \
  X(multimax, (const T* x, T* y, std::size_t n, const multimax_params& p), (x, y, n, p)) \
  X(asentmax, (const T* x, T* y, std::size_t n, T alpha, T s, T b), (x, y, n, alpha, s, b)) \
  X(sigmoid_attention_backward, (const T* x, const T* y, const T* dy, T* dx, std::size_t n, T b), (x, y, dy, dx, n, b)) \
  X(sa_softmax_backward, (const T* x, const T* y, const T* dy, T* dx, std::size_t n, bool normalized), (x, y, dy, dx, n, normalized)) \
  X(multimax_backward, (const T* x, const T* y, const T* dy, T* dx, std::size_t n, const multimax_params& p), (x, y, dy, dx, n, p)) \
  X(asentmax_backward, (const T* x, const T* y, const T* dy, T* dx, std::size_t n, T alpha, T s, T b), (x, y, dy, dx, n, alpha, s, b))

// The batched (matrix) overloads: same names as above, so the table stores
// them as batched_<name>.
#define SMAX_BATCHED_FUNCTIONS(T, X)                                                        \
  X(softmax, (matrix_view<const T> x, matrix_view<T> y, algorithm a, executor* ex), (x, y, a, ex)) \
  X(log_softmax, (matrix_view<const T> x, matrix_view<T> y, executor* ex), (x, y, ex)) \
  X(sparsemax, (matrix_view<const T> x, matrix_view<T> y, executor* ex), (x, y, ex)) \
  X(entmax15, (matrix_view<const T> x, matrix_view<T> y, executor* ex), (x, y, ex)) \
  X(entmax_bisect, (matrix_view<const T> x, matrix_view<T> y, T alpha, int n_iter, executor* ex), (x, y, alpha, n_iter, ex)) \
  X(stablemax, (matrix_view<const T> x, matrix_view<T> y, executor* ex), (x, y, ex)) \
  X(log_stablemax, (matrix_view<const T> x, matrix_view<T> y, executor* ex), (x, y, ex)) \
  X(softpick, (matrix_view<const T> x, matrix_view<T> y, T eps, executor* ex), (x, y, eps, ex)) \
  X(ssmax, (matrix_view<const T> x, matrix_view<T> y, T s, T b, executor* ex), (x, y, s, b, ex)) \
  X(gumbel_softmax, (matrix_view<const T> logits, matrix_view<T> y, T tau, std::uint64_t seed, bool hard, executor* ex), (logits, y, tau, seed, hard, ex)) \
  X(softmax_backward, (matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, executor* ex), (y, dy, dx, ex)) \
  X(log_softmax_backward, (matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, executor* ex), (y, dy, dx, ex)) \
  X(sparsemax_backward, (matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, executor* ex), (y, dy, dx, ex)) \
  X(entmax_backward, (matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, T alpha, executor* ex), (y, dy, dx, alpha, ex)) \
  X(stablemax_backward, (matrix_view<const T> x, matrix_view<const T> dy, matrix_view<T> dx, executor* ex), (x, dy, dx, ex)) \
  X(softpick_backward, (matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, T eps, executor* ex), (x, y, dy, dx, eps, ex)) \
  X(topk_softmax, (matrix_view<const T> x, std::size_t k, matrix_view<T> probs, matrix_view<std::uint32_t> index, executor* ex), (x, k, probs, index, ex)) \
  X(sample, (matrix_view<const T> logits, std::size_t* out, const sampling& s, std::uint64_t seed, std::uint64_t offset, executor* ex), (logits, out, s, seed, offset, ex)) \
  X(sigmoid_attention, (matrix_view<const T> x, matrix_view<T> y, T b, executor* ex), (x, y, b, ex)) \
  X(sa_softmax, (matrix_view<const T> x, matrix_view<T> y, bool normalized, executor* ex), (x, y, normalized, ex)) \
  X(multimax, (matrix_view<const T> x, matrix_view<T> y, const multimax_params& p, executor* ex), (x, y, p, ex)) \
  X(asentmax, (matrix_view<const T> x, matrix_view<T> y, T alpha, T s, T b, executor* ex), (x, y, alpha, s, b, ex)) \
  X(sigmoid_attention_backward, (matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, T b, executor* ex), (x, y, dy, dx, b, ex)) \
  X(sa_softmax_backward, (matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, bool normalized, executor* ex), (x, y, dy, dx, normalized, ex)) \
  X(multimax_backward, (matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, const multimax_params& p, executor* ex), (x, y, dy, dx, p, ex)) \
  X(asentmax_backward, (matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx, T alpha, T s, T b, executor* ex), (x, y, dy, dx, alpha, s, b, ex))

// Functions with a return value or overloads of one name (losses,
// attention options, sample): X(return type, table field, public name, parameter
// list, argument list).
#define SMAX_TYPED_FUNCTIONS(T, X)                                                                               \
  X(double, logsumexp, logsumexp, (const T* x, std::size_t n), (x, n))                                          \
  X(double, cross_entropy, cross_entropy, (const T* x, std::size_t n, std::size_t target, float label_smoothing), \
    (x, n, target, label_smoothing))                                                                             \
  X(void, cross_entropy_backward, cross_entropy_backward,                                                        \
    (const T* x, std::size_t n, std::size_t target, double dloss, T* dx, float label_smoothing),                 \
    (x, n, target, dloss, dx, label_smoothing))                                                                  \
  X(void, cross_entropy_backward_lse, cross_entropy_backward,                                                    \
    (const T* x, std::size_t n, std::size_t target, double dloss, T* dx, float label_smoothing, double lse),     \
    (x, n, target, dloss, dx, label_smoothing, lse))                                                             \
  X(void, batched_logsumexp, logsumexp, (matrix_view<const T> x, double* out, executor* ex), (x, out, ex))      \
  X(double, batched_cross_entropy, cross_entropy,                                                                \
    (matrix_view<const T> x, const std::int64_t* targets, const loss_options& o, double* row_loss,               \
     double* row_lse, executor* ex),                                                                             \
    (x, targets, o, row_loss, row_lse, ex))                                                                      \
  X(void, batched_cross_entropy_backward, cross_entropy_backward,                                                \
    (matrix_view<const T> x, const std::int64_t* targets, double dloss, matrix_view<T> dx, const loss_options& o, \
     const double* row_dloss, const double* lse, executor* ex),                                                  \
    (x, targets, dloss, dx, o, row_dloss, lse, ex))                                                             \
  X(void, softmax_opts, softmax, (const T* x, T* y, std::size_t n, const softmax_options<T>& o), (x, y, n, o))   \
  X(void, log_softmax_opts, log_softmax, (const T* x, T* y, std::size_t n, const softmax_options<T>& o),         \
    (x, y, n, o))                                                                                                \
  X(void, softmax_backward_opts, softmax_backward,                                                               \
    (const T* x, const T* y, const T* dy, T* dx, std::size_t n, const softmax_options<T>& o),                    \
    (x, y, dy, dx, n, o))                                                                                        \
  X(void, batched_softmax_attention, softmax,                                                                    \
    (matrix_view<const T> x, matrix_view<T> y, const attention_options<T>& o, executor* ex), (x, y, o, ex))     \
  X(void, batched_log_softmax_attention, log_softmax,                                                            \
    (matrix_view<const T> x, matrix_view<T> y, const attention_options<T>& o, executor* ex), (x, y, o, ex)) \
  X(void, batched_softmax_backward_attention, softmax_backward,                                                  \
    (matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy, matrix_view<T> dx,                 \
     const attention_options<T>& o, executor* ex),                                                               \
    (x, y, dy, dx, o, ex))                                                                                       \
  X(std::size_t, sample, sample,                                                                                 \
    (const T* logits, std::size_t n, const sampling& s, std::uint64_t seed, std::uint64_t offset),              \
    (logits, n, s, seed, offset))

// The 16-bit forms (H = bf16, fp16), in the SMAX_TYPED_FUNCTIONS shape.
#define SMAX_HALF_FUNCTIONS(H, X)                                                                                \
  X(void, softmax, softmax, (const H* x, H* y, std::size_t n, algorithm a), (x, y, n, a))                       \
  X(void, softmax_to_f32, softmax, (const H* x, float* y, std::size_t n, algorithm a), (x, y, n, a))            \
  X(void, log_softmax, log_softmax, (const H* x, H* y, std::size_t n), (x, y, n))                               \
  X(void, log_softmax_to_f32, log_softmax, (const H* x, float* y, std::size_t n), (x, y, n))                    \
  X(void, batched_softmax, softmax, (matrix_view<const H> x, matrix_view<H> y, algorithm a, executor* ex),       \
    (x, y, a, ex))                                                                                               \
  X(void, batched_softmax_to_f32, softmax,                                                                       \
    (matrix_view<const H> x, matrix_view<float> y, algorithm a, executor* ex), (x, y, a, ex))                    \
  X(void, batched_log_softmax, log_softmax, (matrix_view<const H> x, matrix_view<H> y, executor* ex),           \
    (x, y, ex))                                                                                                  \
  X(void, batched_log_softmax_to_f32, log_softmax, (matrix_view<const H> x, matrix_view<float> y, executor* ex), \
    (x, y, ex))                                                                                                  \
  X(void, softmax_backward, softmax_backward, (const H* y, const H* dy, H* dx, std::size_t n), (y, dy, dx, n))  \
  X(void, log_softmax_backward, log_softmax_backward, (const H* y, const H* dy, H* dx, std::size_t n),           \
    (y, dy, dx, n))                                                                                              \
  X(void, batched_softmax_backward, softmax_backward,                                                            \
    (matrix_view<const H> y, matrix_view<const H> dy, matrix_view<H> dx, executor* ex), (y, dy, dx, ex))         \
  X(void, batched_log_softmax_backward, log_softmax_backward,                                                    \
    (matrix_view<const H> y, matrix_view<const H> dy, matrix_view<H> dx, executor* ex), (y, dy, dx, ex))         \
  X(double, logsumexp, logsumexp, (const H* x, std::size_t n), (x, n))                                          \
  X(double, cross_entropy, cross_entropy, (const H* x, std::size_t n, std::size_t target, float ls),            \
    (x, n, target, ls))                                                                                          \
  X(void, cross_entropy_backward, cross_entropy_backward,                                                        \
    (const H* x, std::size_t n, std::size_t target, double dloss, H* dx, float ls), (x, n, target, dloss, dx, ls)) \
  X(void, cross_entropy_backward_lse, cross_entropy_backward,                                                    \
    (const H* x, std::size_t n, std::size_t target, double dloss, H* dx, float ls, double lse),                  \
    (x, n, target, dloss, dx, ls, lse))                                                                          \
  X(void, stablemax, stablemax, (const H* x, H* y, std::size_t n), (x, y, n))                                  \
  X(void, log_stablemax, log_stablemax, (const H* x, H* y, std::size_t n), (x, y, n))                          \
  X(void, stablemax_backward, stablemax_backward, (const H* x, const H* dy, H* dx, std::size_t n),              \
    (x, dy, dx, n))                                                                                              \
  X(void, ssmax, ssmax, (const H* x, H* y, std::size_t n, float s, float b), (x, y, n, s, b))                  \
  X(void, softpick, softpick, (const H* x, H* y, std::size_t n, float eps), (x, y, n, eps))                    \
  X(void, softpick_backward, softpick_backward,                                                                  \
    (const H* x, const H* y, const H* dy, H* dx, std::size_t n, float eps), (x, y, dy, dx, n, eps))              \
  X(void, sigmoid_attention, sigmoid_attention, (const H* x, H* y, std::size_t n, float b), (x, y, n, b))    \
  X(void, sigmoid_attention_backward, sigmoid_attention_backward,                                                \
    (const H* x, const H* y, const H* dy, H* dx, std::size_t n, float b), (x, y, dy, dx, n, b))                  \
  X(void, sa_softmax, sa_softmax, (const H* x, H* y, std::size_t n, bool normalized), (x, y, n, normalized))      \
  X(void, multimax, multimax, (const H* x, H* y, std::size_t n, const multimax_params& p), (x, y, n, p))        \
  X(void, multimax_backward, multimax_backward,                                                                  \
    (const H* x, const H* y, const H* dy, H* dx, std::size_t n, const multimax_params& p), (x, y, dy, dx, n, p))  \
  X(void, sa_softmax_backward, sa_softmax_backward,                                                              \
    (const H* x, const H* y, const H* dy, H* dx, std::size_t n, bool normalized), (x, y, dy, dx, n, normalized))  \
  X(void, gumbel_noise, gumbel_noise, (H* g, std::size_t n, std::uint64_t seed, std::uint64_t offset),          \
    (g, n, seed, offset))                                                                                        \
  X(void, gumbel_softmax, gumbel_softmax,                                                                        \
    (const H* logits, H* y, std::size_t n, float tau, std::uint64_t seed, bool hard),                            \
    (logits, y, n, tau, seed, hard))                                                                             \
  X(void, sparsemax, sparsemax, (const H* x, H* y, std::size_t n), (x, y, n))                                  \
  X(void, entmax15, entmax15, (const H* x, H* y, std::size_t n), (x, y, n))                                    \
  X(void, entmax_bisect, entmax_bisect, (const H* x, H* y, std::size_t n, float alpha, int n_iter),            \
    (x, y, n, alpha, n_iter))                                                                                    \
  X(void, asentmax, asentmax, (const H* x, H* y, std::size_t n, float alpha, float s, float b),                \
    (x, y, n, alpha, s, b))                                                                                      \
  X(void, sparsemax_backward, sparsemax_backward, (const H* y, const H* dy, H* dx, std::size_t n),              \
    (y, dy, dx, n))                                                                                              \
  X(void, entmax_backward, entmax_backward, (const H* y, const H* dy, H* dx, std::size_t n, float alpha),       \
    (y, dy, dx, n, alpha))                                                                                       \
  X(void, asentmax_backward, asentmax_backward,                                                                  \
    (const H* x, const H* y, const H* dy, H* dx, std::size_t n, float alpha, float s, float b),                  \
    (x, y, dy, dx, n, alpha, s, b))                                                                              \
  X(void, topk_softmax, topk_softmax, (const H* x, std::size_t n, std::size_t k, H* probs, std::uint32_t* index), \
    (x, n, k, probs, index))                                                                                     \
  X(std::size_t, sample, sample,                                                                                 \
    (const H* logits, std::size_t n, const sampling& s, std::uint64_t seed, std::uint64_t offset),              \
    (logits, n, s, seed, offset))                                                                                \
  X(void, widen, convert, (const H* src, float* dst, std::size_t n), (src, dst, n))                             \
  X(void, narrow, convert, (const float* src, H* dst, std::size_t n), (src, dst, n))

// X(name, xsimd arch tag, CPU check): best first; the last is the baseline.
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#define SMAX_ISAS(X)                                                                    \
  X(avx512, xsimd::avx512f, xsimd::available_architectures().best >= xsimd::avx512f::version()) \
  X(avx2, xsimd::fma3<xsimd::avx2>,                                                     \
    xsimd::available_architectures().best >= xsimd::fma3<xsimd::avx2>::version() && smax::detail::cpu_has_f16c()) \
  X(sse2, xsimd::sse2, true)
#elif defined(__aarch64__)
#define SMAX_ISAS(X) X(neon, xsimd::neon64, true)
#else
#error "smax runtime dispatch: no ISA list for this architecture"
#endif

#define SMAX_EXPAND(...) __VA_ARGS__

namespace smax {
namespace detail {

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
// The avx2 TU is compiled with -mf16c (fp16 conversions); every AVX2 CPU
// known has F16C, but the check is one CPUID (leaf 1, ECX bit 29).
inline bool cpu_has_f16c() noexcept {
#if defined(__GNUC__) || defined(__clang__)
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
  return (c >> 29) & 1u;
#else
  return true;
#endif
}
// The avx512 level's bf16 variant (half.hpp, avx512_bf16) needs
// AVX512_BF16 (CPUID leaf 7 subleaf 1, EAX bit 5) and, as its TU is built
// with -mavx512bf16 (which implies -mavx512bw) and -mavx512dq (without
// which xsimd 8.1 cannot build its avx512bw arch), AVX512BW and DQ (leaf 7,
// EBX bits 30, 17). Every CPU with AVX512_BF16 so far has both.
inline bool cpu_has_avx512_bf16() noexcept {
#if defined(__GNUC__) || defined(__clang__)
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
  if (a < 7) return false;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  const bool bw_dq = ((b >> 30) & 1u) && ((b >> 17) & 1u);
  if (!bw_dq || a < 1) return false;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
  return (a >> 5) & 1u;
#else
  return false;
#endif
}
#endif

template <class H>
struct half_table {
#define SMAX_HALF_FIELD(ret, field, name, params, args) ret(*field) params;
  SMAX_HALF_FUNCTIONS(H, SMAX_HALF_FIELD)
#undef SMAX_HALF_FIELD
};

template <class T>
struct kernel_table {
#define SMAX_TABLE_FIELD(name, params, args) void(*name) params;
  SMAX_FUNCTIONS(T, SMAX_TABLE_FIELD)
#undef SMAX_TABLE_FIELD
#define SMAX_BATCHED_FIELD(name, params, args) void(*batched_##name) params;
  SMAX_BATCHED_FUNCTIONS(T, SMAX_BATCHED_FIELD)
#undef SMAX_BATCHED_FIELD
#define SMAX_TYPED_FIELD(ret, field, name, params, args) ret(*field) params;
  SMAX_TYPED_FUNCTIONS(T, SMAX_TYPED_FIELD)
#undef SMAX_TYPED_FIELD
};

struct isa_tables {
  const char* name;
  kernel_table<float> f32;
  kernel_table<double> f64;
  half_table<bf16> b16;
  half_table<fp16> h16;
};

// Defined in the per-ISA translation unit of each ISA compiled in.
#define SMAX_DECLARE_TABLES(isa, arch, check) const isa_tables& tables_##isa() noexcept;
SMAX_ISAS(SMAX_DECLARE_TABLES)
#undef SMAX_DECLARE_TABLES

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
// The avx512 level's bf16 functions built for avx512_bf16 (the same
// kernels, narrowing with vcvtneps2bf16; SMAX_DYNAMIC_ISA=avx512_bf16). The
// dispatcher puts them in the avx512 level's tables when
// cpu_has_avx512_bf16() and SMAX_AVX512_BF16 is not "0"; the same bits
// either way.
const half_table<bf16>& bf16_table_avx512_bf16() noexcept;
#endif

// The tables smax::dynamic's calls go to now (src/smax_dynamic.cpp): for
// the tests that check which variant the dispatcher installed.
const isa_tables& active_tables() noexcept;

}  // namespace detail
}  // namespace smax
