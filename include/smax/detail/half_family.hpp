// The rest of the family on bf16 / fp16 arrays (softmax, log_softmax and
// their backward passes have their own streaming kernels: softmax_half.hpp;
// logsumexp, cross_entropy, the stablemax members, ssmax, softpick,
// topk_softmax, sample, the sparse family, gumbel, sigmoid_attention,
// multimax and (out of cache) sa_softmax read 16-bit arrays through the
// float kernels' own passes, below; their refused rows take the widened
// form).
// Every other 16-bit call widens its 16-bit arrays into float, runs the float
// kernel (one body for every type), and rounds each output once: results
// within one 16-bit ulp of the float kernel's, special values and errors as
// the float forms have them, nothing written before the arguments are checked.
// The float copies live in this thread's workspace (kept between calls, up
// to half_cache_floats floats) or, for longer rows, in memory allocated for
// the call (std::bad_alloc if that fails).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "attention.hpp"
#include "batched.hpp"
#include "gumbel.hpp"
#include "half.hpp"
#include "losses.hpp"
#include "seeds.hpp"
#include "softmax_half.hpp"
#include "softpick.hpp"
#include "sparse.hpp"
#include "ssmax.hpp"
#include "stablemax.hpp"
#include "topk.hpp"

namespace smax {
namespace detail {

// Floats kept per thread between 16-bit calls (4 MiB): four rows of 2^18.
constexpr std::size_t half_cache_floats = std::size_t(1) << 20;

// Room for one 16-bit call's float arrays, each start 64-byte aligned.
class half_workspace {
 public:
  static constexpr std::size_t align_floats = 16;
  static std::size_t room(std::size_t n) noexcept { return (n + align_floats - 1) / align_floats * align_floats; }

  explicit half_workspace(std::size_t floats) {
    cache& c = thread_cache();
    if (floats <= half_cache_floats && !c.busy) {
      if (c.capacity < floats) {
        std::size_t cap = std::size_t(1) << 16;
        while (cap < floats) cap *= 2;
        c.buf.reset();
        c.capacity = 0;
        c.buf.reset(aligned_floats(cap));
        c.capacity = cap;
      }
      c.busy = true;
      cache_ = &c;
      base_ = c.buf.get();
    } else {  // a long row, or a call made while the cache is in use
      owned_.reset(aligned_floats(floats));
      base_ = owned_.get();
    }
  }
  ~half_workspace() {
    if (cache_) cache_->busy = false;
  }
  half_workspace(const half_workspace&) = delete;
  half_workspace& operator=(const half_workspace&) = delete;

  float* take(std::size_t n) noexcept {
    float* p = base_ + used_;
    used_ += room(n);
    return p;
  }

 private:
  struct aligned_delete {
    void operator()(float* p) const noexcept { ::operator delete[](p, std::align_val_t(64)); }
  };
  using buffer = std::unique_ptr<float[], aligned_delete>;
  struct cache {
    buffer buf;
    std::size_t capacity = 0;
    bool busy = false;
  };
  static cache& thread_cache() noexcept {
    thread_local cache c;
    return c;
  }
  static float* aligned_floats(std::size_t n) {
    return static_cast<float*>(::operator new[](std::max<std::size_t>(n, 1) * sizeof(float), std::align_val_t(64)));
  }

  cache* cache_ = nullptr;
  buffer owned_;
  float* base_ = nullptr;
  std::size_t used_ = 0;
};

// Widening and narrowing with one ISA's code (the dynamic forms use the
// dispatched smax::dynamic::convert instead: dynamic.hpp).
template <class A>
struct arch_conversion {
  template <class H>
  static void widen(const H* src, float* dst, std::size_t n) noexcept {
    widen_block<A>(src, dst, n);
  }
  template <class H>
  static void narrow(const float* src, H* dst, std::size_t n) noexcept {
    narrow_block<A>(src, dst, n);
  }
};

// Maps one argument of a 16-bit call to the float kernel's: a const H* is
// widened into the workspace, an H* gets a float array narrowed into it
// afterwards, anything else passes as it is. Every array has n elements.
template <class Conv, class H>
class widened_arguments {
 public:
  widened_arguments(half_workspace& ws, std::size_t n) noexcept : ws_(ws), n_(n) {}
  const float* operator()(const H* p) noexcept {
    float* f = ws_.take(n_);
    Conv::widen(p, f, n_);
    return f;
  }
  float* operator()(H* p) noexcept {
    float* f = ws_.take(n_);
    out_f_[outs_] = f;
    out_h_[outs_] = p;
    ++outs_;
    return f;
  }
  template <class U>
  U operator()(U u) noexcept {
    return u;
  }
  void narrow_outputs() noexcept {
    for (int i = 0; i < outs_; ++i) Conv::narrow(out_f_[i], out_h_[i], n_);
  }

