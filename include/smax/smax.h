/* smax — the C API (C99; also valid C++): the softmax family for C and for
 * any language that calls C (Rust, Julia, Go, C#, Python's ctypes).
 *
 * Link the compiled library smax_c (shared or static):
 *     cc app.c $(pkg-config --cflags --libs smax)                              (shared)
 *     cc app.c $(pkg-config --cflags smax) "$(pkg-config --variable=libdir smax)/libsmax_c.a" \
 *        -lstdc++ -lm -pthread                                                  (static)
 * or in CMake: find_package(smax) then target_link_libraries(app smax::smax_c)
 * (smax::smax_c_static for the static archive).
 *
 * Every function is the C++ function of the same name (smax/smax.hpp, which
 * states each formula, its special values and its accuracy) on the run-time
 * dispatch (smax::dynamic: the best ISA the CPU has among AVX-512, AVX2+FMA,
 * SSE2, NEON; SMAX_ISA=<name> in the environment or smax_set_isa() forces
 * one). Naming: smax_<function>_<dtype>, dtype f32 (float) or f64 (double),
 * the C++ arguments in the C++ order. The results are the C++ results, bit
 * for bit.
 *
 *   - x and y may be the same pointer (in place), and a backward's dx may be
 *     any one of its inputs; overlapping but unequal arrays are undefined.
 *   - No alignment is needed; n = 0 touches nothing and accepts NULL.
 *   - Every function returns SMAX_OK, or an error code with nothing written:
 *     SMAX_EINVAL for a bad argument (alpha < 1, eps < 0, tau <= 0, an
 *     unknown smax_algorithm, a stride below cols, NULL with n > 0; the text
 *     of smax_last_error() names the parameter), SMAX_ENOMEM when memory ran
 *     out, SMAX_EINTERNAL for anything else. No C++ exception ever crosses
 *     this API.
 *   - Thread-safe: any function may be called from any thread at once.
 *
 * Batched forms, smax_<function>_batched_<dtype>: `rows` rows of `cols`
 * elements; each matrix pointer is followed by its row stride in elements
 * (>= cols; 0 means dense, i.e. cols). Each row gives bitwise the
 * single-vector function of that row (gumbel_softmax: row r draws with the
 * seed smax_gumbel_row_seed(seed, r)). `threads`: 1 runs on the calling
 * thread only; k > 1 uses the calling thread plus k - 1 workers of a pool
 * owned by the calling thread (created on first use, kept for later calls
 * with the same count); 0 means one per hardware thread. Results are
 * bitwise identical for any thread count.
 */
#ifndef SMAX_SMAX_H
#define SMAX_SMAX_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32) && defined(SMAX_C_SHARED)
#if defined(SMAX_C_BUILDING)
#define SMAX_C_API __declspec(dllexport)
#else
#define SMAX_C_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define SMAX_C_API __attribute__((visibility("default")))
#else
#define SMAX_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum smax_status {
  SMAX_OK = 0,
  SMAX_EINVAL = 1,    /* a bad argument; smax_last_error() says which */
  SMAX_ENOMEM = 2,    /* out of memory (a batched call's pool or scratch) */
  SMAX_EINTERNAL = 3  /* any other failure; smax_last_error() has the text */
} smax_status;

/* smax::algorithm (softmax only; see smax/detail/softmax.hpp for the traffic each costs). */
typedef enum smax_algorithm {
  SMAX_AUTOMATIC = 0,
  SMAX_THREE_PASS_RECOMPUTE = 1,
  SMAX_THREE_PASS_RELOAD = 2,
  SMAX_TWO_PASS = 3,
  SMAX_ONLINE = 4
} smax_algorithm;

/* The message of the last call on this thread that failed ("" if none). */
SMAX_C_API const char* smax_last_error(void);
/* "0.1.0" */
SMAX_C_API const char* smax_version(void);
/* The ISA calls go to now: "avx512", "avx2", "sse2" or "neon". */
SMAX_C_API const char* smax_active_isa(void);
/* ISAs compiled in that this CPU runs, best first: returns how many and
 * writes up to cap of their names (static strings) into names. */
SMAX_C_API size_t smax_available_isas(const char** names, size_t cap);
/* Route every later call (all threads) to isa; NULL restores the default
 * choice. SMAX_EINVAL (and no change) if it is not compiled in or the CPU
 * lacks it. */
