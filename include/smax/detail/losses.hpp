// smax — training losses on logits: logsumexp, cross-entropy and its
// gradient, single vectors and batched rows.
//
//   logsumexp              one read of x: two_pass_sum's (mantissa, exponent)
//                          sum, no max pass
//   cross_entropy          the same read (label smoothing: mean(x) summed
//                          block by block while the block is in L2)
//   cross_entropy_backward one read and one write given a saved logsumexp,
//                          one more read without it
//
// Results are double. No kernel here forms a subnormal: every exp is taken
// on an argument clamped where its (scaled) term would fall below the
// smallest normal T, and selected to exactly 0 there (normal_exp, exp.hpp).
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../types.hpp"
#include "batched.hpp"
#include "exp.hpp"
#include "loops.hpp"
#include "softmax.hpp"
#include "softmax_half.hpp"

namespace smax {

namespace detail {

// log(sum e^x) by max, then sum of e^(x - m): for what two_pass_sum does not
// accept (NaN, +-inf, extreme magnitudes, all -inf). A second read of x.
template <class A, class T>
double logsumexp_max(const T* x, std::size_t n) noexcept {
  constexpr double inf = std::numeric_limits<double>::infinity();
  const T m = reduce_max<A>(x, n);
  if (!is_finite(m)) {
    // reduce_max may drop a NaN (x86 max): look for one.
    for (std::size_t i = 0; i < n; ++i)
      if (x[i] != x[i]) return std::numeric_limits<double>::quiet_NaN();
    return m > 0 ? inf : -inf;
  }
  double s, shift;
  if (use_split(m)) {
    double r;
    const T E = ref_exponent(m, r);
    s = sum_map<A>(x, static_cast<T*>(nullptr), n, normal_exp<A, T>(E, T(1)));
    shift = static_cast<double>(m) - r;  // = E ln2
  } else {
    // |m| beyond split_limit: every term that matters lies within a factor
    // two of m, so v - m is exact there (see exp.hpp).
    const xsimd::batch<T, A> mb(m);
    const normal_exp<A, T> e(T(0), T(1));
    s = sum_map<A>(x, static_cast<T*>(nullptr), n, [&](xsimd::batch<T, A> v) SMAX_LAMBDA_INLINE { return e(v - mb); });
    shift = static_cast<double>(m);
  }
  return std::log(s) + shift;  // NaN s (a NaN in x) gives NaN
}

// logsumexp of x[0..n) in one read into lse; with meanx, also the mean of x
// (the block's second read, for the sum, hits L2). x may be 16-bit (read as
// such, summed in float: the same sums as on the widened x). False, with
// lse not set (*meanx is), where two_pass_sum cannot take x: NaN, +-inf,
// magnitudes beyond its range, an empty sum; logsumexp_max takes those.
template <class A, class S>
bool logsumexp_one_read(const S* x, std::size_t n, double* meanx, double& lse) noexcept {
  using T = compute_t<S>;
  using B = xsimd::batch<T, A>;
  constexpr double ln2 = 0.6931471805599453;
  if (n == 0) {
    if (meanx) *meanx = 0;
    lse = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (!meanx) {
    double s;
    T E;
    if (!two_pass_sum<A>(x, n, s, E)) return false;
    lse = std::log(s) + static_cast<double>(E) * ln2;
    return true;
  }
  const std::size_t nb = (n + block_elems - 1) / block_elems;
  // x is summed as x 2^-k, 2^k >= 2n (exact; mul_summable drops a product
  // below 2^mantissa_bits times T's smallest normal number min, so that no
  // partial sum of either sign is subnormal: each dropped x is below about
  // 2^(k+1+mantissa_bits) min, and the mean moves by at most about
  // 4n 2^mantissa_bits min; mul_normal's normal products cancelled to a
  // subnormal lane sum, SSE2, a max near 96 beside tiny logits):
  // no partial sum can overflow, as n logits near -FLT_MAX did, and the mean
  // is scaled back only after the division.
  const int k = std::ilogb(static_cast<double>(n)) + 2;
  const B down(std::ldexp(T(1), -k));
  double total_x = 0, s = 0;
  T Emax = -std::numeric_limits<T>::infinity();
  bool ok = true;
  // Blocks in order; (s, E) merged as it goes: s is rescaled by a power of
  // two when a later block's E is larger (exact).
  for (std::size_t b = 0; b < nb; ++b) {
    const S* xb = x + b * block_elems;
    const std::size_t len = std::min(block_elems, n - b * block_elems);
    double sb = 0;
    T Eb = T(0);
    if (ok) ok = two_pass_sum<A>(xb, len, sb, Eb);
    total_x += sum_map<A>(xb, static_cast<T*>(nullptr), len, [&](B v) { return mul_summable<A, T>(v, down); });
    if (!ok) continue;
    if (Eb > Emax) {
      s = (b == 0) ? sb : ldexp_flushed(s, static_cast<int>(Emax - Eb)) + sb;
      Emax = Eb;
    } else {
      s += ldexp_flushed(sb, static_cast<int>(Eb - Emax));
    }
  }
  // (a mean below double's normal range is taken as 0, not formed: the
  // sum is zeroed before the division, which then cannot underflow)
  const double nd = static_cast<double>(n);
  const double kept = std::fabs(total_x) < std::numeric_limits<double>::min() * nd ? 0.0 : total_x;
  *meanx = std::ldexp(kept / nd, k);
  if (!(ok && s > 0 && s < std::numeric_limits<double>::infinity())) return false;
  lse = std::log(s) + static_cast<double>(Emax) * ln2;
  return true;
}

template <class A, class T>
double logsumexp_sum(const T* x, std::size_t n, double* meanx) noexcept {
  double lse;
  return logsumexp_one_read<A>(x, n, meanx, lse) ? lse : logsumexp_max<A>(x, n);
}

template <class T>
void check_loss_args(const char* fn, std::size_t n, std::size_t target, float ls) {
  if (target >= n) throw std::invalid_argument(std::string(fn) + ": target must be < n");
  if (!(ls >= 0.0f && ls <= 1.0f)) throw std::invalid_argument(std::string(fn) + ": label_smoothing must be in [0, 1]");
}

// cross_entropy given x's logsumexp and (label smoothing) its sum.
template <class T>
double cross_entropy_from(const T* x, std::size_t target, float ls, double lse, double meanx) noexcept {
  const double xt = static_cast<double>(x[target]);
  if (ls == 0.0f) return lse - xt;
  const double l = ls;
  // lse - ((1 - l) xt + l mean) as (1 - l)(lse - xt) + l (lse - mean), each
  // part >= 0 formed from products of at most T's largest value: nothing
  // overflows unless the loss itself exceeds double's range.
  const double k = 1.0 - l;
  return (k * lse - k * xt) + (l * lse - l * meanx);
}

template <class A, class T>
double cross_entropy(const T* x, std::size_t n, std::size_t target, float ls) noexcept {
  double meanx = 0;
  const double lse = logsumexp_sum<A>(x, n, ls > 0.0f ? &meanx : nullptr);
  return cross_entropy_from(x, target, ls, lse, meanx);
}

// dx = dloss (softmax(x) - q), q = (1 - ls) onehot(target) + ls / n, from
// lse = logsumexp(x): one read of x and one write of dx (dx may be x).
//   dloss e^(x - lse) = s_m e^x 2^-E2, with lse = E ln2 + r (|r| <= ln2/2),
//   dloss e^-r = s_m 2^k (s_m in [0.5, 1), k capped at 100 so the
//   polynomial's scaled coefficients stay normal), E2 = E - k: normal_exp.
// x and dx may be 16-bit (S = D = bf16 or fp16: read as such, each dx
// computed in float and rounded once, the bits of the float kernel on the
// widened x, narrowed); those return false, with nothing written, for what
// takes the float kernel's other paths (NaN, a non-finite or extreme lse).
template <class A, class S, class D>
SMAX_FLATTEN bool cross_entropy_backward_from(const S* x, std::size_t n, std::size_t target, double dloss, D* dx,
                                              float ls, double lse) noexcept {
  using T = compute_t<S>;
  using B = xsimd::batch<T, A>;
  using C = exp_constants<double>;
  constexpr bool half = is_half_v<S>;
  static_assert(std::is_same<S, D>::value, "x and dx have one type");
  const double l = ls;
  const double q_rest = l / static_cast<double>(n);
  const double q_target = (1.0 - l) + q_rest;
  // (before dx, maybe x, is written)
  const double xt = [&] {
    if constexpr (half)
      return static_cast<double>(to_float(x[target]));
    else
      return static_cast<double>(x[target]);
  }();
  // The constant dloss ls / n: 0 when so small that e - c could come out
  // subnormal (a T below min 2^(digits+2) has no such difference with a
  // normal value unless it is 0; that drops < 1e-30 absolute for float).
  const double c_d = dloss * q_rest;
  const double c_min = static_cast<double>(std::numeric_limits<T>::min()) * std::ldexp(1.0, std::numeric_limits<T>::digits + 2);
  const T c = to_normal<T>(c_d, c_min);
  double p_target = exp_flushed(xt - lse);
  const auto put_target = [&](double v) {
    if constexpr (half)
      dx[target] = from_float<D>(to_normal<T>(v));
    else
      dx[target] = to_normal<T>(v);
  };
  if (!(lse == lse) || !(dloss == dloss)) {
    if constexpr (half) {
      return false;
    } else {
      fill(dx, n, std::numeric_limits<T>::quiet_NaN());
      return true;
    }
  }
  if (!is_finite(lse)) {
    if constexpr (half) {
      return false;
    } else {
      // softmax by the family's rules (+inf entries share, all -inf: zeros),
      // then the scalar gradient.
      softmax_nonfinite(x, dx, n, result_form::probabilities);
      const double pt = static_cast<double>(dx[target]);
      for (std::size_t i = 0; i < n; ++i) dx[i] = to_normal<T>(dloss * static_cast<double>(dx[i]) - c_d);
      dx[target] = to_normal<T>(dloss * (pt - q_target));
      return true;
    }
  }
  // s_m 2^k = f (the factor beside e^x 2^-E or e^(x - m)), s_m in [0.5, 1)
  // unless k is capped at 100 (then |s_m| <= 2^28 for float's dloss range);
  // the sign rides on s_m (the polynomial is linear in it).
  const auto split_factor = [](double f, int& k) {
    std::frexp(f, &k);
    k = std::min(k, 100);
    return f * std::ldexp(1.0, -k);
  };
  const B cb(c);
  // 16-bit dx: no e(v) - c is subnormal (e(v) is 0 or normal; c is 0 or at
  // least c_min and has e(v)'s sign), so the bf16 rounding may skip its
  // subnormal test (finite_normal). NaN and inf still reach it (a saved lse
  // beside NaN or +inf in x, an infinite or huge dloss): inf rounds
  // correctly either way, and every NaN here has its low 16 bits zero (a
  // widened bf16, or the default NaN), which the bf16 rounding keeps NaN
  // and quiet. fp16 takes `any`: SSE2's integer form turns NaN into inf
  // without its select (the others ignore the flag).
  const auto write = [&](auto&& e) {
    const auto term = [=](B v) SMAX_LAMBDA_INLINE { return e(v) - cb; };
    if constexpr (half)
      map_half<A, std::is_same<D, bf16>::value ? narrow_input::finite_normal : narrow_input::any>(x, dx, n, term);
    else
      map<A, staged>(x, dx, n, term);
  };
  if (dloss == 0) {
    if constexpr (half)
      fill(dx, n, D(0.0f));
    else
      map<A>(x, dx, n, [](B) { return B(T(0)); });
  } else if (std::fabs(lse) <= exp_constants<T>::split_limit) {
    const double E = std::nearbyint(lse * 1.4426950408889634);
    const double r = std::fma(-E, C::ln2_f1, lse) - E * C::ln2_f2;
    int k;
    const double s = split_factor(dloss * std::exp(-r), k);
    write(normal_exp<A, T>(static_cast<T>(E - k), static_cast<T>(s)));
  } else if constexpr (half) {
    return false;
  } else {
    // lse beyond split_limit (float: every x below about -4096 or above
    // 4096): shift by the max m, exact wherever a term matters (exp.hpp),
    // and take log sum e^(x - m) again: lse itself, a double near |m|, may
    // have lost it (at m = FLT_MAX its ulp is 2^75). Two more reads.
    const T m = reduce_max<A>(x, n);
    const B mb(m);
    const normal_exp<A, T> e1(T(0), T(1));
    const double rel = std::log(sum_map<A>(x, static_cast<T*>(nullptr), n, [&](B v) { return e1(v - mb); }));
    p_target = exp_flushed((xt - static_cast<double>(m)) - rel);
    int k;
    const double s = split_factor(dloss * std::exp(-rel), k);
    const normal_exp<A, T> e(static_cast<T>(-k), static_cast<T>(s));
    write([&](B v) { return e(v - mb); });
  }
  put_target(dloss * (p_target - q_target));
  return true;
}

template <class A, class T>
void cross_entropy_backward(const T* x, std::size_t n, std::size_t target, double dloss, T* dx, float ls,
                            double lse) noexcept {
  cross_entropy_backward_from<A>(x, n, target, dloss, dx, ls, lse);
}

// ---- batched rows ----

template <class T>
void check_targets(const char* fn, std::size_t rows, std::size_t cols, const std::int64_t* targets,
                   const loss_options& o) {
  const std::string f(fn);
  if (!(o.label_smoothing >= 0.0f && o.label_smoothing <= 1.0f))
    throw std::invalid_argument(f + ": label_smoothing must be in [0, 1]");
  if (rows && !targets) throw std::invalid_argument(f + ": targets must not be null");
  for (std::size_t r = 0; r < rows; ++r) {
    const std::int64_t t = targets[r];
    if (t == o.ignore_index) continue;
    if (t < 0 || static_cast<std::uint64_t>(t) >= cols)
      throw std::invalid_argument(f + ": targets[" + std::to_string(r) + "] must be in [0, cols) or ignore_index");
  }
}

template <class T>
void check_view(const char* fn, const matrix_view<T>& x, const char* name) {
  if (x.stride < x.cols) throw std::invalid_argument(std::string(fn) + ": " + name + ".stride must be >= " + name + ".cols");
  if (x.rows && x.cols && !x.data) throw std::invalid_argument(std::string(fn) + ": null data for a non-empty matrix");
}


template <class A, class T>
void logsumexp_rows(matrix_view<const T> x, double* out, executor* ex) {
  for_each_row_index(x.rows, x.cols, default_executor(ex),
                     [&](std::size_t r) { out[r] = logsumexp_sum<A>(x.row(r), x.cols, nullptr); });
  if (x.cols == 0)
    for (std::size_t r = 0; r < x.rows; ++r) out[r] = -std::numeric_limits<double>::infinity();
}

// The batched loss's reduction of the rows' losses, summed in row order on
// this thread (deterministic for any executor); none gives 0.
inline double reduce_losses(const double* loss, const std::int64_t* targets, std::size_t rows,
                            const loss_options& o) noexcept {
  if (o.reduce == reduction::none) return 0;
  double s = 0;
  std::size_t count = 0;
  for (std::size_t r = 0; r < rows; ++r)
    if (targets[r] != o.ignore_index) {
      s += loss[r];
      ++count;
    }
  if (o.reduce == reduction::sum) return s;
  return count ? s / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN();
}

// The gradient's factor per row for the sum and mean reductions.
inline double loss_gradient_scale(const std::int64_t* targets, std::size_t rows, double dloss,
                                  const loss_options& o) noexcept {
  if (o.reduce != reduction::mean) return dloss;
  std::size_t count = 0;
  for (std::size_t r = 0; r < rows; ++r) count += (targets[r] != o.ignore_index);
  return count ? dloss / static_cast<double>(count) : 0.0;
}

// Every row's loss (0 for an ignored row) into loss, and its logsumexp into
// lse when not null; returns the reduction, summed in row order on this
// thread (deterministic for any executor).
template <class A, class T>
double cross_entropy_rows(matrix_view<const T> x, const std::int64_t* targets, const loss_options& o, double* loss,
                          double* lse, executor* ex) {
  std::vector<double> own;
  if (!loss) {
    own.resize(x.rows);
    loss = own.data();
  }
  const float ls = o.label_smoothing;
  if (x.cols == 0) {
    for (std::size_t r = 0; r < x.rows; ++r) loss[r] = 0;  // every row ignored (checked: no target fits)
  }
  for_each_row_index(x.rows, x.cols, default_executor(ex), [&](std::size_t r) {
    const std::int64_t t = targets[r];
    const T* xr = x.row(r);
    double meanx = 0;
    const double l = logsumexp_sum<A>(xr, x.cols, ls > 0.0f ? &meanx : nullptr);
    if (lse) lse[r] = l;
    loss[r] = (t == o.ignore_index) ? 0.0 : cross_entropy_from(xr, static_cast<std::size_t>(t), ls, l, meanx);
  });
  return reduce_losses(loss, targets, x.rows, o);
}

template <class A, class T>
void cross_entropy_backward_rows(matrix_view<const T> x, const std::int64_t* targets, double dloss,
                                 matrix_view<T> dx, const loss_options& o, const double* row_dloss,
                                 const double* lse, executor* ex) {
  const double scale = loss_gradient_scale(targets, x.rows, dloss, o);
  for_each_row_index(x.rows, x.cols, default_executor(ex), [&](std::size_t r) {
    const std::int64_t t = targets[r];
    T* dr = dx.row(r);
    if (t == o.ignore_index) return fill(dr, x.cols, T(0));
    const T* xr = x.row(r);
    const double g = (o.reduce == reduction::none) ? row_dloss[r] : scale;
    const double l = lse ? lse[r] : logsumexp_sum<A>(xr, x.cols, nullptr);
    cross_entropy_backward<A>(xr, x.cols, static_cast<std::size_t>(t), g, dr, o.label_smoothing, l);
  });
}

}  // namespace detail
}  // namespace smax
