// The C API (include/smax/smax.h) over smax::dynamic. Every entry point runs
// its C++ call inside guarded(), which turns any exception into a status
// code and a thread-local message: no exception may unwind into C.
#define SMAX_C_BUILDING
#include <smax/smax.h>

#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>

#include <smax/dynamic.hpp>
#include <smax/parallel.hpp>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#define SMAX_C_HAVE_GETPID 1
#endif

namespace {

thread_local std::string last_error;

void set_error(const char* what) noexcept {
  try {
    last_error = what;
  } catch (...) {
    last_error.clear();  // no memory for the text: the code still says why
  }
}

template <class F>
smax_status guarded(F&& f) noexcept {
  try {
    f();
    return SMAX_OK;
  } catch (const std::invalid_argument& e) {
    set_error(e.what());
    return SMAX_EINVAL;
  } catch (const std::bad_alloc&) {
    set_error("smax: out of memory");
    return SMAX_ENOMEM;
  } catch (const std::exception& e) {
    set_error(e.what());
    return SMAX_EINTERNAL;
  } catch (...) {
    set_error("smax: unknown C++ exception");
    return SMAX_EINTERNAL;
  }
}

// The C++ single-vector functions do not check pointers (n = 0 accepts
// null); C callers get SMAX_EINVAL instead of a crash for a null array.
void need(const void* p, std::size_t n, const char* fn, const char* name) {
  if (n && !p) throw std::invalid_argument(std::string("smax_") + fn + ": " + name + " is NULL");
}

// Takes the parameter's address: a C caller may pass any int, and in C++
// reading an enum object whose value lies outside the enum's range is
// undefined (UBSan's -fsanitize=enum); its bytes are read as an integer.
smax::algorithm to_algorithm(const smax_algorithm* p, const char* fn) {
  std::underlying_type_t<smax_algorithm> a;
  static_assert(sizeof a == sizeof *p, "smax_algorithm's size");
  std::memcpy(&a, p, sizeof a);
  switch (a) {
    case SMAX_AUTOMATIC: return smax::algorithm::automatic;
    case SMAX_THREE_PASS_RECOMPUTE: return smax::algorithm::three_pass_recompute;
    case SMAX_THREE_PASS_RELOAD: return smax::algorithm::three_pass_reload;
    case SMAX_TWO_PASS: return smax::algorithm::two_pass;
    case SMAX_ONLINE: return smax::algorithm::online;
  }
  throw std::invalid_argument(std::string("smax_") + fn + ": a is not a smax_algorithm value");
}

// The pool behind `threads` > 1: one per calling thread (so that callers on
// different threads never wait for each other), kept while its size is the
// one asked for. A fork()ed child inherits the object but not the workers:
// it is abandoned there (leaked, never joined) and a new one is made.
struct owned_pool {
  std::unique_ptr<smax::thread_pool> pool;
  std::size_t threads = 0;
#ifdef SMAX_C_HAVE_GETPID
  pid_t pid = 0;
#endif
};
thread_local owned_pool local_pool;

smax::executor* executor_for(std::size_t threads) {
  if (threads == 0) threads = std::thread::hardware_concurrency();
  if (threads <= 1) return nullptr;  // the calling thread
  owned_pool& p = local_pool;
#ifdef SMAX_C_HAVE_GETPID
  if (p.pool && p.pid != getpid()) {
    (void)p.pool.release();
    p.threads = 0;
  }
#endif
  if (!p.pool || p.threads != threads) {
    p.pool.reset();
    p.pool = std::make_unique<smax::thread_pool>(threads);  // may throw: std::system_error, bad_alloc
    p.threads = threads;
#ifdef SMAX_C_HAVE_GETPID
    p.pid = getpid();
#endif
  }
  return p.pool.get();
}

// A C array as the C++ element type C (layout-compatible: float, double, or
// smax::bf16 / smax::fp16 over uint16_t).
template <class C, class T>
C* as_cxx(T* p) noexcept {
  return reinterpret_cast<C*>(p);
}
template <class C, class T>
const C* as_cxx(const T* p) noexcept {
  return reinterpret_cast<const C*>(p);
}

template <class T>
smax::matrix_view<T> view(T* p, std::size_t ld, std::size_t rows, std::size_t cols) {
  return smax::matrix_view<T>(p, rows, cols, ld);
}

}  // namespace