SMAX_C_API smax_status smax_set_isa(const char* isa);
/* The seed batched gumbel_softmax uses for row r. */
SMAX_C_API uint64_t smax_gumbel_row_seed(uint64_t seed, uint64_t r);

/* ---- float (f32) and double (f64) ------------------------------------- */
/* T is the arrays' element type, S the scalar parameters' (float for the
 * 16-bit types below). One list for every dtype. A new function of the
 * family adds one line to each block here, its definition in src/smax_c.cpp
 * and a case in tests/c_api/ (docs/c_api.md, "Adding a function"). */

#define SMAX_C_DECLARE(T, S, sfx)                                                                                     \
  SMAX_C_API smax_status smax_softmax_##sfx(const T* x, T* y, size_t n, smax_algorithm a);                       \
  SMAX_C_API smax_status smax_log_softmax_##sfx(const T* x, T* y, size_t n);                                      \
  SMAX_C_API smax_status smax_sparsemax_##sfx(const T* x, T* y, size_t n);                                        \
  SMAX_C_API smax_status smax_entmax15_##sfx(const T* x, T* y, size_t n);                                         \
  SMAX_C_API smax_status smax_entmax_bisect_##sfx(const T* x, T* y, size_t n, S alpha, int n_iter);               \
  SMAX_C_API smax_status smax_stablemax_##sfx(const T* x, T* y, size_t n);                                        \
  SMAX_C_API smax_status smax_log_stablemax_##sfx(const T* x, T* y, size_t n);                                    \
  SMAX_C_API smax_status smax_softpick_##sfx(const T* x, T* y, size_t n, S eps);                                  \
  SMAX_C_API smax_status smax_ssmax_##sfx(const T* x, T* y, size_t n, S s, S b);                                  \
  SMAX_C_API smax_status smax_gumbel_noise_##sfx(T* g, size_t n, uint64_t seed, uint64_t offset);                 \
  SMAX_C_API smax_status smax_gumbel_softmax_##sfx(const T* logits, T* y, size_t n, S tau, uint64_t seed,         \
                                                   int hard);                                                    \
  SMAX_C_API smax_status smax_softmax_backward_##sfx(const T* y, const T* dy, T* dx, size_t n);                  \
  SMAX_C_API smax_status smax_log_softmax_backward_##sfx(const T* y, const T* dy, T* dx, size_t n);              \
  SMAX_C_API smax_status smax_sparsemax_backward_##sfx(const T* y, const T* dy, T* dx, size_t n);                \
  SMAX_C_API smax_status smax_entmax_backward_##sfx(const T* y, const T* dy, T* dx, size_t n, S alpha);          \
  SMAX_C_API smax_status smax_stablemax_backward_##sfx(const T* x, const T* dy, T* dx, size_t n);                \
  SMAX_C_API smax_status smax_softpick_backward_##sfx(const T* x, const T* y, const T* dy, T* dx, size_t n,      \
                                                      S eps);                                                    \
                                                                                                                 \
  SMAX_C_API smax_status smax_softmax_batched_##sfx(const T* x, size_t ldx, T* y, size_t ldy, size_t rows,       \
                                                    size_t cols, smax_algorithm a, size_t threads);              \
  SMAX_C_API smax_status smax_log_softmax_batched_##sfx(const T* x, size_t ldx, T* y, size_t ldy, size_t rows,   \
                                                        size_t cols, size_t threads);                            \
  SMAX_C_API smax_status smax_sparsemax_batched_##sfx(const T* x, size_t ldx, T* y, size_t ldy, size_t rows,     \
                                                      size_t cols, size_t threads);                              \
  SMAX_C_API smax_status smax_entmax15_batched_##sfx(const T* x, size_t ldx, T* y, size_t ldy, size_t rows,      \
                                                     size_t cols, size_t threads);                               \
  SMAX_C_API smax_status smax_entmax_bisect_batched_##sfx(const T* x, size_t ldx, T* y, size_t ldy, size_t rows, \
                                                          size_t cols, S alpha, int n_iter, size_t threads);     \
  SMAX_C_API smax_status smax_stablemax_batched_##sfx(const T* x, size_t ldx, T* y, size_t ldy, size_t rows,     \
                                                      size_t cols, size_t threads);                              \
  SMAX_C_API smax_status smax_log_stablemax_batched_##sfx(const T* x, size_t ldx, T* y, size_t ldy, size_t rows, \
                                                          size_t cols, size_t threads);                          \
  SMAX_C_API smax_status smax_softpick_batched_##sfx(const T* x, size_t ldx, T* y, size_t ldy, size_t rows,      \
                                                     size_t cols, S eps, size_t threads);                        \
  SMAX_C_API smax_status smax_ssmax_batched_##sfx(const T* x, size_t ldx, T* y, size_t ldy, size_t rows,         \
                                                  size_t cols, S s, S b, size_t threads);                        \
  SMAX_C_API smax_status smax_gumbel_softmax_batched_##sfx(const T* logits, size_t ldlogits, T* y, size_t ldy,   \
                                                           size_t rows, size_t cols, S tau, uint64_t seed,       \
                                                           int hard, size_t threads);                            \
  SMAX_C_API smax_status smax_softmax_backward_batched_##sfx(const T* y, size_t ldy, const T* dy, size_t lddy,   \
                                                             T* dx, size_t lddx, size_t rows, size_t cols,       \
                                                             size_t threads);                                    \
  SMAX_C_API smax_status smax_log_softmax_backward_batched_##sfx(const T* y, size_t ldy, const T* dy,            \
                                                                 size_t lddy, T* dx, size_t lddx, size_t rows,   \
                                                                 size_t cols, size_t threads);                   \
  SMAX_C_API smax_status smax_sparsemax_backward_batched_##sfx(const T* y, size_t ldy, const T* dy, size_t lddy, \
                                                               T* dx, size_t lddx, size_t rows, size_t cols,     \
                                                               size_t threads);                                  \
  SMAX_C_API smax_status smax_entmax_backward_batched_##sfx(const T* y, size_t ldy, const T* dy, size_t lddy,    \
                                                            T* dx, size_t lddx, size_t rows, size_t cols,        \
                                                            S alpha, size_t threads);                            \
  SMAX_C_API smax_status smax_stablemax_backward_batched_##sfx(const T* x, size_t ldx, const T* dy, size_t lddy, \
                                                               T* dx, size_t lddx, size_t rows, size_t cols,     \
                                                               size_t threads);                                  \
  SMAX_C_API smax_status smax_softpick_backward_batched_##sfx(const T* x, size_t ldx, const T* y, size_t ldy,    \
                                                              const T* dy, size_t lddy, T* dx, size_t lddx,      \
                                                              size_t rows, size_t cols, S eps, size_t threads);