 private:
  half_workspace& ws_;
  std::size_t n_;
  float* out_f_[2] = {};
  H* out_h_[2] = {};
  int outs_ = 0;
};

// kernel(float arguments...) on the 16-bit call's arguments; returns what
// the kernel returns. The outputs are written only when the kernel returns.
template <class Conv, class H, class K, class... Args>
decltype(auto) call_widened_whole(std::size_t n, K&& kernel, Args... args) {
  constexpr std::size_t arrays =
      (std::size_t(0) + ... + std::size_t(std::is_same<Args, const H*>::value || std::is_same<Args, H*>::value));
  half_workspace ws(arrays * half_workspace::room(n));
  widened_arguments<Conv, H> w(ws, n);
  using R = decltype(kernel(w(args)...));
  if constexpr (std::is_void<R>::value) {
    kernel(w(args)...);
    w.narrow_outputs();
  } else {
    R r = kernel(w(args)...);
    w.narrow_outputs();
    return r;
  }
}

// The attention options' forms: the mask (when given) widened too, the
// float options passed after the arrays.
template <class Conv, class H, class K, class... Arrays>
void call_widened_options(std::size_t n, const softmax_options<H>& o, K&& kernel, Arrays... arrays) {
  half_workspace ws((sizeof...(Arrays) + (o.mask ? 1 : 0)) * half_workspace::room(n));
  softmax_options<float> fo;
  fo.scale = o.scale;
  fo.softcap = o.softcap;
  fo.mask_scale = o.mask_scale;
  fo.length = o.length;
  fo.sink = o.sink;
  if (o.mask) {
    float* m = ws.take(n);
    Conv::widen(o.mask, m, n);
    fo.mask = m;
  }
  widened_arguments<Conv, H> w(ws, n);
  kernel(w(arrays)..., fo);
  w.narrow_outputs();
}

// topk_softmax on 16-bit x: the selection and the sum read x as 16-bit
// (topk.hpp), no float copy of the row; the k probabilities in float, each
// rounded once: the float kernel's results on the widened x.
template <class A, class H>
void topk_softmax_half(const H* x, std::size_t n, std::size_t k, H* probs, std::uint32_t* index) {
  if (k == 0) return;
  constexpr std::size_t on_stack = 256;  // (k of a sampler's top-k; larger k allocate)
  float stack[on_stack];
  std::vector<float> heap(k > on_stack ? k : 0);
  float* pf = k > on_stack ? heap.data() : stack;
  topk_softmax<A>(x, n, k, pf, index);
  narrow_block<A>(static_cast<const float*>(pf), probs, k);
}

// logsumexp, cross_entropy and cross_entropy_backward on 16-bit x: x read
// as 16-bit by losses.hpp's passes (each vector widened as loaded; dx
// rounded once as written), no float copy of the row: the results of the
// float kernels on the widened x. Rows of 2^20 to 2^21 elements aside: the
// float sum reads 4 MiB and more as two halves, the 16-bit one 8 MiB and
// more, so there its terms are added in another order (about 1e-16 of the
// logsumexp; dx has the same bits given the same lse). What those passes
// leave to the float kernels' other paths (NaN, +-inf, magnitudes beyond
// the single-pass range, an lse beyond split_limit) runs the float kernel
// on the widened row, as the rest of the family does.
template <class A, class Conv, class H>
double logsumexp_half(const H* x, std::size_t n, double* meanx) {
  double lse;
  if (logsumexp_one_read<A>(x, n, meanx, lse)) return lse;
  return call_widened_whole<Conv, H>(
      n, [](const float* xf, std::size_t m) { return logsumexp_max<A>(xf, m); }, x, n);
}
template <class A, class Conv, class H>
double cross_entropy_half(const H* x, std::size_t n, std::size_t target, float ls) {
  check_loss_args<float>("smax::cross_entropy", n, target, ls);
  double meanx = 0;
  const double lse = logsumexp_half<A, Conv>(x, n, ls > 0.0f ? &meanx : nullptr);
  const float xt = to_float(x[target]);
  return cross_entropy_from(&xt, 0, ls, lse, meanx);
}
// saved_lse: the caller's logsumexp of x, or null (then one more read).
template <class A, class Conv, class H>
void cross_entropy_backward_half(const H* x, std::size_t n, std::size_t target, double dloss, H* dx, float ls,
                                 const double* saved_lse) {
  check_loss_args<float>("smax::cross_entropy_backward", n, target, ls);
  const double lse = saved_lse ? *saved_lse : logsumexp_half<A, Conv>(x, n, nullptr);
  if (cross_entropy_backward_from<A>(x, n, target, dloss, dx, ls, lse)) return;
  call_widened_whole<Conv, H>(
      n,
      [=](const float* xf, std::size_t m, float* dxf) { cross_entropy_backward<A>(xf, m, target, dloss, dxf, ls, lse); },
      x, n, dx);
}

// Rows up to this many elements of log_stablemax, ssmax and softpick keep
// the widened form (in this thread's workspace, in cache): one conversion
// of x against two (pass 1 and the write pass each widen x), 2.5-5% faster
// at 4K elements of bf16 (AMD EPYC Zen 5, 2026-12-06); from 16K on the two
// forms measured within the machine's noise, and at 64K the 16-bit passes
// were as fast or faster. Both give the same bits.
constexpr std::size_t half_widened_max = 8192;

// stablemax, log_stablemax and stablemax_backward on 16-bit arrays: the
// float kernels' passes (stablemax.hpp) read x and dy as 16-bit, widening
// each vector as loaded, and the write pass rounds each output once (no
// float copy of the row): the float kernels' results on the widened
// arrays, bit for bit. The rows their fast paths leave (NaN, +inf, sums
// beyond the fast range, log_stablemax's rows that one entry dominates)
// and log_stablemax's short rows (half_widened_max) run the float kernel
// on the widened row, as the rest of the family does.
template <class A, class Conv, class H>
void stablemax_half(const H* x, H* y, std::size_t n) {
  if (n == 0) return;
  float widest = 1.0f;
  const double s = stablemax_fast_sum<A>(x, n, &widest);
  if (s >= 0) {
    // (every quotient is 0 or normal)
    return with_stablemax_quotient<A>(static_cast<float>(1.0 / s), widest, [&](auto q) {
      map_half<A, narrow_input::finite_normal>(x, y, n, q);
    });
  }
  call_widened_whole<Conv, H>(
      n, [](const float* xf, float* yf, std::size_t m) { stablemax<A>(xf, yf, m); }, x, y, n);
}
template <class A, class Conv, class H>
void log_stablemax_half(const H* x, H* y, std::size_t n) {
  using B = xsimd::batch<float, A>;
  if (n == 0) return;
  double lse = 0;
  if (n > half_widened_max && log_stablemax_fast_lse<A>(x, n, lse) == log_stable_sum::in_range) {
    const B l(static_cast<float>(lse));
    // (log1p: the blocked map is faster here, see map_half_blocked)
    return map_half_blocked<A>(x, y, n, [l](B v) { return log_stable_s<A, float>(v) - l; });
  }
  call_widened_whole<Conv, H>(
      n, [](const float* xf, float* yf, std::size_t m) { log_stablemax<A>(xf, yf, m); }, x, y, n);
}
template <class A, class Conv, class H>
void stablemax_backward_half(const H* x, const H* dy, H* dx, std::size_t n) {
  if (n == 0) return;
  double S, mean;
  float hcut;
  const stable_sums sums = stablemax_backward_sums<A>(x, dy, n, S, mean, hcut);
  if (sums == stable_sums::in_range) return map2_half<A>(x, dy, dx, n, stablemax_backward_term<A, float>(S, mean));
  if (sums == stable_sums::checked)
    return map2_half<A>(x, dy, dx, n, stablemax_backward_term<A, float, true>(S, mean, hcut));
  call_widened_whole<Conv, H>(
      n,
      [](const float* xf, const float* dyf, float* dxf, std::size_t m) { stablemax_backward<A>(xf, dyf, dxf, m); },
      x, dy, dx, n);
}

// ssmax on 16-bit x: its two-pass kernel's passes read x as 16-bit, the
// write pass rounds each output (0 or normal) once: the float kernel's
// results on the widened x. Rows pass 1 refuses (NaN, inf, |c x| beyond
// the two-pass range) and short rows (half_widened_max) take the widened
// form. The float checks.
template <class A, class Conv, class H>
void ssmax_half(const H* x, H* y, std::size_t n, float s, float b) {
  if (!check_ssmax<float>(s, b, n)) return;
  const float c = static_cast<float>(ssmax_scale(s, b, n));
  if (n > half_widened_max) {
    const scaled_extexp<A, float> ex(c);
    double sum;
    float emax;
    if (scaled_two_pass_sum<A>(x, n, ex, sum, emax))
      return map_half_weighted<A, narrow_input::finite_normal>(x, y, n, scaled_writer<A, float>(ex, sum, emax));
  }
  call_widened_whole<Conv, H>(
      n, [=](const float* xf, float* yf, std::size_t m) { ssmax<A>(xf, yf, m, s, b); }, x, y, n);
}

// softpick on 16-bit x: pass 1 reads x as 16-bit, the write pass rounds
// each output (0 or normal) once: the float kernel's results on the
// widened x. Rows pass 1 refuses (NaN, +inf, max x beyond the two-pass
// range), degenerate denominators and short rows (half_widened_max) take
// the widened form.
template <class A, class Conv, class H>
void softpick_half(const H* x, H* y, std::size_t n, float eps) {
  check_softpick_eps(eps);
  if (n == 0) return;
  double sum;
  float emax, m;
  if (n > half_widened_max && softpick_pass1<A>(x, n, sum, emax, m) &&
      softpick_write<A, float>(sum, emax, m, eps,
                               [&](auto f) { map_half_weighted<A, narrow_input::finite_normal>(x, y, n, f); }))
    return;
  call_widened_whole<Conv, H>(
      n, [=](const float* xf, float* yf, std::size_t k) { softpick<A>(xf, yf, k, eps); }, x, y, n);
}

// The sparse family on 16-bit arrays: sparse.hpp's passes read x (y and dy
// for the backward passes) as 16-bit, widening each vector as loaded; the
// candidates are kept as floats (on the stack, or in memory allocated as
// they grow: the float kernel keeps them in y) and the output pass rounds
// each output once. The float kernels' results on the widened arrays, bit
// for bit, with no float copy of the row. The rows they leave (NaN or an
// infinite max; for entmax_bisect alpha = 1, and asentmax's c x that
// overflows) take the widened form.
template <class A, class Conv, int P, class H>
void sparse_forward_half(const H* x, H* y, std::size_t n) {
  if (n == 0) return;
  candidate_store<float> store(nullptr, 0);
  float m;
  if (sparse_forward_finite<A, P>(x, n, store, n, m,
                                  [&](auto f) { map_half<A, narrow_input::any>(x, y, n, f); }))
    return;
  call_widened_whole<Conv, H>(
      n, [](const float* xf, float* yf, std::size_t k) { sparse_forward<A, float, P>(xf, yf, k); }, x, y, n);
}
template <class A, class Conv, class H>
void sparsemax_half(const H* x, H* y, std::size_t n) {
  sparse_forward_half<A, Conv, 1>(x, y, n);
}
template <class A, class Conv, class H>
void entmax15_half(const H* x, H* y, std::size_t n) {
  sparse_forward_half<A, Conv, 2>(x, y, n);
}
// (scale: asentmax's c, checked finite; 1 for entmax_bisect)
template <class A, class Conv, class H>
void entmax_bisect_scaled_half(const H* x, H* y, std::size_t n, float alpha, int n_iter, float scale) {
  if (n == 0) return;
  if (alpha != 1.0f && scale > 0.0f) {
    candidate_store<float> store(nullptr, 0);
    float m;
    if (entmax_bisect_finite<A>(x, n, alpha, n_iter, nullptr, scale, store, n, m, [&](auto f) {
          map_half<A, narrow_input::any>(x, y, n, f);
        }) == entmax_rest::done)
      return;
  }
  call_widened_whole<Conv, H>(
      n,
      [=](const float* xf, float* yf, std::size_t k) { entmax_bisect<A, float>(xf, yf, k, alpha, n_iter, nullptr, scale); },
      x, y, n);
}
template <class A, class Conv, class H>
void entmax_bisect_half(const H* x, H* y, std::size_t n, float alpha, int n_iter) {
  check_entmax("smax::entmax_bisect", alpha, n_iter);
  entmax_bisect_scaled_half<A, Conv>(x, y, n, alpha, n_iter, 1.0f);
}
template <class A, class Conv, class H>
void asentmax_half(const H* x, H* y, std::size_t n, float alpha, float s, float b) {
  check_asentmax("smax::asentmax", alpha, s, b, n);
  if (n == 0) return;
  if (alpha == 1.0f) return ssmax_half<A, Conv>(x, y, n, s, b);
  entmax_bisect_scaled_half<A, Conv>(x, y, n, alpha, 50, static_cast<float>(ssmax_scale(s, b, n)));
}
template <class A, class Conv, class H>
void sparsemax_backward_half(const H* y, const H* dy, H* dx, std::size_t n) {
  if (n == 0) return;
  sparsemax_backward_pass<A>(y, dy, n, [&](auto f) { map2_half<A>(y, dy, dx, n, f); });
}
template <class A, class Conv, class H>
void entmax_backward_half(const H* y, const H* dy, H* dx, std::size_t n, float alpha) {
  check_entmax("smax::entmax_backward", alpha);
  if (n == 0) return;
  entmax_backward_pass<A>(y, dy, n, alpha, static_cast<float*>(nullptr), [&](auto f) { map2_half<A>(y, dy, dx, n, f); });
}
// dx = c entmax_backward(y, dy), the product formed before the rounding.
template <class A, class Conv, class H>
void asentmax_backward_half(const H*, const H* y, const H* dy, H* dx, std::size_t n, float alpha, float s, float b) {
  using B = xsimd::batch<float, A>;
  check_asentmax("smax::asentmax_backward", alpha, s, b, n);
  if (n == 0) return;
  const B c(static_cast<float>(ssmax_scale(s, b, n)));
  entmax_backward_pass<A>(y, dy, n, alpha, static_cast<float*>(nullptr), [&](auto f) {
    map2_half<A>(y, dy, dx, n, [=](B yv, B d) { return mul_normal<A, float>(f(yv, d), c); });
  });
}

// gumbel_noise on 16-bit g: the float kernel's noise a block at a time in
// L1 (element i's noise depends on offset + i alone), each value rounded
// once: the float kernel's noise, rounded, with no float copy of the row.
// (Conv: the shape of the other name##_half forms; unused.)
template <class A, class Conv, class H>
void gumbel_noise_half(H* g, std::size_t n, std::uint64_t seed, std::uint64_t offset) noexcept {
  // Pieces end where offset + i is a multiple of the block (a multiple of
  // gumbel_block's size, and a divisor of 2^64): each noise block is then
  // computed once, as in the whole call (pieces from i would cut one more
  // block each where the offset is not a multiple: 5-10% slower).
  constexpr std::size_t block = 2048;
  alignas(64) float f[block];
  for (std::size_t i = 0; i < n;) {
    const std::size_t len = std::min(block - static_cast<std::size_t>((offset + i) % block), n - i);
    gumbel_noise<A, float>(f, len, seed, offset + i);
    narrow_block<A>(static_cast<const float*>(f), g + i, len);
    i += len;
  }
}
// gumbel_softmax on 16-bit logits: hard reads them as 16-bit (the float
// kernel's one-hot); the soft form keeps z = logits + g in float between
// its passes, which a 16-bit y cannot hold, and takes the widened form.
template <class A, class Conv, class H>
void gumbel_softmax_half(const H* x, H* y, std::size_t n, float tau, std::uint64_t seed, bool hard) {
  check_gumbel_tau(tau);
  if (n == 0) return;
  if (hard) return gumbel_hard<A>(x, y, n, seed);
  call_widened_whole<Conv, H>(
      n, [=](const float* xf, float* yf, std::size_t k) { gumbel_softmax<A, float>(xf, yf, k, tau, seed, false); }, x,
      y, n);
}

// softpick_backward on 16-bit arrays, where the dot product is the float
// kernel's own (x86: dot_normal_half): pass 1 and the output pass read x
// and dy as 16-bit, each dx is rounded once, and the first argmax's
// correction is applied to its float value before that rounding: the
// float kernel's results bit for bit. NEON, the rows pass 1 refuses (NaN,
// +inf, a max beyond the two-pass range), degenerate denominators and
// short rows (half_widened_max: x and dy are each widened twice here, once
// there; at 4K fp16 on AVX2 the widened form was 3-4% faster, bf16 on
// AVX-512 the same) take the widened form.
template <class A, class Conv, class H>
void softpick_backward_half(const H* x, const H* y, const H* dy, H* dx, std::size_t n, float eps) {
  check_softpick_eps(eps);
  if (n == 0) return;
  if constexpr (dot_in_double_v<A, float>) {
    using B = xsimd::batch<float, A>;
    double sum;
    float emax, m;
    if (n > half_widened_max && softpick_pass1<A>(x, n, sum, emax, m)) {
      const double dot = dot_normal_half<A>(y, dy, n);
      if (softpick_backward_two_pass_with<A>(x, n, eps, dot, sum, emax, m, [&](auto f, std::size_t k, double term) {
            // (dx may alias x or dy: the argmax's float dx first)
            float dk = 0;
            if (k < n) {
              alignas(64) float lanes[B::size];
              f(B(to_float(x[k])), B(to_float(dy[k]))).store_aligned(lanes);
              dk = lanes[0];
            }
            map2_half<A>(x, dy, dx, n, f);
            if (k < n) dx[k] = H(static_cast<float>(static_cast<double>(dk) - term));
          }))
        return;
    }
  }
  call_widened_whole<Conv, H>(
      n,
      [=](const float* xf, const float* yf, const float* dyf, float* dxf, std::size_t k) {
        softpick_backward<A, float>(xf, yf, dyf, dxf, k, eps);
      },
      x, y, dy, dx, n);
}

// sigmoid_attention and its backward on 16-bit arrays: the float kernels'
// element maps, each output rounded once, no float copy: the float
// kernels' results, bit for bit. Blocks widened into L1 where the outputs
// are not streamed (the maps' exp and division in the 4-vector interleave
// of map_half cost more: docs/half.md), streamed from 16 MiB.
template <class A, class Conv, class H>
void sigmoid_attention_half(const H* x, H* y, std::size_t n, float b) {
  if (!is_finite(b)) throw std::invalid_argument("smax::sigmoid_attention: b must be finite");
  map_half_weighted<A, narrow_input::any>(x, y, n, sigmoid_attention_map<A, float>(b));
}
template <class A, class Conv, class H>
void sigmoid_attention_backward_half(const H* x, const H*, const H* dy, H* dx, std::size_t n, float b) {
  if (!is_finite(b)) throw std::invalid_argument("smax::sigmoid_attention_backward: b must be finite");
  const auto f = sigmoid_attention_backward_map<A, float>(b);
  if (has_stream_v<A> && n * sizeof(H) >= stream_min_bytes) return map2_half<A>(x, dy, dx, n, f);
  map2_half_blocked<A>(x, dy, dx, n, f);
}

// multimax and sa_softmax on 16-bit x: the rows their float kernels take in
// two passes (automatic_takes_two_pass: out of cache) run those passes on x
// read as 16-bit (two_pass_sum with the modulator, or the min / max
// tracker, as its pre), and the write pass rounds each output (0 or
// normal) once: the float kernels' results on the widened x, bit for bit,
// with no float copy of the row. In cache both run their float kernels'
// three-pass reload on x read as 16-bit: the terms (multimax: sigma(x) and
// its max first) into a float buffer (on the stack up to half_block, else
// this thread's row_buffer up to half_whole_row), the sum there, the
// scaling pass rounding into y. Longer in-cache rows and the rows the
// passes refuse (NaN, +-inf, sums beyond their range) take the widened
// form.
template <class A, class Conv, class H>
void multimax_half(const H* x, H* y, std::size_t n, const multimax_params& p) {
  using B = xsimd::batch<float, A>;
  check_multimax("smax::multimax", p);
  if (n == 0) return;
  const multimax_modulator<A, float> sig(p);
  if (!automatic_takes_two_pass<A, float>(n)) {
    alignas(64) float stack[half_block];
    if (float* terms = n <= half_block ? stack : row_buffer(n)) {
      const float m = transform_max<A, float, false>(x, static_cast<const H*>(nullptr), terms, n,
                                                     [&](B v, B) SMAX_LAMBDA_INLINE { return sig(v); });
      const auto finish = [&](double s, auto&&) {
        if (!(s == s)) return fill(y, n, from_float<H>(std::numeric_limits<float>::quiet_NaN()));
        map_half<A, narrow_input::finite_normal>(static_cast<const float*>(terms), y, n,
                                                scale_normal<A, float>(static_cast<float>(1.0 / s)));
      };
      if (three_pass_sum_from<A>(m, static_cast<const float*>(terms), terms, n, finish)) return;
    }
  } else {
    double s;
    float Emax;
    if (two_pass_sum<A>(x, n, s, Emax, sig)) {
      const exp_ref<A, float> ex(-single_pass_limits<float>::limit, Emax, static_cast<float>(1.0 / s));
      return map_half<A, narrow_input::finite_normal>(x, y, n, [=](B v) { return ex(sig(v)); });
    }
  }
  call_widened_whole<Conv, H>(
      n, [&](const float* xf, float* yf, std::size_t k) { multimax<A, float>(xf, yf, k, p); }, x, y, n);
}
template <class A, class Conv, class H>
void sa_softmax_half(const H* x, H* y, std::size_t n, bool normalized) {
  const auto widened = [&] {
    call_widened_whole<Conv, H>(
        n, [=](const float* xf, float* yf, std::size_t k) { sa_softmax<A, float>(xf, yf, k, normalized); }, x, y, n);
  };
  if (n == 0) return;
  if (!automatic_takes_two_pass<A, float>(n)) {
    alignas(64) float stack[half_block];
    float* terms = n <= half_block ? stack : row_buffer(n);
    if (!terms) return widened();
    if (sa_softmax_reload_sum<A>(x, terms, n, normalized, [&](bool sum_is_number, float factor) {
          if (!sum_is_number) return fill(y, n, from_float<H>(std::numeric_limits<float>::quiet_NaN()));
          map_half<A, narrow_input::finite_normal>(static_cast<const float*>(terms), y, n,
                                                  mul_normal_by<A, float>(factor));
        }))
      return;
  }
  // (the float kernel's two passes: out of cache, and the rows its reload
  // declines)
  double s;
  float Emax, lo, hi;
  if (sa_two_pass_sum<A>(x, n, normalized, s, Emax, lo, hi))
    return sa_softmax_two_pass_write<A>(normalized, s, Emax, lo, hi, [&](auto f) {
      map_half<A, narrow_input::finite_normal>(x, y, n, f);
    });
  widened();
}

// out[i] = f(a[i], b[i], c[i]) on 16-bit arrays widened as loaded, each
// output rounded once; vectors of W from the start and a zero-padded tail,
// as map3 groups the float lanes (f may decide per vector). out may be any
// of the inputs.
template <class A, class H, class F>
SMAX_FLATTEN void map3_half(const H* a, const H* b, const H* c, H* out, std::size_t n, F&& f) noexcept {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  for (; i + W <= n; i += W) narrow<A>(out + i, f(widen<A>(a + i), widen<A>(b + i), widen<A>(c + i)));
  if (i == n) return;
  alignas(64) float fa[W] = {}, fb[W] = {}, fc[W] = {}, fo[W];
  for (std::size_t k = 0; k < n - i; ++k) fa[k] = to_float(a[i + k]), fb[k] = to_float(b[i + k]), fc[k] = to_float(c[i + k]);
  f(B::load_aligned(fa), B::load_aligned(fb), B::load_aligned(fc)).store_aligned(fo);
  for (std::size_t k = 0; k < n - i; ++k) out[i + k] = H(fo[k]);
}

// multimax_backward on 16-bit arrays (x86): the float kernel's dot product
// of the widened y and dy (dot_normal_half), then dx = sigma'(x) (y dy -
// y D) on vectors widened as loaded, each dx rounded once: the float
// kernel's results bit for bit, no float copy of the rows. NEON and short
// rows (half_widened_max) take the widened form.
template <class A, class Conv, class H>
void multimax_backward_half(const H* x, const H* y, const H* dy, H* dx, std::size_t n, const multimax_params& p) {
  check_multimax("smax::multimax_backward", p);
  if (n == 0) return;
  if constexpr (dot_in_double_v<A, float>) {
    if (n > half_widened_max) {
      using B = xsimd::batch<float, A>;
      const multimax_modulator<A, float> sig(p);
      return with_backward_term<A, float>(finite_mean<float>(dot_normal_half<A>(y, dy, n)), [&](const auto& term) {
        map3_half<A>(x, y, dy, dx, n,
                     [=](B v, B yv, B d) { return mul_normal<A, float>(sig.slope(v), term(yv, d)); });
      });
    }
  }
  call_widened_whole<Conv, H>(
      n,
      [&](const float* xf, const float* yf, const float* dyf, float* dxf, std::size_t k) {
        multimax_backward<A, float>(xf, yf, dyf, dxf, k, p);
      },
      x, y, dy, dx, n);
}

// sa_softmax_backward on 16-bit arrays (x86, rows beyond half_whole_row):
// the float kernel's passes on x, y and dy read as 16-bit (its two-pass
// sum, the dot product as dot_normal_half, the first minimum and maximum,
// the gradient pass; normalized, P from that pass's loads), each dx
// rounded once; normalized, the end entries' corrections are applied to
// their float dx before that rounding: the float kernel's results bit for
// bit, no float copy of the rows. false (nothing written) for the rows its
// passes refuse (NaN, +-inf, sums beyond their range) and the exact end
// sums (a range below 1): those, NEON and rows in this thread's workspace
// take the widened form. (In cache the widened form, which converts each
// array once where the passes widen x four times, was as fast or faster:
// bf16 on AVX-512 1.0-1.2x at 12K-128K, on AVX2 1.0-1.3x up to 256K;
// beyond the workspace it allocates, 44 ns per element at 4M against
// 0.7-1.1: docs/half.md.)
template <class A, class H>
bool sa_softmax_backward_read_half(const H* x, const H* y, const H* dy, H* dx, std::size_t n, bool normalized) {
  using B = xsimd::batch<float, A>;
  double s;
  float Emax, lo, hi;
  if (!sa_two_pass_sum<A>(x, n, normalized, s, Emax, lo, hi)) return false;
  const double D = dot_normal_half<A>(y, dy, n);
  if (!(D == D)) return false;
  const sa_factor<A, float> g(normalized, lo, hi);
  std::size_t imin = n, imax = n;
  if (normalized && g.is_finite_range()) {
    if (lo < 0.0f) imin = first_index_of<A>(x, n, lo);
    if (hi > 0.0f) imax = first_index_of<A>(x, n, hi);
  }
  if ((imin < n || imax < n) && g.slope() > 1.0f) return false;
  const exp_ref<A, float> term(-single_pass_limits<float>::limit, Emax, static_cast<float>(1.0 / s));
  with_sa_gradient<A, float>(normalized, g, D, term, [&](const auto& gradient) {
    if (!normalized) return map2_half<A>(x, dy, dx, n, gradient);
    // The ends' float dx, before the pass (dx may alias x or dy).
    const auto float_dx = [&](std::size_t k) {
      alignas(64) float lanes[B::size];
      gradient(B(to_float(x[k])), B(to_float(dy[k]))).store_aligned(lanes);
      return lanes[0];
    };
    const float dmin = imin < n ? float_dx(imin) : 0.0f, dmax = imax < n ? float_dx(imax) : 0.0f;
    const double P = sum_of_pairs_normal<A>(x, dy, n, [&](B v, B d) { return mul_normal<A, float>(d, term(v)); },
                                            write_pairs(dx, gradient));
    const double R = g.slope() > 0.0f ? 1.0 / static_cast<double>(g.slope()) : 0.0;
    if (imin < n && g.slope() > 0.0f) dx[imin] = H(to_normal<float>(dmin + (D - P) / R));
    if (imax < n && g.slope() > 0.0f) dx[imax] = H(to_normal<float>(dmax - D / R));
  });
  return true;
}
template <class A, class Conv, class H>
void sa_softmax_backward_half(const H* x, const H* y, const H* dy, H* dx, std::size_t n, bool normalized) {
  if (n == 0) return;
  if constexpr (dot_in_double_v<A, float>) {
    if (n > half_whole_row && sa_softmax_backward_read_half<A>(x, y, dy, dx, n, normalized)) return;
  }
  call_widened_whole<Conv, H>(
      n,
      [=](const float* xf, const float* yf, const float* dyf, float* dxf, std::size_t k) {
        sa_softmax_backward<A, float>(xf, yf, dyf, dxf, k, normalized);
      },
      x, y, dy, dx, n);
}

// The batched 16-bit forms: f(r) for every row on the executor. The
// arguments are checked before; the one exception a row can still raise
// (std::bad_alloc for a long row's workspace) is caught in its task and
// rethrown here once every task has ended.
template <class F>
void for_each_half_row(std::size_t rows, std::size_t cols, executor* ex, F&& f) {
  std::exception_ptr failure;
  std::mutex m;
  for_each_row_index(rows, cols, default_executor(ex), [&](std::size_t r) {
    try {
      f(r);
    } catch (...) {
      std::lock_guard<std::mutex> lock(m);
      if (!failure) failure = std::current_exception();
    }
  });
  if (failure) std::rethrow_exception(failure);
}

// The row loops of the batched 16-bit forms that are not one of the
// SMAX_HALF_BATCHED_* shapes, shared by the arch forms (smax.hpp) and the
// dynamic ones (dynamic.hpp): the float forms' checks, then the single-row
// 16-bit call the caller passes for every row.
template <class H, class F>
void half_topk_rows(const matrix_view<const H>& x, std::size_t k, const matrix_view<H>& probs,
                    const matrix_view<std::uint32_t>& index, executor* ex, F&& topk_of_row) {
  check_topk_views(x, k, probs, index);
  if (k == 0) return;
  for_each_half_row(x.rows, x.cols, ex,
                    [&](std::size_t r) { topk_of_row(x.row(r), x.cols, k, probs.row(r), index.row(r)); });
}
template <class H, class F>
void half_sample_rows(const matrix_view<const H>& logits, std::size_t* out, const sampling& s, std::uint64_t seed,
                      std::uint64_t offset, executor* ex, F&& sample_of_row) {
  if (!check_sample_rows(logits, out, s)) return;
  for_each_half_row(logits.rows, logits.cols, ex, [&](std::size_t r) {
    out[r] = sample_of_row(logits.row(r), logits.cols, s, gumbel_row_seed(seed, r), offset);
  });
}
template <class H, class F>
void half_logsumexp_rows(const matrix_view<const H>& x, double* out, executor* ex, F&& lse_of_row) {
  check_view("smax::logsumexp", x, "x");
  if (x.rows && !out) throw std::invalid_argument("smax::logsumexp: out must not be null");
  for_each_half_row(x.rows, x.cols, ex, [&](std::size_t r) { out[r] = lse_of_row(x.row(r), x.cols); });
  if (x.cols == 0)
    for (std::size_t r = 0; r < x.rows; ++r) out[r] = -std::numeric_limits<double>::infinity();
}
// softmax / log_softmax over attention rows: row r with row_options(o, r).
template <class H, class F>
void half_attention_rows(const char* fn, const matrix_view<const H>& x, const matrix_view<H>& y,
                         const attention_options<H>& o, executor* ex, F&& softmax_of_row) {
  check_shapes(fn, x, y);
  check_attention(fn, x, o);
  for_each_half_row(x.rows, x.cols, ex, [&](std::size_t r) {
    softmax_of_row(x.row(r), y.row(r), x.cols, row_options(o, x.rows, r));
  });
}
// softmax_backward over attention rows: row r with backward_row_options(o, r).
template <class H, class F>
void half_attention_backward_rows(const matrix_view<const H>& x, const matrix_view<const H>& y,
                                  const matrix_view<const H>& dy, const matrix_view<H>& dx,
                                  const attention_options<H>& o, executor* ex, F&& backward_of_row) {
  check_shapes4("smax::softmax_backward", {"x", "y", "dy", "dx"}, x, y, dy, dx);
  check_attention("smax::softmax_backward", x, o);
  for_each_half_row(dx.rows, dx.cols, ex, [&](std::size_t r) {
    backward_of_row(x.row(r), y.row(r), dy.row(r), dx.row(r), dx.cols, backward_row_options(o, dx.rows, r));
  });
}
// cross_entropy: each row's logsumexp and loss the single-row 16-bit calls,
// the reduction as for float.
template <class H, class Lse, class Loss>
double half_cross_entropy_rows(const matrix_view<const H>& x, const std::int64_t* targets, const loss_options& o,
                               double* row_loss, double* row_lse, executor* ex, Lse&& lse_of_row,
                               Loss&& loss_of_row) {
  check_view("smax::cross_entropy", x, "x");
  check_targets<float>("smax::cross_entropy", x.rows, x.cols, targets, o);
  if (o.reduce == reduction::none && x.rows && !row_loss)
    throw std::invalid_argument("smax::cross_entropy: reduction::none needs row_loss");
  std::vector<double> own;
  if (!row_loss) {
    own.resize(x.rows);
    row_loss = own.data();
  }
  if (x.cols == 0)  // every row ignored (checked: no target fits)
    for (std::size_t r = 0; r < x.rows; ++r) row_loss[r] = 0;
  for_each_half_row(x.rows, x.cols, ex, [&](std::size_t r) {
    const std::int64_t t = targets[r];
    if (row_lse) row_lse[r] = lse_of_row(x.row(r), x.cols);
    // (without smoothing the loss is lse - x[t], cross_entropy_from's: no
    // second read of the row)
    if (t == o.ignore_index)
      row_loss[r] = 0.0;
    else if (row_lse && o.label_smoothing == 0.0f)
      row_loss[r] = row_lse[r] - static_cast<double>(to_float(x.row(r)[t]));
    else
      row_loss[r] = loss_of_row(x.row(r), x.cols, static_cast<std::size_t>(t), o.label_smoothing);
  });
  return reduce_losses(row_loss, targets, x.rows, o);
}
// backward_of_row(row, n, target, g, dx_row, label_smoothing, lse or null).
template <class H, class F>
void half_cross_entropy_backward_rows(const matrix_view<const H>& x, const std::int64_t* targets, double dloss,
                                      const matrix_view<H>& dx, const loss_options& o, const double* row_dloss,
                                      const double* lse, executor* ex, F&& backward_of_row) {
  check_shapes("smax::cross_entropy_backward", x, dx, "x", "dx");
  check_targets<float>("smax::cross_entropy_backward", x.rows, x.cols, targets, o);
  if (o.reduce == reduction::none && x.rows && !row_dloss)
    throw std::invalid_argument("smax::cross_entropy_backward: reduction::none needs row_dloss");
  const double scale = loss_gradient_scale(targets, x.rows, dloss, o);
  for_each_half_row(x.rows, x.cols, ex, [&](std::size_t r) {
    const std::int64_t t = targets[r];
    H* dr = dx.row(r);
    if (t == o.ignore_index) return fill(dr, x.cols, H(0.0f));
    const double g = o.reduce == reduction::none ? row_dloss[r] : scale;
    backward_of_row(x.row(r), x.cols, static_cast<std::size_t>(t), g, dr, o.label_smoothing, lse ? lse + r : nullptr);
  });
}

}  // namespace detail

// ------------------------------------------------- 16-bit forms (the lists) --
// Batched 16-bit forms, X(H, name, matrix parameters, scalar parameters,
// scalar arguments, check): rows of the single-row form; the check (the
// float form's own, on an empty row) runs once before any row.
#define SMAX_HALF_PARENS(...) __VA_ARGS__
#define SMAX_HALF_BATCHED_XY(H, X)                                                                                \
  X(H, stablemax, (), ())                                                                                         \
  X(H, log_stablemax, (), ())                                                                                     \
  X(H, softpick, (, float eps = 1e-8f), (, eps))                                                                  \
  X(H, ssmax, (, float s, float b = 0), (, s, b))                                                                 \
  X(H, sparsemax, (), ())                                                                                         \
  X(H, entmax15, (), ())                                                                                          \
  X(H, entmax_bisect, (, float alpha, int n_iter = 50), (, alpha, n_iter))                                        \
  X(H, sigmoid_attention, (, float b), (, b))                                                                     \
  X(H, sa_softmax, (, bool normalized = false), (, normalized))                                                   \
  X(H, multimax, (, const multimax_params& p), (, p))                                                             \
  X(H, asentmax, (, float alpha, float s, float b = 0), (, alpha, s, b))
#define SMAX_HALF_BATCHED_YDYDX(H, X)                                                                             \
  X(H, sparsemax_backward, y, (), ())                                                                             \
  X(H, entmax_backward, y, (, float alpha), (, alpha))                                                            \
  X(H, stablemax_backward, x, (), ())
#define SMAX_HALF_BATCHED_XYDYDX(H, X)                                                                            \
  X(H, softpick_backward, (, float eps = 1e-8f), (, eps))                                                         \
  X(H, sigmoid_attention_backward, (, float b), (, b))                                                            \
  X(H, sa_softmax_backward, (, bool normalized = false), (, normalized))                                          \
  X(H, multimax_backward, (, const multimax_params& p), (, p))                                                    \
  X(H, asentmax_backward, (, float alpha, float s, float b = 0), (, alpha, s, b))

}  // namespace smax
