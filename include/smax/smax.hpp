// smax — softmax-family kernels for CPUs, header-only, on xsimd.
//
// This header is the table of contents: every public function, its formula,
// its valid inputs and its special values. Each one exists in three forms:
//
//   smax::softmax(x, y, n)                  best ISA this TU is compiled for
//                                           (xsimd::default_arch, your -m flags)
//   smax::softmax(xsimd::avx2{}, x, y, n)   an explicit ISA (any xsimd arch tag
//                                           this TU is compiled to support)
//   smax::dynamic::softmax(x, y, n)         the best ISA the CPU has among those
//                                           compiled in: see smax/dynamic.hpp
//
// for T = float and double, and bf16 / fp16 arrays ("16-bit logits" and "the
// rest of the family on bf16 / fp16" below, docs/half.md). x and y may be the same pointer (in place); no
// alignment is needed; n may be any size, 0 included (nothing is read or
// written). Overlapping but unequal x and y is undefined.
//
// Special values, one rule for the whole family (m = max of x):
//   any NaN in x      -> every output NaN
//   +inf entries      -> they share the mass equally, every other entry gets 0
//   -inf entries      -> masked: output 0 (log_softmax: -inf); all -inf -> all 0
//   |x| up to max     -> never overflows to inf or NaN
//   bad argument      -> std::invalid_argument naming the parameter
//
// The first form carries xsimd::default_arch as a defaulted template
// parameter (DefaultArch) so that its instantiation's symbol names the ISA:
// TUs compiled with different -m flags (a runtime dispatcher's per-ISA files,
// or yours) then never share one out-of-line copy, which the linker would
// otherwise pick arbitrarily (an AVX-512 body called from SSE2 code, or the
// reverse). Never pass DefaultArch yourself; use the arch-tag form.
#pragma once

#include <stdexcept>

#include "parameters.hpp"
#include "types.hpp"
#include "detail/attention.hpp"
#include "detail/backward.hpp"
#include "detail/batched.hpp"
#include "detail/config.hpp"
#include "detail/gumbel.hpp"
#include "detail/losses.hpp"
#include "detail/seeds.hpp"
#include "detail/softmax.hpp"
#include "detail/softmax_half.hpp"
#include "detail/half_family.hpp"
#include "detail/softpick.hpp"
#include "detail/sparse.hpp"
#include "detail/ssmax.hpp"
#include "detail/stablemax.hpp"
#include "detail/topk.hpp"

namespace smax {

// ---------------------------------------------------------------- softmax --

// y_i = e^(x_i - m) / sum_j e^(x_j - m).
// Float accuracy (tests/test_softmax.cpp, every ISA, n up to 16M): relative
// error per element below 1e-6 for outputs above 1e-30, flat in n and in
// x_i - m; outputs sum to 1 within 1e-6. `a` picks the algorithm (see
// softmax.hpp for the traffic each costs); automatic = three-pass reload below
// 4 MiB of input (AVX-512) / 8 MiB (AVX2, and AVX-512 on AMD Zen 4, whose
// 512-bit instructions run on 256-bit units; 16 MiB of doubles there and
// with AVX2 on Zen 3 and Zen 4), two-pass from there; always three-pass
// reload on SSE2 and NEON, where the exp, not memory, is the limit
// (measured: softmax.hpp, automatic_two_pass_bytes).
// The output's bits do not depend on where y lies, streamed (16 MiB and
// more, on x86) or not: tests/test_streamed.cpp.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softmax(A, const T* x, T* y, std::size_t n, algorithm a = algorithm::automatic) {
  detail::softmax<A>(x, y, n, a);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softmax(const T* x, T* y, std::size_t n, algorithm a = algorithm::automatic) {
  softmax(DefaultArch{}, x, y, n, a);
}

// y_i = x_i - m - log(sum_j e^(x_j - m)). All -inf gives all -inf; a +inf
// entry gives -log(count of +inf) there and -inf elsewhere.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void log_softmax(A, const T* x, T* y, std::size_t n) {
  detail::log_softmax<A>(x, y, n);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void log_softmax(const T* x, T* y, std::size_t n) {
  log_softmax(DefaultArch{}, x, y, n);
}

// ------------------------------------------------------------ sparse family --
// (kernels: sparse.hpp) Exact zeros outside the support, found in expected
// linear time without sorting: a max pass, a pass collecting the entries
// that can be in the support (x_i > m - 1/(alpha-1)), a solve on those only,
// and the output pass. Special values as above: NaN -> all NaN; +inf entries
// share the mass equally; -inf entries get 0; all -inf -> all 0; |x| up to
// the largest finite T never overflows. May allocate a scratch buffer (one
// double per candidate beyond 1024; std::bad_alloc if that fails).

// Sparsemax (Martins & Astudillo 2016): the Euclidean projection of x onto
// the probability simplex, y_i = max(x_i - tau, 0) with sum y = 1.
// tau is solved exactly on its support (Michelot-style Newton steps from
// below with a pivot safeguard, then the closed form in double).
// Measured error (tests/test_sparse.cpp, long-double sort-based reference,
// every ISA, n up to 16M): float 6e-8 relative per element at worst, sums to
// 1 within 5e-8; double a few ulp of y plus the rounding of tau
// (|error| <= ~2^-49 (1 + |tau|): 1e-14 relative typically, 1e-11 for an
// output 1e-8 near the threshold). Support identical to the reference's.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void sparsemax(A, const T* x, T* y, std::size_t n) {
  detail::sparse_forward<A, T, 1>(x, y, n);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void sparsemax(const T* x, T* y, std::size_t n) {
  sparsemax(DefaultArch{}, x, y, n);
}

// 1.5-entmax (Peters, Niculae & Martins 2019): y_i = max((x_i - m)/2 - tau, 0)^2
// with sum y = 1, tau exact (Newton steps from below, then the closed-form
// root of the quadratic on the support, in double). Measured error: float
// 1.7e-7 relative per element at worst; double as sparsemax, the tau term
// scaled by sqrt(y) (4e-10 relative for outputs near 1e-12).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void entmax15(A, const T* x, T* y, std::size_t n) {
  detail::sparse_forward<A, T, 2>(x, y, n);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void entmax15(const T* x, T* y, std::size_t n) {
  entmax15(DefaultArch{}, x, y, n);
}

// alpha-entmax (Peters et al. 2019; bisection of Blondel et al. 2020):
// y_i = max((alpha-1) x_i - tau, 0)^(1/(alpha-1)) with sum y = 1.
// alpha = 1 is softmax (computed as softmax), alpha = 2 sparsemax,
// alpha = 1.5 1.5-entmax. tau: at most n_iter bisection steps on the
// candidates, stopped as soon as the support is known, then safeguarded
// Newton steps to full double precision, so the result does not depend on
// n_iter (0 included) beyond rounding. Counts measured (normal logits,
// sigma 1 and 3, n = 1K..1M, alpha 1.25 / 1.5 / 3; float and double take the
// same, the solve being in double): 1-17 bisection steps, then 1-7 Newton
// steps; narrow logits (sigma 0.001) up to 27 bisection steps. Each step is
// one pass over the candidates only. Measured error (against quad
// precision, alpha 1.1 to 4): float 6e-8 relative (the power is taken in
// double), 1.7e-7 at alpha = 1.5 (a float square, as entmax15); double
// 4e-12, and near the threshold as entmax15. The threshold carries its
// sub-ulp Newton correction where no entry lies between the two (the
// support unchanged), so entries just above it stay accurate: 43 logits
// tied 0.135 below the max at alpha = 4 give outputs within 1e-13 relative,
// summing to 1 within 1e-14. Where entries lie within an ulp of the
// threshold (p < 1: the correction would cross them, and is refused), the
// sub-ulp part is found by bisection on (x - t) - t_lo instead: 20 ties
// 7e-18 above the threshold at alpha = 6 get outputs within 6e-15
// relative, and 200 such ties sum with the max to 1 within 5e-14.
// Throws std::invalid_argument unless alpha >= 1 is finite and n_iter >= 0.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void entmax_bisect(A, const T* x, T* y, std::size_t n, detail::nodeduce_t<T> alpha, int n_iter = 50) {
  detail::check_entmax("smax::entmax_bisect", alpha, n_iter);
  detail::entmax_bisect<A, T>(x, y, n, alpha, n_iter);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void entmax_bisect(const T* x, T* y, std::size_t n, detail::nodeduce_t<T> alpha, int n_iter = 50) {
  entmax_bisect(DefaultArch{}, x, y, n, alpha, n_iter);
}

// Vector-Jacobian product of sparsemax, from its output y:
// dx_i = [y_i > 0] (dy_i - mean of dy over the support). dx may alias dy.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void sparsemax_backward(A, const T* y, const T* dy, T* dx, std::size_t n) {
  detail::sparsemax_backward<A, T>(y, dy, dx, n);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void sparsemax_backward(const T* y, const T* dy, T* dx, std::size_t n) {
  sparsemax_backward(DefaultArch{}, y, dy, dx, n);
}

// Vector-Jacobian product of alpha-entmax, from its output y: with
// g_i = y_i^(2-alpha) on the support (0 elsewhere),
// dx = g dy - g (sum g dy / sum g). alpha = 2 gives sparsemax's, alpha = 1
// softmax's. dx may alias dy. Throws std::invalid_argument unless alpha >= 1
// is finite.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void entmax_backward(A, const T* y, const T* dy, T* dx, std::size_t n, detail::nodeduce_t<T> alpha) {
  detail::check_entmax("smax::entmax_backward", alpha);
  detail::entmax_backward<A, T>(y, dy, dx, n, alpha);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void entmax_backward(const T* y, const T* dy, T* dx, std::size_t n, detail::nodeduce_t<T> alpha) {
  entmax_backward(DefaultArch{}, y, dy, dx, n, alpha);
}

// ---------------------------------------------------------- other variants --
// (kernels: stablemax.hpp, softpick.hpp, ssmax.hpp, gumbel.hpp) Each reads
// its input twice and writes once out of cache (no temporary), with a robust
// fallback for the inputs the fast pass cannot represent (special values,
// |x| near the largest finite T). Errors quoted are measured by
// tests/test_stablemax.cpp, test_softpick.cpp, test_ssmax.cpp and
// test_gumbel.cpp against long double, every ISA.

// Stablemax (Prieto et al. 2025): s(x) = x + 1 (x >= 0), 1 / (1 - x) (x < 0),
// y_i = s(x_i) / sum_j s(x_j). Not shift-invariant (never max-subtracted);
// finite for every finite x (also where softmax would need the max shift).
// Special values: NaN -> all NaN; +inf entries share the mass; -inf entries
// get 0 (s(-inf) = 0); all -inf -> all 0. Float error: below 4e-7 relative
// per element (outputs above 1e-30).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void stablemax(A, const T* x, T* y, std::size_t n) {
  detail::stablemax<A>(x, y, n);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void stablemax(const T* x, T* y, std::size_t n) {
  stablemax(DefaultArch{}, x, y, n);
}

// log_stablemax: y_i = log s(x_i) - log(sum_j s(x_j)), with log s(x) =
// +-log1p(|x|). -inf entries give -inf (all -inf: all -inf); +inf entries
// give -log(count of +inf), the rest -inf; NaN -> all NaN. Error: within 8
// ulp of max(|log s(x_i)|, |log sum|) (measured on random inputs: 3.3 ulp
// float, 7.6 double, where log sum ~ 0.4 carries the rounding of the sum),
// also where the two nearly cancel: with one entry dominating the sum, log
// sum = log s(m) + log1p(rest) (three more passes over x; n = 1 gives
// exactly 0).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void log_stablemax(A, const T* x, T* y, std::size_t n) {
  detail::log_stablemax<A>(x, y, n);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void log_stablemax(const T* x, T* y, std::size_t n) {
  log_stablemax(DefaultArch{}, x, y, n);
}

// Softpick (Zuhri et al. 2025): with M = max(0, max x),
// y_i = relu(e^(x_i - M) - e^(-M)) / (sum_j |e^(x_j - M) - e^(-M)| + eps).
// Rectified (x_i <= 0 gives exactly 0; all x <= 0 gives all 0) and summing
// to below one when some x < 0. -inf entries are masked: output 0 and no
// term in the sum. NaN -> all NaN; +inf entries get 1 / (count + eps) (the
// limit), the rest 0. The subtraction is never cancelled (expm1 near 0), so
// float error is below 1e-6 relative per element, flat in x.
// Throws std::invalid_argument unless eps >= 0 is finite.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softpick(A, const T* x, T* y, std::size_t n, detail::nodeduce_t<T> eps = detail::nodeduce_t<T>(1e-8)) {
  detail::check_softpick_eps<T>(eps);
  detail::softpick<A, T>(x, y, n, eps);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softpick(const T* x, T* y, std::size_t n, detail::nodeduce_t<T> eps = detail::nodeduce_t<T>(1e-8)) {
  softpick(DefaultArch{}, x, y, n, eps);
}

// Scalable-Softmax (Nakanishi 2025): y = softmax(c x) with the effective
// scale c = s log(n) + b (computed in double, then rounded to T). n = 1
// gives [1]. The scale is folded into the exponent (no temporary). c > 0:
// the special values of softmax (+inf entries share the mass, -inf get 0).
// c < 0 flips the roles of the infinities (-inf entries share, +inf get 0).
// c = 0: 1/n each for finite x; an infinite entry gives 0 * inf = NaN, so
// all NaN. Float error: below 1e-6 relative per element flat in |c x| on
// FMA ISAs (AVX2, AVX-512, NEON); SSE2 adds the rounding of c x
// (|c x_i| 2^-24).
// Backward (no separate function): with y = ssmax(x), the vector-Jacobian
// product is c * softmax_backward(y, dy), i.e.
//     softmax_backward(y, dy, dx, n); then dx_i *= c.
// Throws std::invalid_argument unless s and b are finite and c is finite in T.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void ssmax(A, const T* x, T* y, std::size_t n, detail::nodeduce_t<T> s, detail::nodeduce_t<T> b = detail::nodeduce_t<T>(0)) {
  if (detail::check_ssmax<T>(s, b, n)) detail::ssmax<A, T>(x, y, n, s, b);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void ssmax(const T* x, T* y, std::size_t n, detail::nodeduce_t<T> s, detail::nodeduce_t<T> b = detail::nodeduce_t<T>(0)) {
  ssmax(DefaultArch{}, x, y, n, s, b);
}

// Gumbel noise g_i = -log(-log u_i), u_i from Philox4x32-10 keyed by seed,
// counter from the element index offset + i (gumbel.hpp has the exact
// layout): the same bits on every ISA (SSE2, AVX2, AVX-512, NEON) and for
// any split of the work: gumbel_noise(g + k, n - k, seed, offset + k) writes
// the tail of gumbel_noise(g, n, seed, offset). u is strictly inside (0, 1)
// (23 random bits for float, 52 for double), so g is always finite.
// Float error against -log(-log u) in long double: within 2 ulp of |g| + 1.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void gumbel_noise(A, T* g, std::size_t n, std::uint64_t seed, std::uint64_t offset = 0) {
  detail::gumbel_noise<A, T>(g, n, seed, offset);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void gumbel_noise(T* g, std::size_t n, std::uint64_t seed, std::uint64_t offset = 0) {
  gumbel_noise(DefaultArch{}, g, n, seed, offset);
}

// Gumbel-softmax (Jang, Gu & Poole 2016): y = softmax((logits + g) / tau)
// with g = gumbel_noise(seed) (offset 0: g_i is element i's noise), computed
// as z = logits + g in T, then softmax(z / tau) by the ssmax kernel (scale
// 1 / tau). hard = true writes the exact one-hot of the argmax of z (lowest
// index on ties). Special values as softmax: NaN -> all NaN; +inf logits
// share the mass (hard: the first of them); all -inf -> all 0.
// Throws std::invalid_argument unless tau > 0 is finite.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void gumbel_softmax(A, const T* logits, T* y, std::size_t n, detail::nodeduce_t<T> tau, std::uint64_t seed,
                    bool hard = false) {
  detail::check_gumbel_tau(tau);
  detail::gumbel_softmax<A, T>(logits, y, n, tau, seed, hard);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void gumbel_softmax(const T* logits, T* y, std::size_t n, detail::nodeduce_t<T> tau, std::uint64_t seed,
                    bool hard = false) {
  gumbel_softmax(DefaultArch{}, logits, y, n, tau, seed, hard);
}

// Vector-Jacobian product of stablemax, from its input x:
// dx_k = s'(x_k) / S (dy_k - sum_i dy_i y_i), s' = 1 (x >= 0), s(x)^2
// (x < 0), S = sum s. NaN in x or dy -> all NaN; a +inf in x -> all 0 (the
// saturated limit); -inf entries get 0. dx may alias x or dy. Never
// overflows where the result is representable (dy up to the largest T, x
// anywhere); sum dy_i y_i is formed from products rounded in T (subnormal
// products are off by up to half the smallest subnormal each).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void stablemax_backward(A, const T* x, const T* dy, T* dx, std::size_t n) {
  detail::stablemax_backward<A>(x, dy, dx, n);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void stablemax_backward(const T* x, const T* dy, T* dx, std::size_t n) {
  stablemax_backward(DefaultArch{}, x, dy, dx, n);
}

// Vector-Jacobian product of softpick, from x and its output y: with
// D = sum_j |a_j| + eps and dot = sum_i dy_i y_i,
// dx_k = e^(x_k - M) / D (1[x_k > 0] dy_k - sign(x_k) dot), minus
// eps dot / D at the first argmax when max x > 0 (M depends on x there).
// NaN in x -> all NaN; a +inf in x -> all 0; -inf entries get 0. dx may
// alias x, y or dy. dot is formed from products rounded in T (subnormal
// products are off by up to half the smallest subnormal each, which the
// factor e^(x_k - M) / D multiplies when D is tiny).
// Throws std::invalid_argument unless eps >= 0 is finite.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softpick_backward(A, const T* x, const T* y, const T* dy, T* dx, std::size_t n,
                       detail::nodeduce_t<T> eps = detail::nodeduce_t<T>(1e-8)) {
  if (!(eps >= T(0)) || !detail::is_finite(eps))
    throw std::invalid_argument("smax::softpick_backward: eps must be finite and >= 0");
  detail::softpick_backward<A, T>(x, y, dy, dx, n, eps);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softpick_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n,
                       detail::nodeduce_t<T> eps = detail::nodeduce_t<T>(1e-8)) {
  softpick_backward(DefaultArch{}, x, y, dy, dx, n, eps);
}