SMAX_C_DECLARE(float, float, f32)
SMAX_C_DECLARE(double, double, f64)

/* 16-bit data (docs/half.md): bfloat16 and IEEE binary16 arrays stored as
 * uint16_t (a PyTorch bfloat16 / half tensor's data, a numpy float16 array).
 * Every function above with the suffix bf16 or f16, arrays uint16_t and
 * scalar parameters float; computed in float, each output rounded once to
 * nearest even. _to_f32: float outputs from 16-bit logits. */
typedef uint16_t smax_bf16;
typedef uint16_t smax_f16;

SMAX_C_DECLARE(smax_bf16, float, bf16)
SMAX_C_DECLARE(smax_f16, float, f16)

#define SMAX_C_DECLARE_HALF(H, sfx)                                                                                 \
  SMAX_C_API smax_status smax_softmax_##sfx##_to_f32(const H* x, float* y, size_t n, smax_algorithm a);          \
  SMAX_C_API smax_status smax_log_softmax_##sfx##_to_f32(const H* x, float* y, size_t n);                         \
  SMAX_C_API smax_status smax_convert_f32_to_##sfx(const float* src, H* dst, size_t n);                          \
  SMAX_C_API smax_status smax_convert_##sfx##_to_f32(const H* src, float* dst, size_t n);

SMAX_C_DECLARE_HALF(smax_bf16, bf16)
SMAX_C_DECLARE_HALF(smax_f16, f16)
#undef SMAX_C_DECLARE_HALF
#undef SMAX_C_DECLARE

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* SMAX_SMAX_H */