extern "C" {

const char* smax_last_error(void) { return last_error.c_str(); }
const char* smax_version(void) { return SMAX_C_VERSION; }
const char* smax_active_isa(void) { return smax::dynamic::active_isa(); }
size_t smax_available_isas(const char** names, size_t cap) { return smax::dynamic::available_isas(names, cap); }
smax_status smax_set_isa(const char* isa) {
  if (smax::dynamic::set_isa(isa)) return SMAX_OK;
  set_error((std::string("smax_set_isa: isa \"") + isa + "\" is not compiled in or not supported by this CPU").c_str());
  return SMAX_EINVAL;
}
uint64_t smax_gumbel_row_seed(uint64_t seed, uint64_t r) { return smax::gumbel_row_seed(seed, r); }

// Each definition is the smax::dynamic call inside guarded(), after the
// pointer checks the C++ single-vector functions leave out. `params` is the
// C parameter list, `args` the C++ call's arguments.
#define SMAX_C_XY(name, sfx, params, args)                                                \
  smax_status smax_##name##_##sfx params {                                                                         \
    return guarded([&] {                                                                                           \
      need(x, n, #name "_" #sfx, "x"), need(y, n, #name "_" #sfx, "y");                                            \
      smax::dynamic::name args;                                                                                    \
    });                                                                                                            \
  }
// (a, b, dx, n, ...) backward forms, a and b named as in C++ (y, dy or x, dy).
#define SMAX_C_AB(name, a, b, sfx, params, args)                                          \
  smax_status smax_##name##_##sfx params {                                                                         \
    return guarded([&] {                                                                                           \
      need(a, n, #name "_" #sfx, #a), need(b, n, #name "_" #sfx, #b);                                              \
      need(dx, n, #name "_" #sfx, "dx");                                                                           \
      smax::dynamic::name args;                                                                                    \
    });                                                                                                            \
  }
// Batched: the C++ batched call checks strides, shapes and null data itself.
#define SMAX_C_BATCHED(name, sfx, params, args) \
  smax_status smax_##name##_batched_##sfx params { return guarded([&] { smax::dynamic::name args; }); }
#define SMAX_C_XY_BATCHED(name, T, C, sfx)                                                                   \
  SMAX_C_BATCHED(name, sfx, (const T* x, size_t ldx, T* y, size_t ldy, size_t rows, size_t cols, size_t threads),  \
                 (view(as_cxx<C>(x), ldx, rows, cols), view(as_cxx<C>(y), ldy, rows, cols), executor_for(threads)))
#define SMAX_C_AB_BATCHED(name, a, b, T, C, sfx)                                                           \
  SMAX_C_BATCHED(name, sfx,                                                                                        \
                 (const T* a, size_t ld##a, const T* b, size_t ld##b, T* dx, size_t lddx, size_t rows,             \
                  size_t cols, size_t threads),                                                                    \
                 (view(as_cxx<C>(a), ld##a, rows, cols), view(as_cxx<C>(b), ld##b, rows, cols), view(as_cxx<C>(dx), lddx, rows, cols),     \
                  executor_for(threads)))
#define SMAX_C_X(T) (const T* x, T* y, size_t n)

// T: the C element type; C: the C++ one the arrays are passed as (as_cxx);
// S: the scalar parameters' type.
#define SMAX_C_DEFINE(T, C, S, sfx)                                                                                  \
  SMAX_C_XY(softmax, sfx, (const T* x, T* y, size_t n, smax_algorithm a),                                          \
            (as_cxx<C>(x), as_cxx<C>(y), n, to_algorithm(&a, "softmax_" #sfx)))                                                           \
  SMAX_C_XY(log_softmax, sfx, SMAX_C_X(T), (as_cxx<C>(x), as_cxx<C>(y), n))                                                              \
  SMAX_C_XY(sparsemax, sfx, SMAX_C_X(T), (as_cxx<C>(x), as_cxx<C>(y), n))                                                                \
  SMAX_C_XY(entmax15, sfx, SMAX_C_X(T), (as_cxx<C>(x), as_cxx<C>(y), n))                                                                 \
  SMAX_C_XY(stablemax, sfx, SMAX_C_X(T), (as_cxx<C>(x), as_cxx<C>(y), n))                                                                \
  SMAX_C_XY(log_stablemax, sfx, SMAX_C_X(T), (as_cxx<C>(x), as_cxx<C>(y), n))                                                            \
  SMAX_C_XY(entmax_bisect, sfx, (const T* x, T* y, size_t n, S alpha, int n_iter), (as_cxx<C>(x), as_cxx<C>(y), n, alpha, n_iter))       \
  SMAX_C_XY(softpick, sfx, (const T* x, T* y, size_t n, S eps), (as_cxx<C>(x), as_cxx<C>(y), n, eps))                                    \
  SMAX_C_XY(ssmax, sfx, (const T* x, T* y, size_t n, S s, S b), (as_cxx<C>(x), as_cxx<C>(y), n, s, b))                                   \
  smax_status smax_gumbel_noise_##sfx(T* g, size_t n, uint64_t seed, uint64_t offset) {                            \
    return guarded([&] {                                                                                           \
      need(g, n, "gumbel_noise_" #sfx, "g");                                                                       \
      smax::dynamic::gumbel_noise(as_cxx<C>(g), n, seed, offset);                                                             \
    });                                                                                                            \
  }                                                                                                                \
  smax_status smax_gumbel_softmax_##sfx(const T* logits, T* y, size_t n, S tau, uint64_t seed, int hard) {         \
    return guarded([&] {                                                                                           \
      need(logits, n, "gumbel_softmax_" #sfx, "logits"), need(y, n, "gumbel_softmax_" #sfx, "y");                  \
      smax::dynamic::gumbel_softmax(as_cxx<C>(logits), as_cxx<C>(y), n, tau, seed, hard != 0);                                           \
    });                                                                                                            \
  }                                                                                                                \
  SMAX_C_AB(softmax_backward, y, dy, sfx, (const T* y, const T* dy, T* dx, size_t n), (as_cxx<C>(y), as_cxx<C>(dy), as_cxx<C>(dx), n))              \
  SMAX_C_AB(log_softmax_backward, y, dy, sfx, (const T* y, const T* dy, T* dx, size_t n), (as_cxx<C>(y), as_cxx<C>(dy), as_cxx<C>(dx), n))          \
  SMAX_C_AB(sparsemax_backward, y, dy, sfx, (const T* y, const T* dy, T* dx, size_t n), (as_cxx<C>(y), as_cxx<C>(dy), as_cxx<C>(dx), n))            \
  SMAX_C_AB(stablemax_backward, x, dy, sfx, (const T* x, const T* dy, T* dx, size_t n), (as_cxx<C>(x), as_cxx<C>(dy), as_cxx<C>(dx), n))            \
  SMAX_C_AB(entmax_backward, y, dy, sfx, (const T* y, const T* dy, T* dx, size_t n, S alpha),                      \
            (as_cxx<C>(y), as_cxx<C>(dy), as_cxx<C>(dx), n, alpha))                                                                                 \
  smax_status smax_softpick_backward_##sfx(const T* x, const T* y, const T* dy, T* dx, size_t n, S eps) {          \
    return guarded([&] {                                                                                           \
      need(x, n, "softpick_backward_" #sfx, "x"), need(y, n, "softpick_backward_" #sfx, "y");                      \
      need(dy, n, "softpick_backward_" #sfx, "dy"), need(dx, n, "softpick_backward_" #sfx, "dx");                  \
      smax::dynamic::softpick_backward(as_cxx<C>(x), as_cxx<C>(y), as_cxx<C>(dy), as_cxx<C>(dx), n, eps);                                                      \
    });                                                                                                            \
  }                                                                                                                \
                                                                                                                   \
  SMAX_C_BATCHED(softmax, sfx,                                                                                     \
                 (const T* x, size_t ldx, T* y, size_t ldy, size_t rows, size_t cols,                              \
                  smax_algorithm a, size_t threads),                                                               \
                 (view(as_cxx<C>(x), ldx, rows, cols), view(as_cxx<C>(y), ldy, rows, cols), to_algorithm(&a, "softmax_batched_" #sfx),    \
                  executor_for(threads)))                                                                          \
  SMAX_C_XY_BATCHED(log_softmax, T, C, sfx)                                                                           \
  SMAX_C_XY_BATCHED(sparsemax, T, C, sfx)                                                                             \
  SMAX_C_XY_BATCHED(entmax15, T, C, sfx)                                                                              \
  SMAX_C_XY_BATCHED(stablemax, T, C, sfx)                                                                             \
  SMAX_C_XY_BATCHED(log_stablemax, T, C, sfx)                                                                         \
  SMAX_C_BATCHED(entmax_bisect, sfx,                                                                               \
                 (const T* x, size_t ldx, T* y, size_t ldy, size_t rows, size_t cols,                              \
                  S alpha, int n_iter, size_t threads),                                                            \
                 (view(as_cxx<C>(x), ldx, rows, cols), view(as_cxx<C>(y), ldy, rows, cols), alpha, n_iter, executor_for(threads)))       \
  SMAX_C_BATCHED(softpick, sfx,                                                                                    \
                 (const T* x, size_t ldx, T* y, size_t ldy, size_t rows, size_t cols, S eps, size_t threads),      \
                 (view(as_cxx<C>(x), ldx, rows, cols), view(as_cxx<C>(y), ldy, rows, cols), eps, executor_for(threads)))                 \
  SMAX_C_BATCHED(ssmax, sfx,                                                                                       \
                 (const T* x, size_t ldx, T* y, size_t ldy, size_t rows, size_t cols, S s, S b, size_t threads),   \
                 (view(as_cxx<C>(x), ldx, rows, cols), view(as_cxx<C>(y), ldy, rows, cols), s, b, executor_for(threads)))                \
  SMAX_C_BATCHED(gumbel_softmax, sfx,                                                                              \
                 (const T* logits, size_t ldlogits, T* y, size_t ldy, size_t rows, size_t cols, S tau,             \
                  uint64_t seed, int hard, size_t threads),                                                        \
                 (view(as_cxx<C>(logits), ldlogits, rows, cols), view(as_cxx<C>(y), ldy, rows, cols), tau, seed, hard != 0,              \
                  executor_for(threads)))                                                                          \
  SMAX_C_AB_BATCHED(softmax_backward, y, dy, T, C, sfx)                                                               \
  SMAX_C_AB_BATCHED(log_softmax_backward, y, dy, T, C, sfx)                                                           \
  SMAX_C_AB_BATCHED(sparsemax_backward, y, dy, T, C, sfx)                                                             \
  SMAX_C_AB_BATCHED(stablemax_backward, x, dy, T, C, sfx)                                                             \
  SMAX_C_BATCHED(entmax_backward, sfx,                                                                             \
                 (const T* y, size_t ldy, const T* dy, size_t lddy, T* dx, size_t lddx, size_t rows,               \
                  size_t cols, S alpha, size_t threads),                                                           \
                 (view(as_cxx<C>(y), ldy, rows, cols), view(as_cxx<C>(dy), lddy, rows, cols), view(as_cxx<C>(dx), lddx, rows, cols), alpha,         \
                  executor_for(threads)))                                                                          \
  SMAX_C_BATCHED(softpick_backward, sfx,                                                                           \
                 (const T* x, size_t ldx, const T* y, size_t ldy, const T* dy, size_t lddy, T* dx, size_t lddx,    \
                  size_t rows, size_t cols, S eps, size_t threads),                                                \
                 (view(as_cxx<C>(x), ldx, rows, cols), view(as_cxx<C>(y), ldy, rows, cols), view(as_cxx<C>(dy), lddy, rows, cols),                  \
                  view(as_cxx<C>(dx), lddx, rows, cols), eps, executor_for(threads)))

SMAX_C_DEFINE(float, float, float, f32)
SMAX_C_DEFINE(double, double, double, f64)
SMAX_C_DEFINE(uint16_t, smax::bf16, float, bf16)
SMAX_C_DEFINE(uint16_t, smax::fp16, float, f16)

// 16-bit: the C storage (uint16_t) is the C++ type's layout.
#define SMAX_C_DEFINE_HALF(H, sfx)                                                                                  \
  smax_status smax_softmax_##sfx##_to_f32(const uint16_t* x, float* y, size_t n, smax_algorithm a) {               \
    return guarded([&] {                                                                                           \
      need(x, n, "softmax_" #sfx "_to_f32", "x"), need(y, n, "softmax_" #sfx "_to_f32", "y");                      \
      smax::dynamic::softmax(reinterpret_cast<const H*>(x), y, n, to_algorithm(&a, "softmax_" #sfx "_to_f32"));    \
    });                                                                                                            \
  }                                                                                                                \
  smax_status smax_log_softmax_##sfx##_to_f32(const uint16_t* x, float* y, size_t n) {                             \
    return guarded([&] {                                                                                           \
      need(x, n, "log_softmax_" #sfx "_to_f32", "x"), need(y, n, "log_softmax_" #sfx "_to_f32", "y");              \
      smax::dynamic::log_softmax(reinterpret_cast<const H*>(x), y, n);                                              \
    });                                                                                                            \
  }                                                                                                                \
  smax_status smax_convert_f32_to_##sfx(const float* src, uint16_t* dst, size_t n) {                               \
    return guarded([&] {                                                                                           \
      need(src, n, "convert_f32_to_" #sfx, "src"), need(dst, n, "convert_f32_to_" #sfx, "dst");                    \
      smax::dynamic::convert(src, reinterpret_cast<H*>(dst), n);                                                    \
    });                                                                                                            \
  }                                                                                                                \
  smax_status smax_convert_##sfx##_to_f32(const uint16_t* src, float* dst, size_t n) {                             \
    return guarded([&] {                                                                                           \
      need(src, n, "convert_" #sfx "_to_f32", "src"), need(dst, n, "convert_" #sfx "_to_f32", "dst");              \
      smax::dynamic::convert(reinterpret_cast<const H*>(src), dst, n);                                              \
    });                                                                                                            \
  }

SMAX_C_DEFINE_HALF(smax::bf16, bf16)
SMAX_C_DEFINE_HALF(smax::fp16, f16)
#undef SMAX_C_DEFINE_HALF

}  // extern "C"