// ------------------------------------------------------------------ backward --
// Vector-Jacobian products: given the forward output y and the upstream
// gradient dy, write dx = J^T dy. dx may alias y or dy. They read y only, so
// special values propagate through the arithmetic (a NaN in y or dy makes
// dx NaN; entries with y = 0 get dx = 0 from softmax_backward).

// dx_i = y_i (dy_i - sum_j y_j dy_j), y = softmax(x). Error: a few ulp of
// |y_i| (|dy_i| + sum_j |y_j dy_j|), plus |y_i| times the products y_j dy_j
// below 2^-102 (double 2^-969), which the sum may drop, and a sum below the
// smallest normal number, taken as 0 (no subnormal formed: docs/guarantees.md).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softmax_backward(A, const T* y, const T* dy, T* dx, std::size_t n) {
  detail::softmax_backward<A>(y, dy, dx, n);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softmax_backward(const T* y, const T* dy, T* dx, std::size_t n) {
  softmax_backward(DefaultArch{}, y, dy, dx, n);
}

// dx_i = dy_i - e^(y_i) sum_j dy_j, y = log_softmax(x) (y = -inf entries
// get dx_i = dy_i).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void log_softmax_backward(A, const T* y, const T* dy, T* dx, std::size_t n) {
  detail::log_softmax_backward<A>(y, dy, dx, n);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void log_softmax_backward(const T* y, const T* dy, T* dx, std::size_t n) {
  log_softmax_backward(DefaultArch{}, y, dy, dx, n);
}

