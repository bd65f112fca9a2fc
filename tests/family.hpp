// One call of every function of the dispatch registry
// (include/smax/detail/dispatch.hpp), for the tests that run the whole
// family under one condition: test_hostile (flush-to-zero modes, many
// threads, n = 0) and test_subnormal (wide logits, FTZ/DAZ). The table is
// generated from the registry's X-macro lists: a registered function
// without its family_calls_NAME below does not compile.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <smax/dynamic.hpp>

#include "common.hpp"
#include "registry.hpp"

namespace smax_test {

// out[0, n) = f(x, dy): dy only where the function takes a second input; a
// backward pass first computes its own forward output from x; a function
// with a scalar or index result writes it to out[0] (and on), the rest 0.
template <class T>
struct family_call {
  std::string name;  // the public name, a variant after '/' or '('
  // A function of SMAX_FUNCTIONS: writes exactly n outputs and accepts
  // n = 0 with null pointers (the typed ones need a valid row or target).
  bool kernel;
  std::function<void(const T* x, const T* dy, T* out, std::size_t n)> run;
};

template <class T>
using family = std::vector<family_call<T>>;

namespace family_detail {

namespace d = smax::dynamic;

// The type of the functions' scalar parameters: T, or float for the 16-bit
// types (every_function<bf16> runs the 16-bit forms).
template <class T>
using S = typename smax::detail::option_scalar<T>::type;

template <class T>
using run_fn = std::function<void(const T*, const T*, T*, std::size_t)>;

template <class T>
void add_kernel(family<T>& f, std::string name, run_fn<T> run) {
  f.push_back({std::move(name), true, std::move(run)});
}
template <class T>
void add_typed(family<T>& f, std::string name, run_fn<T> run) {
  f.push_back({std::move(name), false, std::move(run)});
}

// The batched forms run over x as 4 rows of n / 4.
template <class T>
smax::matrix_view<const T> rows_of(const T* x, std::size_t n) {
  return smax::matrix_view<const T>(x, 4, n / 4);
}
template <class T>
smax::matrix_view<T> rows_of(T* x, std::size_t n) {
  return smax::matrix_view<T>(x, 4, n / 4);
}

// A forward output y = forward(x), then out = backward(x, y, dy).
template <class T, class Forward, class Backward>
run_fn<T> after_forward(Forward forward, Backward backward) {
  return [forward, backward](const T* x, const T* dy, T* out, std::size_t n) {
    std::vector<T> y(n);
    forward(x, y.data(), n);
    backward(x, y.data(), dy, out, n);
  };
}

// softmax_options with every option active that a single row takes.
// (A scale below 1 forms x scale below the normal range for x within
// FLT_MIN / scale of 0, as docs/guarantees.md states: the "unit scale"
// forms are the ones test_subnormal runs on such logits.)
template <class T>
smax::softmax_options<T> some_options(std::size_t n, S<T> scale = S<T>(0.7)) {
  smax::softmax_options<T> so;
  so.scale = scale;
  so.softcap = S<T>(60);
  so.length = n > 3 ? n - 3 : n;
  so.sink = S<T>(1.5);
  return so;
}

// SMAX_FUNCTIONS
template <class T>
void family_calls_softmax(family<T>& f) {
  for (smax::algorithm a : algorithms())
    add_kernel<T>(f, std::string("softmax/") + algorithm_name(a),
                  [a](const T* x, const T*, T* y, std::size_t n) { d::softmax(x, y, n, a); });
}
template <class T>
void family_calls_log_softmax(family<T>& f) {
  add_kernel<T>(f, "log_softmax", [](const T* x, const T*, T* y, std::size_t n) { d::log_softmax(x, y, n); });
  // The batched forms' own paths (rows, blocks of long rows): test_batched
  // compares every batched form with its single-row calls.
  add_typed<T>(f, "softmax (batched)", [](const T* x, const T*, T* y, std::size_t n) {
    std::fill(y, y + n, T(0));
    d::softmax(rows_of(x, n), rows_of(y, n));
  });
  add_typed<T>(f, "log_softmax (batched)", [](const T* x, const T*, T* y, std::size_t n) {
    std::fill(y, y + n, T(0));
    d::log_softmax(rows_of(x, n), rows_of(y, n));
  });
}
template <class T>
void family_calls_stablemax(family<T>& f) {
  add_kernel<T>(f, "stablemax", [](const T* x, const T*, T* y, std::size_t n) { d::stablemax(x, y, n); });
}
template <class T>
void family_calls_log_stablemax(family<T>& f) {
  add_kernel<T>(f, "log_stablemax", [](const T* x, const T*, T* y, std::size_t n) { d::log_stablemax(x, y, n); });
}
template <class T>
void family_calls_softpick(family<T>& f) {
  add_kernel<T>(f, "softpick", [](const T* x, const T*, T* y, std::size_t n) { d::softpick(x, y, n); });
}
template <class T>
void family_calls_ssmax(family<T>& f) {
  add_kernel<T>(f, "ssmax(0.3)", [](const T* x, const T*, T* y, std::size_t n) { d::ssmax(x, y, n, S<T>(0.3)); });
  add_kernel<T>(f, "ssmax(0.43, 0.1)",
                [](const T* x, const T*, T* y, std::size_t n) { d::ssmax(x, y, n, S<T>(0.43), S<T>(0.1)); });
}
template <class T>
void family_calls_gumbel_noise(family<T>& f) {
  add_kernel<T>(f, "gumbel_noise", [](const T*, const T*, T* y, std::size_t n) { d::gumbel_noise(y, n, 42, 7); });
}
template <class T>
void family_calls_gumbel_softmax(family<T>& f) {
  add_kernel<T>(f, "gumbel_softmax",
                [](const T* x, const T*, T* y, std::size_t n) { d::gumbel_softmax(x, y, n, S<T>(0.5), 11); });
  add_kernel<T>(f, "gumbel_softmax/hard",
                [](const T* x, const T*, T* y, std::size_t n) { d::gumbel_softmax(x, y, n, S<T>(0.7), 42, true); });
}
template <class T>
void family_calls_stablemax_backward(family<T>& f) {
  add_kernel<T>(f, "stablemax_backward",
                [](const T* x, const T* dy, T* dx, std::size_t n) { d::stablemax_backward(x, dy, dx, n); });
}
template <class T>
void family_calls_softpick_backward(family<T>& f) {
  add_kernel<T>(f, "softpick_backward",
                after_forward<T>([](const T* x, T* y, std::size_t n) { d::softpick(x, y, n); },
                                 [](const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
                                   d::softpick_backward(x, y, dy, dx, n);
                                 }));
}
template <class T>
void family_calls_sparsemax(family<T>& f) {
  add_kernel<T>(f, "sparsemax", [](const T* x, const T*, T* y, std::size_t n) { d::sparsemax(x, y, n); });
}
template <class T>
void family_calls_entmax15(family<T>& f) {
  add_kernel<T>(f, "entmax15", [](const T* x, const T*, T* y, std::size_t n) { d::entmax15(x, y, n); });
}
template <class T>
void family_calls_entmax_bisect(family<T>& f) {
  add_kernel<T>(f, "entmax_bisect(1.25)",
                [](const T* x, const T*, T* y, std::size_t n) { d::entmax_bisect(x, y, n, S<T>(1.25)); });
}
template <class T>
void family_calls_sparsemax_backward(family<T>& f) {
  add_kernel<T>(f, "sparsemax_backward",
                after_forward<T>([](const T* x, T* y, std::size_t n) { d::sparsemax(x, y, n); },
                                 [](const T*, const T* y, const T* dy, T* dx, std::size_t n) {
                                   d::sparsemax_backward(y, dy, dx, n);
                                 }));
}
template <class T>
void family_calls_entmax_backward(family<T>& f) {
  add_kernel<T>(f, "entmax_backward(1.5)",
                after_forward<T>([](const T* x, T* y, std::size_t n) { d::entmax15(x, y, n); },
                                 [](const T*, const T* y, const T* dy, T* dx, std::size_t n) {
                                   d::entmax_backward(y, dy, dx, n, S<T>(1.5));
                                 }));
  add_kernel<T>(f, "entmax_backward(1.25)",
                after_forward<T>([](const T* x, T* y, std::size_t n) { d::entmax_bisect(x, y, n, S<T>(1.25)); },
                                 [](const T*, const T* y, const T* dy, T* dx, std::size_t n) {
                                   d::entmax_backward(y, dy, dx, n, S<T>(1.25));
                                 }));
}
template <class T>
void family_calls_softmax_backward(family<T>& f) {
  add_kernel<T>(f, "softmax_backward",
                after_forward<T>([](const T* x, T* y, std::size_t n) { d::softmax(x, y, n); },
                                 [](const T*, const T* y, const T* dy, T* dx, std::size_t n) {
                                   d::softmax_backward(y, dy, dx, n);
                                 }));
}
template <class T>
void family_calls_log_softmax_backward(family<T>& f) {
  add_kernel<T>(f, "log_softmax_backward",
                after_forward<T>([](const T* x, T* y, std::size_t n) { d::log_softmax(x, y, n); },
                                 [](const T*, const T* y, const T* dy, T* dx, std::size_t n) {
                                   d::log_softmax_backward(y, dy, dx, n);
                                 }));
}
template <class T>
void family_calls_topk_softmax(family<T>& f) {
  // probabilities in out[0, k), the indices (as T) in out[k, 2k).
  add_kernel<T>(f, "topk_softmax", [](const T* x, const T*, T* out, std::size_t n) {
    const std::size_t k = std::min<std::size_t>(64, n / 2);
    std::vector<std::uint32_t> index(k);
    std::fill(out, out + n, T(0));
    d::topk_softmax(x, n, k, out, index.data());
    for (std::size_t i = 0; i < k; ++i) out[k + i] = static_cast<T>(index[i]);
  });
}
template <class T>
void family_calls_sigmoid_attention(family<T>& f) {
  for (S<T> b : {S<T>(-2), S<T>(-8)})
    add_kernel<T>(f, "sigmoid_attention(" + std::to_string(static_cast<int>(b)) + ")",
                  [b](const T* x, const T*, T* y, std::size_t n) { d::sigmoid_attention(x, y, n, b); });
}
template <class T>
void family_calls_sa_softmax(family<T>& f) {
  add_kernel<T>(f, "sa_softmax", [](const T* x, const T*, T* y, std::size_t n) { d::sa_softmax(x, y, n, false); });
  add_kernel<T>(f, "sa_softmax/normalized",
                [](const T* x, const T*, T* y, std::size_t n) { d::sa_softmax(x, y, n, true); });
}
template <class T>
void family_calls_multimax(family<T>& f) {
  add_kernel<T>(f, "multimax",
                [](const T* x, const T*, T* y, std::size_t n) { d::multimax(x, y, n, some_multimax_params()); });
}
template <class T>
void family_calls_asentmax(family<T>& f) {
  add_kernel<T>(f, "asentmax(1.5)",
                [](const T* x, const T*, T* y, std::size_t n) { d::asentmax(x, y, n, S<T>(1.5), S<T>(0.5), S<T>(1)); });
}
template <class T>
void family_calls_sigmoid_attention_backward(family<T>& f) {
  for (S<T> b : {S<T>(-2), S<T>(-8)})
    add_kernel<T>(f, "sigmoid_attention_backward(" + std::to_string(static_cast<int>(b)) + ")",
                  after_forward<T>([b](const T* x, T* y, std::size_t n) { d::sigmoid_attention(x, y, n, b); },
                                   [b](const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
                                     d::sigmoid_attention_backward(x, y, dy, dx, n, b);
                                   }));
}
template <class T>
void family_calls_sa_softmax_backward(family<T>& f) {
  for (bool norm : {false, true})
    add_kernel<T>(f, norm ? "sa_softmax_backward/normalized" : "sa_softmax_backward",
                  after_forward<T>([norm](const T* x, T* y, std::size_t n) { d::sa_softmax(x, y, n, norm); },
                                   [norm](const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
                                     d::sa_softmax_backward(x, y, dy, dx, n, norm);
                                   }));
}
template <class T>
void family_calls_multimax_backward(family<T>& f) {
  add_kernel<T>(f, "multimax_backward",
                after_forward<T>([](const T* x, T* y, std::size_t n) { d::multimax(x, y, n, some_multimax_params()); },
                                 [](const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
                                   d::multimax_backward(x, y, dy, dx, n, some_multimax_params());
                                 }));
}
template <class T>
void family_calls_asentmax_backward(family<T>& f) {
  add_kernel<T>(f, "asentmax_backward(1.5)",
                after_forward<T>([](const T* x, T* y, std::size_t n) { d::asentmax(x, y, n, S<T>(1.5), S<T>(0.5), S<T>(1)); },
                                 [](const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
                                   d::asentmax_backward(x, y, dy, dx, n, S<T>(1.5), S<T>(0.5), S<T>(1));
                                 }));
}

// SMAX_TYPED_FUNCTIONS (by their table field)
template <class T>
void family_calls_logsumexp(family<T>& f) {
  add_typed<T>(f, "logsumexp", [](const T* x, const T*, T* out, std::size_t n) {
    std::fill(out, out + n, T(0));
    out[0] = static_cast<T>(d::logsumexp(x, n));
  });
}
template <class T>
void family_calls_cross_entropy(family<T>& f) {
  add_typed<T>(f, "cross_entropy", [](const T* x, const T*, T* out, std::size_t n) {
    std::fill(out, out + n, T(0));
    out[0] = static_cast<T>(d::cross_entropy(x, n, n / 3, 0.1f));
  });
}
template <class T>
void family_calls_cross_entropy_backward(family<T>& f) {
  add_typed<T>(f, "cross_entropy_backward", [](const T* x, const T*, T* dx, std::size_t n) {
    d::cross_entropy_backward(x, n, n / 3, 0.5, dx, 0.1f);
  });
}
template <class T>
void family_calls_cross_entropy_backward_lse(family<T>& f) {
  add_typed<T>(f, "cross_entropy_backward (saved logsumexp)", [](const T* x, const T*, T* dx, std::size_t n) {
    d::cross_entropy_backward(x, n, n / 3, 0.5, dx, 0.1f, d::logsumexp(x, n));
  });
}
template <class T>
void family_calls_batched_logsumexp(family<T>& f) {
  add_typed<T>(f, "logsumexp (batched)", [](const T* x, const T*, T* out, std::size_t n) {
    std::fill(out, out + n, T(0));
    double lse[4];
    d::logsumexp(rows_of(x, n), lse);
    for (int r = 0; r < 4; ++r) out[r] = static_cast<T>(lse[r]);
  });
}
template <class T>
void family_calls_batched_cross_entropy(family<T>& f) {
  add_typed<T>(f, "cross_entropy (batched)", [](const T* x, const T*, T* out, std::size_t n) {
    std::fill(out, out + n, T(0));
    const std::int64_t targets[4] = {0, std::int64_t(n / 8), -100, std::int64_t(n / 4 - 1)};
    smax::loss_options o;
    o.label_smoothing = 0.1f;
    double loss[4], lse[4];
    out[0] = static_cast<T>(d::cross_entropy(rows_of(x, n), targets, o, loss, lse));
    for (int r = 0; r < 4; ++r) out[1 + r] = static_cast<T>(loss[r]);
  });
}
template <class T>
void family_calls_batched_cross_entropy_backward(family<T>& f) {
  add_typed<T>(f, "cross_entropy_backward (batched)", [](const T* x, const T*, T* dx, std::size_t n) {
    std::fill(dx, dx + n, T(0));
    const std::int64_t targets[4] = {0, std::int64_t(n / 8), -100, std::int64_t(n / 4 - 1)};
    smax::loss_options o;
    o.label_smoothing = 0.1f;
    d::cross_entropy_backward(rows_of(x, n), targets, 0.5, rows_of(dx, n), o);
  });
}
template <class T>
void family_calls_softmax_opts(family<T>& f) {
  add_typed<T>(f, "softmax (options)",
               [](const T* x, const T*, T* y, std::size_t n) { d::softmax(x, y, n, some_options<T>(n)); });
  add_typed<T>(f, "softmax (options, unit scale)",
               [](const T* x, const T*, T* y, std::size_t n) { d::softmax(x, y, n, some_options<T>(n, S<T>(1))); });
  // (no sink: the sum can be below 1, the normalizing cut with it)
  add_typed<T>(f, "softmax (length)", [](const T* x, const T*, T* y, std::size_t n) {
    smax::softmax_options<T> so;
    so.length = n - 1;
    d::softmax(x, y, n, so);
  });
}
template <class T>
void family_calls_log_softmax_opts(family<T>& f) {
  add_typed<T>(f, "log_softmax (options)",
               [](const T* x, const T*, T* y, std::size_t n) { d::log_softmax(x, y, n, some_options<T>(n)); });
  add_typed<T>(f, "log_softmax (options, unit scale)",
               [](const T* x, const T*, T* y, std::size_t n) { d::log_softmax(x, y, n, some_options<T>(n, S<T>(1))); });
}
template <class T>
void family_calls_softmax_backward_opts(family<T>& f) {
  add_typed<T>(f, "softmax_backward (options)",
               after_forward<T>([](const T* x, T* y, std::size_t n) { d::softmax(x, y, n, some_options<T>(n)); },
                                [](const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
                                  d::softmax_backward(x, y, dy, dx, n, some_options<T>(n));
                                }));
  add_typed<T>(
      f, "softmax_backward (options, unit scale)",
      after_forward<T>([](const T* x, T* y, std::size_t n) { d::softmax(x, y, n, some_options<T>(n, S<T>(1))); },
                       [](const T* x, const T* y, const T* dy, T* dx, std::size_t n) {
                         d::softmax_backward(x, y, dy, dx, n, some_options<T>(n, S<T>(1)));
                       }));
}
// Attention rows with every option: 2 heads of 2 query rows, a 2-row mask
// (-inf entries among them), ALiBi slopes from max_bias, causal lengths,
// a sink per head.
template <class T>
struct attention_case {
  std::vector<T> mask;
  S<T> sinks[2] = {S<T>(1.5), S<T>(-1)};
  smax::attention_options<T> o;
  attention_case(std::size_t cols, S<T> scale) : mask(2 * cols) {
    for (std::size_t i = 0; i < mask.size(); ++i)
      mask[i] = static_cast<T>(i % 7 == 3 ? -std::numeric_limits<S<T>>::infinity() : -static_cast<S<T>>(i % 5));
    o.scale = scale;
    o.softcap = S<T>(60);
    o.mask = smax::matrix_view<const T>(mask.data(), 2, cols);
    o.lengths = smax::causal(static_cast<std::ptrdiff_t>(cols / 2));
    o.heads = 2;
    o.max_bias = S<T>(8);
    o.sinks = sinks;
  }
  attention_case(const attention_case&) = delete;
};
// The attention rows at scale 0.7, and at 1 (some_options says why).
template <class T, class F>
void add_attention_scales(family<T>& f, const std::string& name, F call) {
  for (const S<T> scale : {S<T>(0.7), S<T>(1)})
    add_typed<T>(f, name + (scale == S<T>(1) ? " (attention rows, unit scale)" : " (attention rows)"),
                 [scale, call](const T* x, const T* dy, T* out, std::size_t n) { call(x, dy, out, n, scale); });
}
template <class T>
void family_calls_batched_softmax_attention(family<T>& f) {
  add_attention_scales<T>(f, "softmax", [](const T* x, const T*, T* y, std::size_t n, S<T> scale) {
    std::fill(y, y + n, T(0));
    const attention_case<T> c(n / 4, scale);
    d::softmax(rows_of(x, n), rows_of(y, n), c.o);
  });
}
template <class T>
void family_calls_batched_log_softmax_attention(family<T>& f) {
  add_attention_scales<T>(f, "log_softmax", [](const T* x, const T*, T* y, std::size_t n, S<T> scale) {
    std::fill(y, y + n, T(0));
    const attention_case<T> c(n / 4, scale);
    d::log_softmax(rows_of(x, n), rows_of(y, n), c.o);
  });
}
template <class T>
void family_calls_batched_softmax_backward_attention(family<T>& f) {
  add_attention_scales<T>(f, "softmax_backward", [](const T* x, const T* dy, T* dx, std::size_t n, S<T> scale) {
    std::vector<T> y(n, T(0));
    std::fill(dx, dx + n, T(0));
    const attention_case<T> c(n / 4, scale);
    d::softmax(rows_of(x, n), rows_of(y.data(), n), c.o);
    d::softmax_backward(rows_of(x, n), rows_of(static_cast<const T*>(y.data()), n), rows_of(dy, n), rows_of(dx, n),
                        c.o);
  });
}
template <class T>
void family_calls_sample(family<T>& f) {
  add_typed<T>(f, "sample", [](const T* x, const T*, T* out, std::size_t n) {
    std::fill(out, out + n, T(0));
    smax::sampling s;
    for (std::uint64_t i = 0; i < 8; ++i) out[i] = static_cast<T>(d::sample(x, n, s, 5, i));
  });
}

}  // namespace family_detail

#define SMAX_TEST_FAMILY_KERNEL(name, params, args) family_detail::family_calls_##name<T>(f);
#define SMAX_TEST_FAMILY_TYPED(ret, field, name, params, args) family_detail::family_calls_##field<T>(f);

// Every registered function's calls; typed ones need n >= 16.
template <class T>
family<T> every_function() {
  family<T> f;
  SMAX_FUNCTIONS(T, SMAX_TEST_FAMILY_KERNEL)
  SMAX_TYPED_FUNCTIONS(T, SMAX_TEST_FAMILY_TYPED)
  return f;
}

#undef SMAX_TEST_FAMILY_KERNEL
#undef SMAX_TEST_FAMILY_TYPED

// The calls of SMAX_FUNCTIONS' kernels only.
template <class T>
family<T> every_kernel() {
  family<T> f = every_function<T>();
  f.erase(std::remove_if(f.begin(), f.end(), [](const family_call<T>& c) { return !c.kernel; }), f.end());
  return f;
}

}  // namespace smax_test