// ------------------------------------------------------------------- batched --
// Every row of a rows x cols matrix (row r at data + r * stride), optionally
// on an executor (parallel.hpp: smax::thread_pool, or your own parallel-for).
// x and y may be the same matrix. Bitwise identical output for any executor
// and thread count. With algorithm::automatic a row of >= 2^18 elements is
// split into fixed blocks that run in parallel too (so one long row uses every
// core); an explicit algorithm runs each row whole. Throws
// std::invalid_argument for stride < cols or mismatched shapes.

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softmax(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y,
             algorithm a = algorithm::automatic, executor* ex = nullptr) {
  detail::check_shapes("smax::softmax", x, y);
  detail::softmax_rows<A, T>(x, y, a, ex, detail::result_form::probabilities);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softmax(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, algorithm a = algorithm::automatic,
             executor* ex = nullptr) {
  softmax(DefaultArch{}, x, y, a, ex);
}

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void log_softmax(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, executor* ex = nullptr) {
  detail::check_shapes("smax::log_softmax", x, y);
  detail::softmax_rows<A, T>(x, y, algorithm::automatic, ex, detail::result_form::logs);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void log_softmax(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, executor* ex = nullptr) {
  log_softmax(DefaultArch{}, x, y, ex);
}

// --------------------------------------------------- 16-bit logits (bf16, fp16) --
// (kernels: softmax_half.hpp, types: half.hpp) softmax and log_softmax of
// bf16 or fp16 x, to y of the same type or to float y. Computed and summed in
// float (double across blocks), each output rounded once (round to nearest
// even): a 16-bit output is within one 16-bit ulp of the exact result of the
// 16-bit inputs (fp16 outputs below 2^-14: within 2^-24), a float output
// within the float contract above. Special values as for float; fp16's
// largest finite 65504 and bf16's ~3.4e38 never give inf or NaN. Up to 2^18
// elements every `a` runs three-pass reload on x as it is (the float terms
// on the stack up to 2048, else in a per-thread 1 MiB buffer kept for the
// thread's life); longer rows run two_pass for automatic, two_pass and
// online (reads 2n, writes n: the 16-bit roofline), the recompute form over
// L1 blocks for both three_pass.
template <class A, class H, class Y, class = detail::enable_if_arch_t<A>, class = detail::enable_if_half_out_t<H, Y>>
void softmax(A, const H* x, Y* y, std::size_t n, algorithm a = algorithm::automatic) {
  detail::softmax_half<A>(x, y, n, a, detail::result_form::probabilities);
}
template <class H, class Y, class = detail::enable_if_half_out_t<H, Y>, class DefaultArch = xsimd::default_arch>
void softmax(const H* x, Y* y, std::size_t n, algorithm a = algorithm::automatic) {
  softmax(DefaultArch{}, x, y, n, a);
}
template <class A, class H, class Y, class = detail::enable_if_arch_t<A>, class = detail::enable_if_half_out_t<H, Y>>
void log_softmax(A, const H* x, Y* y, std::size_t n) {
  detail::softmax_half<A>(x, y, n, algorithm::automatic, detail::result_form::logs);
}
template <class H, class Y, class = detail::enable_if_half_out_t<H, Y>, class DefaultArch = xsimd::default_arch>
void log_softmax(const H* x, Y* y, std::size_t n) {
  log_softmax(DefaultArch{}, x, y, n);
}

// Batched 16-bit rows, as the float batched forms (any executor, same bits):
// x and y of one 16-bit type, or x 16-bit (a matrix_view<const bf16>, say)
// and y float. Rows run whole (no long-row split).
template <class A, class H, class Y, class = detail::enable_if_arch_t<A>, class = detail::enable_if_half_out_t<H, Y>>
void softmax(A, matrix_view<const H> x, matrix_view<Y> y, algorithm a = algorithm::automatic, executor* ex = nullptr) {
  detail::check_shapes("smax::softmax", x, y);
  detail::for_each_row(
      x, y, detail::default_executor(ex), [&](const H* xr, Y* yr) { detail::softmax_half<A>(xr, yr, x.cols, a, detail::result_form::probabilities); },
      detail::rows_ahead_pays(x));
}
template <class H, class Y, class = detail::enable_if_half_out_t<H, Y>, class DefaultArch = xsimd::default_arch>
void softmax(matrix_view<const H> x, matrix_view<Y> y, algorithm a = algorithm::automatic, executor* ex = nullptr) {
  softmax(DefaultArch{}, x, y, a, ex);
}
template <class A, class H, class Y, class = detail::enable_if_arch_t<A>, class = detail::enable_if_half_out_t<H, Y>>
void log_softmax(A, matrix_view<const H> x, matrix_view<Y> y, executor* ex = nullptr) {
  detail::check_shapes("smax::log_softmax", x, y);
  // (no rows_ahead: the log form reads x widened into a buffer)
  detail::for_each_row(
      x, y, detail::default_executor(ex),
      [&](const H* xr, Y* yr) { detail::softmax_half<A>(xr, yr, x.cols, algorithm::automatic, detail::result_form::logs); },
      /*rows_ahead=*/false);
}
template <class H, class Y, class = detail::enable_if_half_out_t<H, Y>, class DefaultArch = xsimd::default_arch>
void log_softmax(matrix_view<const H> x, matrix_view<Y> y, executor* ex = nullptr) {
  log_softmax(DefaultArch{}, x, y, ex);
}

// The backward passes on 16-bit y, dy, dx (y the forward's 16-bit output):
// the float formulas (softmax_backward, log_softmax_backward above) in float,
// each dx rounded once: within one 16-bit ulp of the float kernel's result,
// whose own error is 2^-22 |y| (|dy| + |sum y dy|) at most (where dy_i is
// close to the dot product, dx_i cancels and that bound, not the ulp, is
// what holds). Batched over matrix_views, any executor, the same bits.
// (The enable_if sits in the return type: the float forms' template heads
// have the same shape.)
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> softmax_backward(A, const H* y, const H* dy, H* dx,
                                                                                 std::size_t n) {
  detail::softmax_backward_half<A>(y, dy, dx, n);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> softmax_backward(const H* y, const H* dy, H* dx, std::size_t n) {
  softmax_backward(DefaultArch{}, y, dy, dx, n);
}
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> log_softmax_backward(A, const H* y, const H* dy,
                                                                                     H* dx, std::size_t n) {
  detail::log_softmax_backward_half<A>(y, dy, dx, n);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> log_softmax_backward(const H* y, const H* dy, H* dx, std::size_t n) {
  log_softmax_backward(DefaultArch{}, y, dy, dx, n);
}
#define SMAX_HALF_BATCHED_BACKWARD(fn)                                                                             \
  template <class A, class H>                                                                                    \
  std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> fn(                                             \
      A, matrix_view<const detail::nodeduce_t<H>> y, matrix_view<const detail::nodeduce_t<H>> dy,                \
      matrix_view<H> dx, executor* ex = nullptr) {                                                               \
    detail::check_shapes("smax::" #fn, y, dx, "y", "dx");                                                       \
    detail::check_shapes("smax::" #fn, dy, dx, "dy", "dx");                                                     \
    detail::for_each_row_index(dx.rows, dx.cols, detail::default_executor(ex), [&](std::size_t r) {             \
      detail::fn##_half<A>(y.row(r), dy.row(r), dx.row(r), dx.cols);                                            \
    });                                                                                                          \
  }                                                                                                              \
  template <class H, class DefaultArch = xsimd::default_arch>                                                    \
  std::enable_if_t<detail::is_half_v<H>> fn(matrix_view<const detail::nodeduce_t<H>> y,                          \
                                           matrix_view<const detail::nodeduce_t<H>> dy, matrix_view<H> dx,       \
                                           executor* ex = nullptr) {                                             \
    fn(DefaultArch{}, y, dy, dx, ex);                                                                            \
  }
SMAX_HALF_BATCHED_BACKWARD(softmax_backward)
SMAX_HALF_BATCHED_BACKWARD(log_softmax_backward)
#undef SMAX_HALF_BATCHED_BACKWARD

// Bulk conversion between float and bf16/fp16 (either direction), each value
// rounded to nearest even (NaN stays NaN; fp16 overflows to inf beyond 65504
// as IEEE rounding says). src and dst must not overlap.
template <class A, class S, class D, class = detail::enable_if_arch_t<A>, class = detail::enable_if_convert_t<S, D>>
void convert(A, const S* src, D* dst, std::size_t n) {
  detail::convert<A>(src, dst, n);
}
template <class S, class D, class = detail::enable_if_convert_t<S, D>, class DefaultArch = xsimd::default_arch>
void convert(const S* src, D* dst, std::size_t n) {
  convert(DefaultArch{}, src, dst, n);
}

// ------------------------------------------- batched: the rest of the family --
// Every other function over the rows of matrices, each row exactly the
// single-vector function of that row (bitwise: the same kernel runs on it),
// rows spread over the executor (none: this thread). Arguments are checked
// once, before any row runs (std::invalid_argument, as the single-vector
// forms, and for stride < cols or mismatched shapes). ssmax's n is cols.
// gumbel_softmax: row r uses the seed gumbel_row_seed(seed, r), so rows
// draw independent noise and row r equals gumbel_softmax(row r, seed_r).

#define SMAX_BATCHED_FORWARD(fn)                                                                              \
  template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>       \
  void fn(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, executor* ex = nullptr) {          \
    detail::rows_map("smax::" #fn, x, y, ex, [](const T* xr, T* yr, std::size_t n, std::size_t) { fn(A{}, xr, yr, n); }); \
  }                                                                                                           \
  template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>            \
  void fn(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, executor* ex = nullptr) {             \
    fn(DefaultArch{}, x, y, ex);                                                                              \
  }
SMAX_BATCHED_FORWARD(sparsemax)
SMAX_BATCHED_FORWARD(entmax15)
SMAX_BATCHED_FORWARD(stablemax)
SMAX_BATCHED_FORWARD(log_stablemax)
#undef SMAX_BATCHED_FORWARD

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void entmax_bisect(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, detail::nodeduce_t<T> alpha,
                   int n_iter = 50, executor* ex = nullptr) {
  entmax_bisect(A{}, static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0, alpha, n_iter);  // checks
  detail::rows_map("smax::entmax_bisect", x, y, ex,
                   [&](const T* xr, T* yr, std::size_t n, std::size_t) { entmax_bisect(A{}, xr, yr, n, alpha, n_iter); });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void entmax_bisect(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, detail::nodeduce_t<T> alpha,
                   int n_iter = 50, executor* ex = nullptr) {
  entmax_bisect(DefaultArch{}, x, y, alpha, n_iter, ex);
}

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softpick(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y,
              detail::nodeduce_t<T> eps = detail::nodeduce_t<T>(1e-8), executor* ex = nullptr) {
  softpick(A{}, static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0, eps);  // checks eps
  detail::rows_map("smax::softpick", x, y, ex,
                   [&](const T* xr, T* yr, std::size_t n, std::size_t) { softpick(A{}, xr, yr, n, eps); });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softpick(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y,
              detail::nodeduce_t<T> eps = detail::nodeduce_t<T>(1e-8), executor* ex = nullptr) {
  softpick(DefaultArch{}, x, y, eps, ex);
}

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void ssmax(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, detail::nodeduce_t<T> s,
           detail::nodeduce_t<T> b = detail::nodeduce_t<T>(0), executor* ex = nullptr) {
  ssmax(A{}, static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0, s, b);  // checks s and b
  if (x.cols && !detail::is_finite(static_cast<T>(detail::ssmax_scale(s, b, x.cols))))
    throw std::invalid_argument("smax::ssmax: the scale s * log(n) + b overflows");
  detail::rows_map("smax::ssmax", x, y, ex,
                   [&](const T* xr, T* yr, std::size_t n, std::size_t) { ssmax(A{}, xr, yr, n, s, b); });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void ssmax(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, detail::nodeduce_t<T> s,
           detail::nodeduce_t<T> b = detail::nodeduce_t<T>(0), executor* ex = nullptr) {
  ssmax(DefaultArch{}, x, y, s, b, ex);
}

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void gumbel_softmax(A, matrix_view<const detail::nodeduce_t<T>> logits, matrix_view<T> y, detail::nodeduce_t<T> tau,
                    std::uint64_t seed, bool hard = false, executor* ex = nullptr) {
  gumbel_softmax(A{}, static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0, tau, seed, hard);  // checks tau
  detail::rows_map("smax::gumbel_softmax", logits, y, ex, [&](const T* xr, T* yr, std::size_t n, std::size_t r) {
    gumbel_softmax(A{}, xr, yr, n, tau, gumbel_row_seed(seed, r), hard);
  });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void gumbel_softmax(matrix_view<const detail::nodeduce_t<T>> logits, matrix_view<T> y, detail::nodeduce_t<T> tau,
                    std::uint64_t seed, bool hard = false, executor* ex = nullptr) {
  gumbel_softmax(DefaultArch{}, logits, y, tau, seed, hard, ex);
}

// Backward passes, row by row: (y, dy) -> dx, or (x, dy) -> dx for
// stablemax, (x, y, dy) -> dx for softpick. dx may alias what the
// single-vector form allows.
#define SMAX_BATCHED_BACKWARD(fn, a, b)                                                                        \
  template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>        \
  void fn(A, matrix_view<const detail::nodeduce_t<T>> a, matrix_view<const detail::nodeduce_t<T>> b,           \
          matrix_view<T> dx, executor* ex = nullptr) {                                                         \
    detail::rows_map_two_inputs("smax::" #fn, {#a, #b, "dx"}, a, b, dx, ex,                                             \
                      [](const T* ar, const T* br, T* dr, std::size_t n) { fn(A{}, ar, br, dr, n); });         \
  }                                                                                                            \
  template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>             \
  void fn(matrix_view<const detail::nodeduce_t<T>> a, matrix_view<const detail::nodeduce_t<T>> b,              \
          matrix_view<T> dx, executor* ex = nullptr) {                                                         \
    fn(DefaultArch{}, a, b, dx, ex);                                                                           \
  }
SMAX_BATCHED_BACKWARD(softmax_backward, y, dy)
SMAX_BATCHED_BACKWARD(log_softmax_backward, y, dy)
SMAX_BATCHED_BACKWARD(sparsemax_backward, y, dy)
SMAX_BATCHED_BACKWARD(stablemax_backward, x, dy)
#undef SMAX_BATCHED_BACKWARD

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void entmax_backward(A, matrix_view<const detail::nodeduce_t<T>> y, matrix_view<const detail::nodeduce_t<T>> dy,
                     matrix_view<T> dx, detail::nodeduce_t<T> alpha, executor* ex = nullptr) {
  entmax_backward(A{}, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0,
                  alpha);  // checks alpha
  detail::rows_map_two_inputs("smax::entmax_backward", {"y", "dy", "dx"}, y, dy, dx, ex,
                    [&](const T* yr, const T* dyr, T* dxr, std::size_t n) { entmax_backward(A{}, yr, dyr, dxr, n, alpha); });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void entmax_backward(matrix_view<const detail::nodeduce_t<T>> y, matrix_view<const detail::nodeduce_t<T>> dy,
                     matrix_view<T> dx, detail::nodeduce_t<T> alpha, executor* ex = nullptr) {
  entmax_backward(DefaultArch{}, y, dy, dx, alpha, ex);
}

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softpick_backward(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<const detail::nodeduce_t<T>> y,
                       matrix_view<const detail::nodeduce_t<T>> dy, matrix_view<T> dx,
                       detail::nodeduce_t<T> eps = detail::nodeduce_t<T>(1e-8), executor* ex = nullptr) {
  softpick_backward(A{}, static_cast<const T*>(nullptr), static_cast<const T*>(nullptr),
                    static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0, eps);  // checks eps
  detail::rows_map4("smax::softpick_backward", {"x", "y", "dy", "dx"}, x, y, dy, dx, ex,
                    [&](const T* xr, const T* yr, const T* dyr, T* dxr, std::size_t n) {
                      softpick_backward(A{}, xr, yr, dyr, dxr, n, eps);
                    });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softpick_backward(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<const detail::nodeduce_t<T>> y,
                       matrix_view<const detail::nodeduce_t<T>> dy, matrix_view<T> dx,
                       detail::nodeduce_t<T> eps = detail::nodeduce_t<T>(1e-8), executor* ex = nullptr) {
  softpick_backward(DefaultArch{}, x, y, dy, dx, eps, ex);
}

// -------------------------------------------------------------------- losses --
// (kernels: losses.hpp) Results in double. logsumexp and cross_entropy read
// x once (no max pass: two_pass_sum's (mantissa, exponent) sum; label
// smoothing adds a sum of x taken block by block while the block is in L2);
// cross_entropy_backward reads x once and writes dx once when given the
// saved logsumexp, and reads x once more without it. dx may be x.
// Special values: NaN in x -> NaN; +inf entries -> logsumexp +inf (their
// softmax shares the mass); all -inf -> logsumexp -inf, softmax zeros; a
// target whose logit is -inf -> loss +inf. Bad arguments (target >= n, a
// label_smoothing outside [0, 1]) throw std::invalid_argument before
// anything is written. Accuracy (tests/test_losses.cpp, every ISA): within
// 1e-6 (float) of a long-double reference, relative to max(1, |result|).

// log(sum_i e^(x_i)); n = 0 gives -inf.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
double logsumexp(A, const T* x, std::size_t n) {
  return detail::logsumexp_sum<A>(x, n, nullptr);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
double logsumexp(const T* x, std::size_t n) {
  return logsumexp(DefaultArch{}, x, n);
}

// logsumexp(x) - ((1 - ls) x_target + ls mean(x)), ls = label_smoothing.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
double cross_entropy(A, const T* x, std::size_t n, std::size_t target, float label_smoothing = 0) {
  detail::check_loss_args<T>("smax::cross_entropy", n, target, label_smoothing);
  return detail::cross_entropy<A>(x, n, target, label_smoothing);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
double cross_entropy(const T* x, std::size_t n, std::size_t target, float label_smoothing = 0) {
  return cross_entropy(DefaultArch{}, x, n, target, label_smoothing);
}

// dx = dloss (softmax(x) - q), q = (1 - ls) onehot(target) + ls / n.
// Outputs below the smallest normal T are 0. The second form takes the
// logsumexp of x saved from the forward pass (one read fewer).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void cross_entropy_backward(A, const T* x, std::size_t n, std::size_t target, double dloss, T* dx,
                            float label_smoothing = 0) {
  detail::check_loss_args<T>("smax::cross_entropy_backward", n, target, label_smoothing);
  detail::cross_entropy_backward<A>(x, n, target, dloss, dx, label_smoothing,
                                    detail::logsumexp_sum<A>(x, n, nullptr));
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void cross_entropy_backward(const T* x, std::size_t n, std::size_t target, double dloss, T* dx,
                            float label_smoothing = 0) {
  cross_entropy_backward(DefaultArch{}, x, n, target, dloss, dx, label_smoothing);
}
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void cross_entropy_backward(A, const T* x, std::size_t n, std::size_t target, double dloss, T* dx,
                            float label_smoothing, double logsumexp_x) {
  detail::check_loss_args<T>("smax::cross_entropy_backward", n, target, label_smoothing);
  detail::cross_entropy_backward<A>(x, n, target, dloss, dx, label_smoothing, logsumexp_x);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void cross_entropy_backward(const T* x, std::size_t n, std::size_t target, double dloss, T* dx,
                            float label_smoothing, double logsumexp_x) {
  cross_entropy_backward(DefaultArch{}, x, n, target, dloss, dx, label_smoothing, logsumexp_x);
}

// Batched: one row of logits per example, targets[r] its class (or
// o.ignore_index: loss 0, gradient 0, not counted by mean). Rows run on the
// executor; the reduction is summed in row order on the calling thread, so
// the result is bitwise the same for any thread count.
//   logsumexp:      out[r] = logsumexp(row r)
//   cross_entropy:  returns the sum or the mean over rows not ignored
//                   (reduction::none returns 0; mean with every row ignored
//                   returns NaN); row_loss, when not null, gets every row's
//                   loss and row_lse every row's logsumexp (for backward).
//   cross_entropy_backward: dx row r = g_r (softmax(row r) - q_r), with
//                   g_r = dloss (sum), dloss / rows counted (mean), or
//                   row_dloss[r] (none: required); lse: the saved row_lse,
//                   or null (then computed: one more read).
template <class A, class U, class T = std::remove_const_t<U>, class = detail::enable_if_arch_t<A>,
          class = detail::enable_if_real_t<T>>
void logsumexp(A, matrix_view<U> x, double* out, executor* ex = nullptr) {
  detail::check_view("smax::logsumexp", x, "x");
  if (x.rows && !out) throw std::invalid_argument("smax::logsumexp: out must not be null");
  detail::logsumexp_rows<A, T>(x, out, ex);
}
template <class U, class T = std::remove_const_t<U>, class = detail::enable_if_real_t<T>,
          class DefaultArch = xsimd::default_arch>
void logsumexp(matrix_view<U> x, double* out, executor* ex = nullptr) {
  logsumexp(DefaultArch{}, x, out, ex);
}

template <class A, class U, class T = std::remove_const_t<U>, class = detail::enable_if_arch_t<A>,
          class = detail::enable_if_real_t<T>>
double cross_entropy(A, matrix_view<U> x, const std::int64_t* targets, const loss_options& o = {},
                     double* row_loss = nullptr, double* row_lse = nullptr, executor* ex = nullptr) {
  detail::check_view("smax::cross_entropy", x, "x");
  detail::check_targets<T>("smax::cross_entropy", x.rows, x.cols, targets, o);
  if (o.reduce == reduction::none && x.rows && !row_loss)
    throw std::invalid_argument("smax::cross_entropy: reduction::none needs row_loss");
  return detail::cross_entropy_rows<A, T>(x, targets, o, row_loss, row_lse, ex);
}
template <class U, class T = std::remove_const_t<U>, class = detail::enable_if_real_t<T>,
          class DefaultArch = xsimd::default_arch>
double cross_entropy(matrix_view<U> x, const std::int64_t* targets, const loss_options& o = {},
                     double* row_loss = nullptr, double* row_lse = nullptr, executor* ex = nullptr) {
  return cross_entropy(DefaultArch{}, x, targets, o, row_loss, row_lse, ex);
}

template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void cross_entropy_backward(A, matrix_view<const detail::nodeduce_t<T>> x, const std::int64_t* targets, double dloss,
                            matrix_view<T> dx, const loss_options& o = {}, const double* row_dloss = nullptr,
                            const double* lse = nullptr, executor* ex = nullptr) {
  detail::check_shapes("smax::cross_entropy_backward", x, dx, "x", "dx");
  detail::check_targets<T>("smax::cross_entropy_backward", x.rows, x.cols, targets, o);
  if (o.reduce == reduction::none && x.rows && !row_dloss)
    throw std::invalid_argument("smax::cross_entropy_backward: reduction::none needs row_dloss");
  detail::cross_entropy_backward_rows<A, T>(x, targets, dloss, dx, o, row_dloss, lse, ex);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void cross_entropy_backward(matrix_view<const detail::nodeduce_t<T>> x, const std::int64_t* targets, double dloss,
                            matrix_view<T> dx, const loss_options& o = {}, const double* row_dloss = nullptr,
                            const double* lse = nullptr, executor* ex = nullptr) {
  cross_entropy_backward(DefaultArch{}, x, targets, dloss, dx, o, row_dloss, lse, ex);
}

// ---------------------------------------------------------------- attention --
// (kernels: attention.hpp) softmax with the options attention scores carry,
// fused into the softmax's own passes (x and the mask read once):
//   z_i = scale x_i; softcap > 0: z_i = softcap tanh(z_i / softcap);
//   mask: z_i += mask_scale mask_i, a -inf mask entry masks whatever x_i is;
//   entries i >= length masked;
//   y_i = e^(z_i - M) / (sum_j e^(z_j - M) + e^(sink - M)), M = max(z, sink).
// Masked entries give 0 (log_softmax: -inf); everything masked gives all 0
// (log: -inf), with or without a sink; NaN in an unmasked entry gives all
// NaN; +inf z entries share the mass. Outputs below the smallest normal T
// are 0. Throws std::invalid_argument for a non-finite scale or mask_scale,
// a negative or non-finite softcap, a NaN or +inf sink.
// Accuracy (tests/test_attention.cpp, every ISA): float outputs within
// 1e-6 + |z_i - M| 2^-23 relative of a long-double reference of the same
// options (softcap: + 4 ulp of tanh).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softmax(A, const T* x, T* y, std::size_t n, const softmax_options<detail::nodeduce_t<T>>& o) {
  detail::check_softmax_options("smax::softmax", o);
  detail::softmax_opts<A>(x, y, n, o, detail::result_form::probabilities);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softmax(const T* x, T* y, std::size_t n, const softmax_options<detail::nodeduce_t<T>>& o) {
  softmax(DefaultArch{}, x, y, n, o);
}
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void log_softmax(A, const T* x, T* y, std::size_t n, const softmax_options<detail::nodeduce_t<T>>& o) {
  detail::check_softmax_options("smax::log_softmax", o);
  detail::softmax_opts<A>(x, y, n, o, detail::result_form::logs);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void log_softmax(const T* x, T* y, std::size_t n, const softmax_options<detail::nodeduce_t<T>>& o) {
  log_softmax(DefaultArch{}, x, y, n, o);
}
// dx w.r.t. x, given x, the forward softmax output y and dy (the sink's
// gradient is not returned). dx may be y or dy; not x when softcap > 0.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softmax_backward(A, const T* x, const T* y, const T* dy, T* dx, std::size_t n,
                      const softmax_options<detail::nodeduce_t<T>>& o) {
  detail::check_softmax_options("smax::softmax_backward", o);
  detail::softmax_backward_opts<A>(x, y, dy, dx, n, o);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softmax_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n,
                      const softmax_options<detail::nodeduce_t<T>>& o) {
  softmax_backward(DefaultArch{}, x, y, dy, dx, n, o);
}

// Batched attention rows (attention_options): row r of head h = r / (rows /
// heads) uses mask row r mod mask.rows, mask_scale = slopes[h] (or ggml's
// ALiBi slope from max_bias, see alibi_slope), sink = sinks[h], and the
// length lengths.per_row[r] or, for causal(offset), q + offset + 1 with
// q = r mod (rows / heads). Each row is exactly the single-vector call with
// those options; rows run on the executor (bitwise the same for any thread
// count). Throws as the single-vector form, and for heads not dividing rows,
// a mask narrower than x, a negative max_bias.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softmax(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y,
             const attention_options<detail::nodeduce_t<T>>& o, executor* ex = nullptr) {
  detail::check_shapes("smax::softmax", x, y);
  detail::check_attention("smax::softmax", x, o);
  detail::softmax_attention_rows<A, T>(x, y, o, ex, detail::result_form::probabilities);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softmax(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y,
             const attention_options<detail::nodeduce_t<T>>& o, executor* ex = nullptr) {
  softmax(DefaultArch{}, x, y, o, ex);
}
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void log_softmax(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y,
                 const attention_options<detail::nodeduce_t<T>>& o, executor* ex = nullptr) {
  detail::check_shapes("smax::log_softmax", x, y);
  detail::check_attention("smax::log_softmax", x, o);
  detail::softmax_attention_rows<A, T>(x, y, o, ex, detail::result_form::logs);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void log_softmax(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y,
                 const attention_options<detail::nodeduce_t<T>>& o, executor* ex = nullptr) {
  log_softmax(DefaultArch{}, x, y, o, ex);
}
// The backward pass of the batched forms: row r of dx is the single-vector
// softmax_backward(x_r, y_r, dy_r, dx_r, cols, o_r) with row r's options
// (y the forward's output; the mask and sinks are checked, not read: masked
// entries have y = 0 and get dx = 0). dx may be y or dy; not x when
// softcap > 0. Throws as the forward, and for views of different shapes.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void softmax_backward(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<const detail::nodeduce_t<T>> y,
                      matrix_view<const detail::nodeduce_t<T>> dy, matrix_view<T> dx,
                      const attention_options<detail::nodeduce_t<T>>& o, executor* ex = nullptr) {
  detail::check_shapes4("smax::softmax_backward", {"x", "y", "dy", "dx"}, x, y, dy, dx);
  detail::check_attention("smax::softmax_backward", x, o);
  detail::softmax_backward_attention_rows<A, T>(x, y, dy, dx, o, ex);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void softmax_backward(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<const detail::nodeduce_t<T>> y,
                      matrix_view<const detail::nodeduce_t<T>> dy, matrix_view<T> dx,
                      const attention_options<detail::nodeduce_t<T>>& o, executor* ex = nullptr) {
  softmax_backward(DefaultArch{}, x, y, dy, dx, o, ex);
}

// ------------------------------------------------------- top-k and sampling --
// (kernels: topk.hpp; docs/topk_sampling.md) Neither sorts the vocabulary:
// a threshold-filtered selection, then only the survivors are sorted.

// probs[j], index[j], j < k: the k largest entries of softmax(x) (normalised
// over all n) and their indices, largest first, ties to the lower index.
// probs[j] is bitwise softmax(x, algorithm::three_pass_recompute)[index[j]]
// (the softmax accuracy contract). Reads x twice: a compare-only selection,
// then the exp sum. Special values as softmax; any NaN in x: every probs[j]
// NaN and index[j] = j. k > n, or n >= 2^32 with k > 0 (32-bit indices):
// std::invalid_argument. k = 0 writes nothing.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void topk_softmax(A, const T* x, std::size_t n, std::size_t k, T* probs, std::uint32_t* index) {
  detail::check_topk(n, k);
  detail::topk_softmax<A>(x, n, k, probs, index);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void topk_softmax(const T* x, std::size_t n, std::size_t k, T* probs, std::uint32_t* index) {
  topk_softmax(DefaultArch{}, x, n, k, probs, index);
}

// One index drawn from logits[0..n): temperature 0 returns the argmax
// (lowest index on ties); otherwise p = softmax(logits / temperature), keep
// the top_k largest (0: all; ranked by logit, ties to the lower index), then
// the smallest prefix of them whose mass, renormalised over the top_k kept,
// reaches top_p, then drop those with p < min_p * max p, and draw from the
// rest, renormalised, with u from Philox4x32-10 keyed by seed at counter
// offset (topk.hpp): the same index for the same arguments on any thread
// count. Returns n when nothing can be drawn: any NaN logit, or every logit
// -inf. +inf logits share the mass equally (the rest get 0). Bad arguments
// (std::invalid_argument): n = 0, temperature < 0 or not finite, top_k > n,
// top_p outside (0, 1], min_p outside [0, 1].
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
std::size_t sample(A, const T* logits, std::size_t n, const sampling& s, std::uint64_t seed, std::uint64_t offset = 0) {
  detail::check_sampling(s, n);
  return detail::sample<A>(logits, n, s, seed, offset);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
std::size_t sample(const T* logits, std::size_t n, const sampling& s, std::uint64_t seed, std::uint64_t offset = 0) {
  return sample(DefaultArch{}, logits, n, s, seed, offset);
}

// Batched: row r of x gives row r of probs and index (rows x k each).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void topk_softmax(A, matrix_view<const detail::nodeduce_t<T>> x, std::size_t k, matrix_view<T> probs,
                  matrix_view<std::uint32_t> index, executor* ex = nullptr) {
  detail::check_topk_views(x, k, probs, index);
  if (k == 0) return;
  detail::for_each_row_index(x.rows, x.cols, detail::default_executor(ex), [&](std::size_t r) {
    detail::topk_softmax<A>(x.row(r), x.cols, k, probs.row(r), index.row(r));
  });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void topk_softmax(matrix_view<const detail::nodeduce_t<T>> x, std::size_t k, matrix_view<T> probs,
                  matrix_view<std::uint32_t> index, executor* ex = nullptr) {
  topk_softmax(DefaultArch{}, x, k, probs, index, ex);
}

// Batched: out[r] = sample(row r, cols, s, gumbel_row_seed(seed, r), offset)
// for the rows of a matrix_view<const T> or matrix_view<T>.
template <class A, class U, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<std::remove_const_t<U>>>
void sample(A, matrix_view<U> logits, std::size_t* out, const sampling& s, std::uint64_t seed,
            std::uint64_t offset = 0, executor* ex = nullptr) {
  using T = std::remove_const_t<U>;
  const matrix_view<const T> x(logits);
  if (!detail::check_sample_rows(x, out, s)) return;
  detail::for_each_row_index(x.rows, x.cols, detail::default_executor(ex), [&](std::size_t r) {
    out[r] = detail::sample<A>(x.row(r), x.cols, s, gumbel_row_seed(seed, r), offset);
  });
}
template <class U, class = detail::enable_if_real_t<std::remove_const_t<U>>, class DefaultArch = xsimd::default_arch>
void sample(matrix_view<U> logits, std::size_t* out, const sampling& s, std::uint64_t seed, std::uint64_t offset = 0,
            executor* ex = nullptr) {
  sample(DefaultArch{}, logits, out, s, seed, offset, ex);
}

// ------------------------------------------------ more of the seeds' family --
// (kernels: seeds.hpp, where each paper and official code is cited) Each has
// its backward NAME_backward(x, y, dy, dx, n, params...) (dx may alias x, y
// or dy) and a batched form over rows. Errors measured by
// tests/test_seeds.cpp against long double, every ISA.

// Sigmoid attention (Ramapuram et al. 2024): y_i = sigmoid(x_i + b), b = -log n
// in the paper. Elementwise, not a normalisation (y does not sum to one):
// NaN -> NaN in that entry only, +inf -> 1, -inf -> 0; outputs below
// about e^-86.3 (float; e^-707.4 double) are 0, never subnormal. One read,
// one write.
// Backward: dx = dy sigmoid(z) sigmoid(-z), z = x + b, from x (y unused).
// Throws std::invalid_argument unless b is finite.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void sigmoid_attention(A, const T* x, T* y, std::size_t n, detail::nodeduce_t<T> b) {
  if (!detail::is_finite(b)) throw std::invalid_argument("smax::sigmoid_attention: b must be finite");
  detail::sigmoid_attention<A, T>(x, y, n, b);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void sigmoid_attention(const T* x, T* y, std::size_t n, detail::nodeduce_t<T> b) {
  sigmoid_attention(DefaultArch{}, x, y, n, b);
}
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void sigmoid_attention_backward(A, const T* x, const T*, const T* dy, T* dx, std::size_t n,
                                detail::nodeduce_t<T> b) {
  if (!detail::is_finite(b)) throw std::invalid_argument("smax::sigmoid_attention_backward: b must be finite");
  detail::sigmoid_attention_backward<A, T>(x, dy, dx, n, b);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void sigmoid_attention_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, detail::nodeduce_t<T> b) {
  sigmoid_attention_backward(DefaultArch{}, x, y, dy, dx, n, b);
}

// Self-Adjust Softmax (Zheng et al. 2025): y = x softmax(x), or with
// normalized = true, y = (x - lo) / (hi - lo) softmax(x), lo = min(min x, 0),
// hi = max(max x, 0) (0 where hi = lo, i.e. x all 0). Not a normalisation:
// the plain form is negative where x < 0. Special values: NaN -> all NaN;
// +inf entries get +inf (plain) or 1 / count (normalized), the rest 0;
// -inf entries get 0 (normalized: the other entries then get softmax(x),
// the factor's limit); all -inf -> all 0. Outputs below the smallest normal
// T are 0. Two reads and one write out of cache (softmax's two-pass, the
// factor fused into the write).
// Backward, from x, y and dy (p = softmax(x) recomputed):
// dx = p (dy (g' + g) - sum dy y), normalized plus the terms of lo and hi at
// the first minimum / maximum. NaN in x or dy -> all NaN; +inf in x -> 0.
// Normalized, the terms scale with 1 / (hi - lo) and cancel at those two
// entries: their error is about an ulp of |dy| p / (hi - lo), so for rows
// whose range is tiny against 1 their gradients are lost, and may be +-inf
// where |dy| / (hi - lo) passes the largest T (docs/seeds.md).
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void sa_softmax(A, const T* x, T* y, std::size_t n, bool normalized = false) {
  detail::sa_softmax<A, T>(x, y, n, normalized);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void sa_softmax(const T* x, T* y, std::size_t n, bool normalized = false) {
  sa_softmax(DefaultArch{}, x, y, n, normalized);
}
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void sa_softmax_backward(A, const T* x, const T* y, const T* dy, T* dx, std::size_t n, bool normalized = false) {
  detail::sa_softmax_backward<A, T>(x, y, dy, dx, n, normalized);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void sa_softmax_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, bool normalized = false) {
  sa_softmax_backward(DefaultArch{}, x, y, dy, dx, n, normalized);
}

// MultiMax (Zhou et al. 2024): y = softmax(sigma(x)), sigma the official
// code's piecewise modulator (seeds.hpp), computed in T. Special values of
// softmax, with the mask semantics of the official code: +-inf entries of x
// are not modulated (+inf share, -inf get 0); a finite x whose sigma
// overflows acts as +-inf. Backward: dx = sigma'(x) softmax_backward(y, dy).
// Throws std::invalid_argument unless every parameter is finite.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void multimax(A, const T* x, T* y, std::size_t n, const multimax_params& p) {
  detail::check_multimax("smax::multimax", p);
  detail::multimax<A, T>(x, y, n, p);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void multimax(const T* x, T* y, std::size_t n, const multimax_params& p) {
  multimax(DefaultArch{}, x, y, n, p);
}
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void multimax_backward(A, const T* x, const T* y, const T* dy, T* dx, std::size_t n, const multimax_params& p) {
  detail::check_multimax("smax::multimax_backward", p);
  detail::multimax_backward<A, T>(x, y, dy, dx, n, p);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void multimax_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, const multimax_params& p) {
  multimax_backward(DefaultArch{}, x, y, dy, dx, n, p);
}

// Adaptive-Scalable Entmax (Vasylenko et al. 2025): alpha-entmax of c x,
// c = s log n + b (double, then T), c x rounded to T as an input would be.
// alpha = 1 is ssmax. c <= 0 and special values as entmax_bisect on c x.
// Backward: dx = c entmax_backward(y, dy). Throws std::invalid_argument
// unless alpha >= 1, s and b are finite and c is finite in T.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void asentmax(A, const T* x, T* y, std::size_t n, detail::nodeduce_t<T> alpha, detail::nodeduce_t<T> s,
              detail::nodeduce_t<T> b = detail::nodeduce_t<T>(0)) {
  detail::check_asentmax("smax::asentmax", alpha, s, b, n);
  detail::asentmax<A, T>(x, y, n, alpha, s, b);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void asentmax(const T* x, T* y, std::size_t n, detail::nodeduce_t<T> alpha, detail::nodeduce_t<T> s,
              detail::nodeduce_t<T> b = detail::nodeduce_t<T>(0)) {
  asentmax(DefaultArch{}, x, y, n, alpha, s, b);
}
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void asentmax_backward(A, const T*, const T* y, const T* dy, T* dx, std::size_t n, detail::nodeduce_t<T> alpha,
                       detail::nodeduce_t<T> s, detail::nodeduce_t<T> b = detail::nodeduce_t<T>(0)) {
  detail::check_asentmax("smax::asentmax_backward", alpha, s, b, n);
  detail::asentmax_backward<A, T>(y, dy, dx, n, alpha, s, b);
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void asentmax_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, detail::nodeduce_t<T> alpha,
                       detail::nodeduce_t<T> s, detail::nodeduce_t<T> b = detail::nodeduce_t<T>(0)) {
  asentmax_backward(DefaultArch{}, x, y, dy, dx, n, alpha, s, b);
}

// Batched forms: every row the single-vector function of that row; n = cols
// (asentmax's log n). Arguments are checked once, before any row runs.
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void sigmoid_attention(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, detail::nodeduce_t<T> b,
                       executor* ex = nullptr) {
  sigmoid_attention(A{}, static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0, b);  // checks b
  detail::rows_map("smax::sigmoid_attention", x, y, ex,
                   [&](const T* xr, T* yr, std::size_t n, std::size_t) { detail::sigmoid_attention<A, T>(xr, yr, n, b); });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void sigmoid_attention(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, detail::nodeduce_t<T> b,
                       executor* ex = nullptr) {
  sigmoid_attention(DefaultArch{}, x, y, b, ex);
}
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void sa_softmax(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, bool normalized = false,
                executor* ex = nullptr) {
  detail::rows_map("smax::sa_softmax", x, y, ex,
                   [&](const T* xr, T* yr, std::size_t n, std::size_t) { detail::sa_softmax<A, T>(xr, yr, n, normalized); });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void sa_softmax(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, bool normalized = false,
                executor* ex = nullptr) {
  sa_softmax(DefaultArch{}, x, y, normalized, ex);
}
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void multimax(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, const multimax_params& p,
              executor* ex = nullptr) {
  detail::check_multimax("smax::multimax", p);
  detail::rows_map("smax::multimax", x, y, ex,
                   [&](const T* xr, T* yr, std::size_t n, std::size_t) { detail::multimax<A, T>(xr, yr, n, p); });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void multimax(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, const multimax_params& p,
              executor* ex = nullptr) {
  multimax(DefaultArch{}, x, y, p, ex);
}
template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>
void asentmax(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, detail::nodeduce_t<T> alpha,
              detail::nodeduce_t<T> s, detail::nodeduce_t<T> b = detail::nodeduce_t<T>(0), executor* ex = nullptr) {
  detail::check_asentmax("smax::asentmax", alpha, s, b, x.cols);
  detail::rows_map("smax::asentmax", x, y, ex, [&](const T* xr, T* yr, std::size_t n, std::size_t) {
    detail::asentmax<A, T>(xr, yr, n, alpha, s, b);
  });
}
template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>
void asentmax(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<T> y, detail::nodeduce_t<T> alpha,
              detail::nodeduce_t<T> s, detail::nodeduce_t<T> b = detail::nodeduce_t<T>(0), executor* ex = nullptr) {
  asentmax(DefaultArch{}, x, y, alpha, s, b, ex);
}

// Batched backward passes: (x, y, dy) -> dx row by row.
#define SMAX_SEEDS_EXPAND(...) __VA_ARGS__
#define SMAX_SEEDS_BATCHED_BACKWARD(fn, check, PARAMS, ARGS)                                                    \
  template <class A, class T, class = detail::enable_if_arch_t<A>, class = detail::enable_if_real_t<T>>        \
  void fn(A, matrix_view<const detail::nodeduce_t<T>> x, matrix_view<const detail::nodeduce_t<T>> y,           \
          matrix_view<const detail::nodeduce_t<T>> dy, matrix_view<T> dx, SMAX_SEEDS_EXPAND PARAMS, executor* ex = nullptr) { \
    check;                                                                                                     \
    detail::rows_map4("smax::" #fn, {"x", "y", "dy", "dx"}, x, y, dy, dx, ex,                                  \
                      [&](const T* xr, const T* yr, const T* dyr, T* dxr, std::size_t n) {                     \
                        fn(A{}, xr, yr, dyr, dxr, n, SMAX_SEEDS_EXPAND ARGS);                                         \
                      });                                                                                      \
  }                                                                                                            \
  template <class T, class = detail::enable_if_real_t<T>, class DefaultArch = xsimd::default_arch>             \
  void fn(matrix_view<const detail::nodeduce_t<T>> x, matrix_view<const detail::nodeduce_t<T>> y,              \
          matrix_view<const detail::nodeduce_t<T>> dy, matrix_view<T> dx, SMAX_SEEDS_EXPAND PARAMS, executor* ex = nullptr) { \
    fn(DefaultArch{}, x, y, dy, dx, SMAX_SEEDS_EXPAND ARGS, ex);                                                     \
  }
SMAX_SEEDS_BATCHED_BACKWARD(sigmoid_attention_backward,
                            if (!detail::is_finite(b)) throw std::invalid_argument("smax::sigmoid_attention_backward: b must be finite"),
                            (detail::nodeduce_t<T> b), (b))
SMAX_SEEDS_BATCHED_BACKWARD(sa_softmax_backward, (void)0, (bool normalized), (normalized))
SMAX_SEEDS_BATCHED_BACKWARD(multimax_backward, detail::check_multimax("smax::multimax_backward", p),
                            (const multimax_params& p), (p))
SMAX_SEEDS_BATCHED_BACKWARD(asentmax_backward, detail::check_asentmax("smax::asentmax_backward", alpha, s, b, x.cols),
                            (detail::nodeduce_t<T> alpha, detail::nodeduce_t<T> s, detail::nodeduce_t<T> b), (alpha, s, b))
#undef SMAX_SEEDS_BATCHED_BACKWARD
#undef SMAX_SEEDS_EXPAND

// ------------------------------------- the rest of the family on bf16 / fp16 --
// Every other function of the family takes bf16 or fp16 arrays too,
// scalar parameters float, and gives the float kernel's results on the
// widened arrays, each output rounded once (special values and bad
// arguments exactly as for float, nothing written before the checks).
// Each reads its 16-bit arrays through the float kernel's own passes where
// it can (below); the rows those passes leave take the widened form: the
// row's arrays widened to float (this thread's kept workspace up to 2^18
// elements, else allocated for the call: std::bad_alloc if that fails),
// the float kernel, each output rounded once.

// logsumexp, cross_entropy and cross_entropy_backward on 16-bit x read x as
// 16-bit (losses.hpp, half_family.hpp): no float copy of the row, the float
// kernels' results on the widened x; rows with NaN, +-inf or magnitudes
// beyond the single-pass range take the widened form above.
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>, double> logsumexp(A, const H* x, std::size_t n) {
  return detail::logsumexp_half<A, detail::arch_conversion<A>>(x, n, nullptr);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>, double> logsumexp(const H* x, std::size_t n) {
  return logsumexp(DefaultArch{}, x, n);
}
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>, double> cross_entropy(A, const H* x, std::size_t n,
                                                                                    std::size_t target,
                                                                                    float label_smoothing = 0) {
  return detail::cross_entropy_half<A, detail::arch_conversion<A>>(x, n, target, label_smoothing);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>, double> cross_entropy(const H* x, std::size_t n, std::size_t target,
                                                             float label_smoothing = 0) {
  return cross_entropy(DefaultArch{}, x, n, target, label_smoothing);
}
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> cross_entropy_backward(
    A, const H* x, std::size_t n, std::size_t target, double dloss, H* dx, float label_smoothing = 0) {
  detail::cross_entropy_backward_half<A, detail::arch_conversion<A>>(x, n, target, dloss, dx, label_smoothing, nullptr);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> cross_entropy_backward(const H* x, std::size_t n, std::size_t target,
                                                               double dloss, H* dx, float label_smoothing = 0) {
  cross_entropy_backward(DefaultArch{}, x, n, target, dloss, dx, label_smoothing);
}
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> cross_entropy_backward(
    A, const H* x, std::size_t n, std::size_t target, double dloss, H* dx, float label_smoothing, double logsumexp_x) {
  detail::cross_entropy_backward_half<A, detail::arch_conversion<A>>(x, n, target, dloss, dx, label_smoothing,
                                                                      &logsumexp_x);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> cross_entropy_backward(const H* x, std::size_t n, std::size_t target,
                                                               double dloss, H* dx, float label_smoothing,
                                                               double logsumexp_x) {
  cross_entropy_backward(DefaultArch{}, x, n, target, dloss, dx, label_smoothing, logsumexp_x);
}

// stablemax, log_stablemax, stablemax_backward, ssmax, softpick, the
// sparse family (sparsemax, entmax15, entmax_bisect, asentmax and their
// backward passes), softpick_backward (x86), gumbel_noise,
// gumbel_softmax with hard, sigmoid_attention and its backward, multimax,
// multimax_backward (x86), sa_softmax and sa_softmax_backward (x86, rows
// beyond 2^18) read (or write) them as 16-bit (half_family.hpp): no float
// copy of the row. The rows their fast paths leave (and the soft
// gumbel_softmax) take the widened form above.
#define SMAX_HALF_STABLEMAX(name, params, args)                                                                  \
  template <class A, class H>                                                                                    \
  std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> name(A, SMAX_HALF_PARENS params) {             \
    detail::name##_half<A, detail::arch_conversion<A>>(SMAX_HALF_PARENS args);                                    \
  }                                                                                                              \
  template <class H, class DefaultArch = xsimd::default_arch>                                                    \
  std::enable_if_t<detail::is_half_v<H>> name(SMAX_HALF_PARENS params) {                                         \
    name(DefaultArch{}, SMAX_HALF_PARENS args);                                                                  \
  }
SMAX_HALF_STABLEMAX(stablemax, (const H* x, H* y, std::size_t n), (x, y, n))
SMAX_HALF_STABLEMAX(log_stablemax, (const H* x, H* y, std::size_t n), (x, y, n))
SMAX_HALF_STABLEMAX(stablemax_backward, (const H* x, const H* dy, H* dx, std::size_t n), (x, dy, dx, n))
SMAX_HALF_STABLEMAX(ssmax, (const H* x, H* y, std::size_t n, float s, float b = 0), (x, y, n, s, b))
SMAX_HALF_STABLEMAX(softpick, (const H* x, H* y, std::size_t n, float eps = 1e-8f), (x, y, n, eps))
SMAX_HALF_STABLEMAX(sparsemax, (const H* x, H* y, std::size_t n), (x, y, n))
SMAX_HALF_STABLEMAX(softpick_backward,
                    (const H* x, const H* y, const H* dy, H* dx, std::size_t n, float eps = 1e-8f),
                    (x, y, dy, dx, n, eps))
SMAX_HALF_STABLEMAX(sigmoid_attention, (const H* x, H* y, std::size_t n, float b), (x, y, n, b))
SMAX_HALF_STABLEMAX(sigmoid_attention_backward,
                    (const H* x, const H* y, const H* dy, H* dx, std::size_t n, float b), (x, y, dy, dx, n, b))
SMAX_HALF_STABLEMAX(sa_softmax, (const H* x, H* y, std::size_t n, bool normalized = false), (x, y, n, normalized))
SMAX_HALF_STABLEMAX(multimax, (const H* x, H* y, std::size_t n, const multimax_params& p), (x, y, n, p))
SMAX_HALF_STABLEMAX(multimax_backward,
                    (const H* x, const H* y, const H* dy, H* dx, std::size_t n, const multimax_params& p),
                    (x, y, dy, dx, n, p))
SMAX_HALF_STABLEMAX(sa_softmax_backward,
                    (const H* x, const H* y, const H* dy, H* dx, std::size_t n, bool normalized = false),
                    (x, y, dy, dx, n, normalized))
SMAX_HALF_STABLEMAX(gumbel_noise, (H* g, std::size_t n, std::uint64_t seed, std::uint64_t offset = 0),
                    (g, n, seed, offset))
SMAX_HALF_STABLEMAX(gumbel_softmax,
                    (const H* logits, H* y, std::size_t n, float tau, std::uint64_t seed, bool hard = false),
                    (logits, y, n, tau, seed, hard))
SMAX_HALF_STABLEMAX(entmax15, (const H* x, H* y, std::size_t n), (x, y, n))
SMAX_HALF_STABLEMAX(entmax_bisect, (const H* x, H* y, std::size_t n, float alpha, int n_iter = 50),
                    (x, y, n, alpha, n_iter))
SMAX_HALF_STABLEMAX(asentmax, (const H* x, H* y, std::size_t n, float alpha, float s, float b = 0),
                    (x, y, n, alpha, s, b))
SMAX_HALF_STABLEMAX(sparsemax_backward, (const H* y, const H* dy, H* dx, std::size_t n), (y, dy, dx, n))
SMAX_HALF_STABLEMAX(entmax_backward, (const H* y, const H* dy, H* dx, std::size_t n, float alpha),
                    (y, dy, dx, n, alpha))
SMAX_HALF_STABLEMAX(asentmax_backward,
                    (const H* x, const H* y, const H* dy, H* dx, std::size_t n, float alpha, float s, float b = 0),
                    (x, y, dy, dx, n, alpha, s, b))
#undef SMAX_HALF_STABLEMAX

// The k largest entries of softmax(x) as topk_softmax (probs: k 16-bit
// values, each rounded once; index as for float), and sample, on 16-bit
// logits read as 16-bit (topk.hpp): no float copy of the row, the float
// kernels' results on the widened x (the same indices and draws).
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> topk_softmax(A, const H* x, std::size_t n,
                                                                            std::size_t k, H* probs,
                                                                            std::uint32_t* index) {
  detail::check_topk(n, k);
  detail::topk_softmax_half<A>(x, n, k, probs, index);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> topk_softmax(const H* x, std::size_t n, std::size_t k, H* probs,
                                                    std::uint32_t* index) {
  topk_softmax(DefaultArch{}, x, n, k, probs, index);
}
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>, std::size_t> sample(A, const H* logits, std::size_t n,
                                                                                   const sampling& s,
                                                                                   std::uint64_t seed,
                                                                                   std::uint64_t offset = 0) {
  detail::check_sampling(s, n);
  return detail::sample<A>(logits, n, s, seed, offset);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>, std::size_t> sample(const H* logits, std::size_t n, const sampling& s,
                                                           std::uint64_t seed, std::uint64_t offset = 0) {
  return sample(DefaultArch{}, logits, n, s, seed, offset);
}

// softmax, log_softmax and softmax_backward with the attention options on
// 16-bit x (and mask): the float forms on the widened arrays, each output
// rounded once; the options' scalars are float.
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> softmax(
    A, const H* x, H* y, std::size_t n, const softmax_options<detail::nodeduce_t<H>>& o) {
  detail::call_widened_options<detail::arch_conversion<A>>(
      n, o, [n](const float* xf, float* yf, const softmax_options<float>& fo) { softmax(A{}, xf, yf, n, fo); }, x, y);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> softmax(const H* x, H* y, std::size_t n,
                                               const softmax_options<detail::nodeduce_t<H>>& o) {
  softmax(DefaultArch{}, x, y, n, o);
}
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> log_softmax(
    A, const H* x, H* y, std::size_t n, const softmax_options<detail::nodeduce_t<H>>& o) {
  detail::call_widened_options<detail::arch_conversion<A>>(
      n, o, [n](const float* xf, float* yf, const softmax_options<float>& fo) { log_softmax(A{}, xf, yf, n, fo); },
      x, y);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> log_softmax(const H* x, H* y, std::size_t n,
                                                   const softmax_options<detail::nodeduce_t<H>>& o) {
  log_softmax(DefaultArch{}, x, y, n, o);
}
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> softmax_backward(
    A, const H* x, const H* y, const H* dy, H* dx, std::size_t n, const softmax_options<detail::nodeduce_t<H>>& o) {
  detail::call_widened_options<detail::arch_conversion<A>>(
      n, o,
      [n](const float* xf, const float* yf, const float* dyf, float* dxf, const softmax_options<float>& fo) {
        softmax_backward(A{}, xf, yf, dyf, dxf, n, fo);
      },
      x, y, dy, dx);
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> softmax_backward(const H* x, const H* y, const H* dy, H* dx, std::size_t n,
                                                        const softmax_options<detail::nodeduce_t<H>>& o) {
  softmax_backward(DefaultArch{}, x, y, dy, dx, n, o);
}

// Batched: every row the single-row 16-bit form; the float batched form's
// checks (on no rows of the same width) run first.
#define SMAX_HALF_BATCHED_XY_CODE(H_, name, params, args)                                                       \
  template <class A, class H>                                                                                   \
  std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> name(                                          \
      A, matrix_view<const detail::nodeduce_t<H>> x, matrix_view<H> y SMAX_HALF_PARENS params,                  \
      executor* ex = nullptr) {                                                                                 \
    name(A{}, matrix_view<const float>(nullptr, 0, x.cols), matrix_view<float>(nullptr, 0, x.cols)              \
                  SMAX_HALF_PARENS args);                                                                       \
    detail::check_shapes("smax::" #name, x, y);                                                                 \
    detail::for_each_half_row(x.rows, x.cols, ex, [&](std::size_t r) {                                          \
      name(A{}, x.row(r), y.row(r), x.cols SMAX_HALF_PARENS args);                                              \
    });                                                                                                         \
  }                                                                                                             \
  template <class H, class DefaultArch = xsimd::default_arch>                                                   \
  std::enable_if_t<detail::is_half_v<H>> name(matrix_view<const detail::nodeduce_t<H>> x,                       \
                                              matrix_view<H> y SMAX_HALF_PARENS params, executor* ex = nullptr) { \
    name(DefaultArch{}, x, y SMAX_HALF_PARENS args, ex);                                                        \
  }
SMAX_HALF_BATCHED_XY(H, SMAX_HALF_BATCHED_XY_CODE)
#undef SMAX_HALF_BATCHED_XY_CODE

#define SMAX_HALF_BATCHED_YDYDX_CODE(H_, name, a, params, args)                                                 \
  template <class A, class H>                                                                                   \
  std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> name(                                          \
      A, matrix_view<const detail::nodeduce_t<H>> a, matrix_view<const detail::nodeduce_t<H>> dy,               \
      matrix_view<H> dx SMAX_HALF_PARENS params, executor* ex = nullptr) {                                      \
    name(A{}, matrix_view<const float>(nullptr, 0, dx.cols), matrix_view<const float>(nullptr, 0, dx.cols),     \
         matrix_view<float>(nullptr, 0, dx.cols) SMAX_HALF_PARENS args);                                        \
    detail::check_shapes("smax::" #name, a, dx, #a, "dx");                                                      \
    detail::check_shapes("smax::" #name, dy, dx, "dy", "dx");                                                   \
    detail::for_each_half_row(dx.rows, dx.cols, ex, [&](std::size_t r) {                                        \
      name(A{}, a.row(r), dy.row(r), dx.row(r), dx.cols SMAX_HALF_PARENS args);                                 \
    });                                                                                                         \
  }                                                                                                             \
  template <class H, class DefaultArch = xsimd::default_arch>                                                   \
  std::enable_if_t<detail::is_half_v<H>> name(matrix_view<const detail::nodeduce_t<H>> a,                       \
                                              matrix_view<const detail::nodeduce_t<H>> dy,                      \
                                              matrix_view<H> dx SMAX_HALF_PARENS params, executor* ex = nullptr) { \
    name(DefaultArch{}, a, dy, dx SMAX_HALF_PARENS args, ex);                                                   \
  }
SMAX_HALF_BATCHED_YDYDX(H, SMAX_HALF_BATCHED_YDYDX_CODE)
#undef SMAX_HALF_BATCHED_YDYDX_CODE

#define SMAX_HALF_BATCHED_XYDYDX_CODE(H_, name, params, args)                                                   \
  template <class A, class H>                                                                                   \
  std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> name(                                          \
      A, matrix_view<const detail::nodeduce_t<H>> x, matrix_view<const detail::nodeduce_t<H>> y,                \
      matrix_view<const detail::nodeduce_t<H>> dy, matrix_view<H> dx SMAX_HALF_PARENS params,                   \
      executor* ex = nullptr) {                                                                                 \
    const matrix_view<const float> none(nullptr, 0, dx.cols);                                                   \
    name(A{}, none, none, none, matrix_view<float>(nullptr, 0, dx.cols) SMAX_HALF_PARENS args);                 \
    detail::check_shapes("smax::" #name, x, dx, "x", "dx");                                                     \
    detail::check_shapes("smax::" #name, y, dx, "y", "dx");                                                     \
    detail::check_shapes("smax::" #name, dy, dx, "dy", "dx");                                                   \
    detail::for_each_half_row(dx.rows, dx.cols, ex, [&](std::size_t r) {                                        \
      name(A{}, x.row(r), y.row(r), dy.row(r), dx.row(r), dx.cols SMAX_HALF_PARENS args);                       \
    });                                                                                                         \
  }                                                                                                             \
  template <class H, class DefaultArch = xsimd::default_arch>                                                   \
  std::enable_if_t<detail::is_half_v<H>> name(                                                                  \
      matrix_view<const detail::nodeduce_t<H>> x, matrix_view<const detail::nodeduce_t<H>> y,                   \
      matrix_view<const detail::nodeduce_t<H>> dy, matrix_view<H> dx SMAX_HALF_PARENS params,                   \
      executor* ex = nullptr) {                                                                                 \
    name(DefaultArch{}, x, y, dy, dx SMAX_HALF_PARENS args, ex);                                                \
  }
SMAX_HALF_BATCHED_XYDYDX(H, SMAX_HALF_BATCHED_XYDYDX_CODE)
#undef SMAX_HALF_BATCHED_XYDYDX_CODE

// gumbel_softmax: row r draws with gumbel_row_seed(seed, r), as for float.
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> gumbel_softmax(
    A, matrix_view<const detail::nodeduce_t<H>> logits, matrix_view<H> y, float tau, std::uint64_t seed,
    bool hard = false, executor* ex = nullptr) {
  gumbel_softmax(A{}, static_cast<const float*>(nullptr), static_cast<float*>(nullptr), 0, tau, seed, hard);
  detail::check_shapes("smax::gumbel_softmax", logits, y);
  detail::for_each_half_row(logits.rows, logits.cols, ex, [&](std::size_t r) {
    gumbel_softmax(A{}, logits.row(r), y.row(r), logits.cols, tau, gumbel_row_seed(seed, r), hard);
  });
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> gumbel_softmax(matrix_view<const detail::nodeduce_t<H>> logits,
                                                      matrix_view<H> y, float tau, std::uint64_t seed,
                                                      bool hard = false, executor* ex = nullptr) {
  gumbel_softmax(DefaultArch{}, logits, y, tau, seed, hard, ex);
}

// Batched attention rows of 16-bit scores (attention_options<H>: the mask
// H, the scalars, slopes and sinks float): row r is the single-row 16-bit
// call with row r's options; the checks as for float.
#define SMAX_HALF_ATTENTION_ROWS(fn)                                                                           \
  template <class A, class H>                                                                                 \
  std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> fn(                                          \
      A, matrix_view<const detail::nodeduce_t<H>> x, matrix_view<H> y,                                        \
      const attention_options<detail::nodeduce_t<H>>& o, executor* ex = nullptr) {                            \
    detail::half_attention_rows("smax::" #fn, x, y, o, ex,                                                    \
                                [](const H* xr, H* yr, std::size_t n, const softmax_options<H>& so) {         \
                                  fn(A{}, xr, yr, n, so);                                                     \
                                });                                                                           \
  }                                                                                                           \
  template <class H, class DefaultArch = xsimd::default_arch>                                                 \
  std::enable_if_t<detail::is_half_v<H>> fn(matrix_view<const detail::nodeduce_t<H>> x, matrix_view<H> y,     \
                                            const attention_options<detail::nodeduce_t<H>>& o,                \
                                            executor* ex = nullptr) {                                         \
    fn(DefaultArch{}, x, y, o, ex);                                                                           \
  }
SMAX_HALF_ATTENTION_ROWS(softmax)
SMAX_HALF_ATTENTION_ROWS(log_softmax)
#undef SMAX_HALF_ATTENTION_ROWS
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> softmax_backward(
    A, matrix_view<const detail::nodeduce_t<H>> x, matrix_view<const detail::nodeduce_t<H>> y,
    matrix_view<const detail::nodeduce_t<H>> dy, matrix_view<H> dx, const attention_options<detail::nodeduce_t<H>>& o,
    executor* ex = nullptr) {
  detail::half_attention_backward_rows(
      x, y, dy, dx, o, ex,
      [](const H* xr, const H* yr, const H* dyr, H* dxr, std::size_t n, const softmax_options<H>& so) {
        softmax_backward(A{}, xr, yr, dyr, dxr, n, so);
      });
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> softmax_backward(matrix_view<const detail::nodeduce_t<H>> x,
                                                        matrix_view<const detail::nodeduce_t<H>> y,
                                                        matrix_view<const detail::nodeduce_t<H>> dy, matrix_view<H> dx,
                                                        const attention_options<detail::nodeduce_t<H>>& o,
                                                        executor* ex = nullptr) {
  softmax_backward(DefaultArch{}, x, y, dy, dx, o, ex);
}

// cross_entropy and its backward over rows of 16-bit logits: each row's
// loss (and logsumexp) the single-row 16-bit call's, the reduction and the
// checks as for float.
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>, double> cross_entropy(
    A, matrix_view<const H> x, const std::int64_t* targets, const loss_options& o = {}, double* row_loss = nullptr,
    double* row_lse = nullptr, executor* ex = nullptr) {
  return detail::half_cross_entropy_rows(
      x, targets, o, row_loss, row_lse, ex, [](const H* xr, std::size_t n) { return logsumexp(A{}, xr, n); },
      [](const H* xr, std::size_t n, std::size_t t, float ls) { return cross_entropy(A{}, xr, n, t, ls); });
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>, double> cross_entropy(matrix_view<const H> x, const std::int64_t* targets,
                                                             const loss_options& o = {}, double* row_loss = nullptr,
                                                             double* row_lse = nullptr, executor* ex = nullptr) {
  return cross_entropy(DefaultArch{}, x, targets, o, row_loss, row_lse, ex);
}
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> cross_entropy_backward(
    A, matrix_view<const detail::nodeduce_t<H>> x, const std::int64_t* targets, double dloss, matrix_view<H> dx,
    const loss_options& o = {}, const double* row_dloss = nullptr, const double* lse = nullptr,
    executor* ex = nullptr) {
  detail::half_cross_entropy_backward_rows(
      x, targets, dloss, dx, o, row_dloss, lse, ex,
      [](const H* xr, std::size_t n, std::size_t t, double g, H* dr, float ls, const double* l) {
        if (l)
          cross_entropy_backward(A{}, xr, n, t, g, dr, ls, *l);
        else
          cross_entropy_backward(A{}, xr, n, t, g, dr, ls);
      });
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> cross_entropy_backward(matrix_view<const detail::nodeduce_t<H>> x,
                                                              const std::int64_t* targets, double dloss,
                                                              matrix_view<H> dx, const loss_options& o = {},
                                                              const double* row_dloss = nullptr,
                                                              const double* lse = nullptr, executor* ex = nullptr) {
  cross_entropy_backward(DefaultArch{}, x, targets, dloss, dx, o, row_dloss, lse, ex);
}

// topk_softmax, sample and logsumexp over rows of 16-bit logits (the float
// forms' checks and row seeds; each row the single-row 16-bit form).
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> topk_softmax(
    A, matrix_view<const detail::nodeduce_t<H>> x, std::size_t k, matrix_view<H> probs,
    matrix_view<std::uint32_t> index, executor* ex = nullptr) {
  detail::half_topk_rows(x, k, probs, index, ex,
                         [](const H* xr, std::size_t n, std::size_t kk, H* p, std::uint32_t* ix) {
                           topk_softmax(A{}, xr, n, kk, p, ix);
                         });
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> topk_softmax(matrix_view<const detail::nodeduce_t<H>> x, std::size_t k,
                                                    matrix_view<H> probs, matrix_view<std::uint32_t> index,
                                                    executor* ex = nullptr) {
  topk_softmax(DefaultArch{}, x, k, probs, index, ex);
}
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> sample(A, matrix_view<const H> logits,
                                                                      std::size_t* out, const sampling& s,
                                                                      std::uint64_t seed, std::uint64_t offset = 0,
                                                                      executor* ex = nullptr) {
  detail::half_sample_rows(logits, out, s, seed, offset, ex,
                           [](const H* xr, std::size_t n, const sampling& ss, std::uint64_t sd, std::uint64_t off) {
                             return sample(A{}, xr, n, ss, sd, off);
                           });
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> sample(matrix_view<const H> logits, std::size_t* out, const sampling& s,
                                              std::uint64_t seed, std::uint64_t offset = 0, executor* ex = nullptr) {
  sample(DefaultArch{}, logits, out, s, seed, offset, ex);
}
template <class A, class H>
std::enable_if_t<detail::is_arch_v<A> && detail::is_half_v<H>> logsumexp(A, matrix_view<const H> x, double* out,
                                                                         executor* ex = nullptr) {
  detail::half_logsumexp_rows(x, out, ex, [](const H* xr, std::size_t n) { return logsumexp(A{}, xr, n); });
}
template <class H, class DefaultArch = xsimd::default_arch>
std::enable_if_t<detail::is_half_v<H>> logsumexp(matrix_view<const H> x, double* out, executor* ex = nullptr) {
  logsumexp(DefaultArch{}, x, out, ex);
}


}  // namespace smax
