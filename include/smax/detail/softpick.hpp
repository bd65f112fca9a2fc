// smax — softpick (Zuhri et al. 2025): with M = max(0, max x),
//     y_i = relu(e^(x_i - M) - e^(-M)) / (sum_j |e^(x_j - M) - e^(-M)| + eps)
// rectified (x_i <= 0 gives 0) and not normalized to one; -inf entries are
// masked out of the sum (|0 - e^(-M)| would otherwise add e^(-M)).
//
// Every term is e^(-M) |e^x - 1|, so the kernel sums a_j = |e^(x_j) - 1|
// without knowing M, in the two-pass (p, 2^K) form of softmax two_pass:
//     x >= 1/4:   e^x - 1 = (p - 2^-K) 2^K        (e^x = p 2^K, K >= 0)
//     x <= -1/4:  1 - e^x = 1 - p 2^K              (K <= 0)
//     |x| < 1/4:  |expm1(x)| by its Taylor series (no cancellation)
// so the error is flat: no e^(x - M) - e^(-M) cancellation near x = 0.
// Pass 1 accumulates a_j 2^-E per lane and the max; with the largest lane
// exponent Emax and that sum s,
//     y_i = a_i 2^(K_i - Emax) / (s + eps e^M 2^-Emax)   (x_i > 0; else 0)
// and pass 2 writes that: two reads and one write, no temporary.
//
// Fallbacks: NaN -> all NaN; +inf entries share 1 / (count + eps) (the limit
// of the formula), the rest 0; max x beyond the two-pass range (4096 float,
// 2^20 double) -> three passes where e^(-M) is 0 in T, i.e. the numerators
// are plain e^(x - M); eps and every |x| below 2^-100 (a denominator whose
// inverse overflows T) -> a scalar loop in double / long double.
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>

#include "exp.hpp"
#include "loops.hpp"
#include "pair_loops.hpp"
#include "softmax.hpp"

namespace smax {
namespace detail {

// e^x = 2^K (1 + em1) with em1 = expm1(d) of the reduced argument
// d = x - K ln2 (|d| <= ln2/2): exp.hpp's range reduction and polynomial,
// stopped before its final "+ 1", so that em1 keeps full relative accuracy
// where e^x - 1 cancels (K = 0).
template <class A, class T>
SMAX_INLINE void exp_parts(xsimd::batch<T, A> x, xsimd::batch<T, A>& em1, xsimd::batch<T, A>& K) noexcept {
  using B = xsimd::batch<T, A>;
  using C = exp_constants<T>;
  K = round_mul<A, T>(x, B(C::log2e));
  const B d = cody_waite<A, T>(x, K), dq = poly_argument<A, T>(d);
  constexpr int nc = C::degree - 1;  // c2 .. c_degree
  B q(C::c[nc - 1]);
  for (int i = nc - 2; i >= 0; --i) q = fma_<A, T>(q, dq, B(C::c[i]));
  em1 = fma_<A, T>(q, dq, B(T(1))) * d;  // d (1 + d/2 + ...)
}

// 2^k for integer-valued k <= 127 (float) / 1023 (double), and twice the
// smallest normal number for every k below: never 0, never subnormal, so
// the terms built on it below need no select (a k below the normal range
// stands for a term that is negligible where it is used). k + bias in the
// low mantissa bits of k + bias + round_magic (pow2_biased).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> pow2_clamped(xsimd::batch<T, A> k) noexcept {
  using B = xsimd::batch<T, A>;
  using C = exp_constants<T>;
  return pow2_biased<A, T>(xsimd::max(k, B(T(std::numeric_limits<T>::min_exponent))) +
                           B(C::round_magic + T(C::exponent_bias)));
}

// 2^k as pow2_clamped, and exactly 0 for k below the normal range (never a
// subnormal, whose arithmetic costs a microcode assist on x86): from
// min_k_normal + 2 down, so every nonzero 2^k is at least 2^-122 and
// |e^x - 1| 2^k (at least 0.22 2^k) is a normal number.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> pow2_flush(xsimd::batch<T, A> k) noexcept {
  using B = xsimd::batch<T, A>;
  return xsimd::select(k < B(exp_constants<T>::min_k_normal + T(2)), B(T(0)), pow2_clamped<A, T>(k));
}

// The largest reference exponent E for which 2^-E stays a normal number
// with room below (122 float, 1018 double); beyond it two_e is 0.
template <class T>
constexpr T softpick_e_normal = T(-std::numeric_limits<T>::min_exponent - 3);

// A lane's reference 2^E (E >= 0) as softpick_scaled uses it: two_e = 2^-E
// (0 beyond softpick_e_normal), and the |x| under which a term of x near 0,
// |e^x - 1| 2^-E, would fall below the smallest normal number: 2^(E - 125)
// (|e^x - 1| >= 0.84 |x| there), the smallest normal number itself at E = 0
// (the term is then e^x - 1 as it is). At most 2^-3, so every x it cuts
// has K = 0.
template <class A, class T>
struct softpick_reference {
  using B = xsimd::batch<T, A>;
  B E, two_e, cut;
  explicit softpick_reference(B e) noexcept
      : E(e),
        two_e(pow2_flush<A, T>(-e)),
        cut(xsimd::select(e == B(T(0)), B(std::numeric_limits<T>::min()),
                          pow2_clamped<A, T>(xsimd::min(e, B(softpick_e_normal<T>)) +
                                             B(T(std::numeric_limits<T>::min_exponent))))) {}
  // em1 of the x whose term would be subnormal, 0
  SMAX_INLINE B cut_near_zero(B x, B em1) const noexcept { return xsimd::select(xsimd::abs(x) < cut, B(T(0)), em1); }
};

// How softpick_scaled forms 2^(K - E) below the normal range: clamped at
// 2^-125 (the sums: no select) or flushed to 0 (outputs of a huge Emax).
enum class low_power { clamped, flushed };

// |e^x - 1| 2^-E, for e^x = 2^K (1 + em1) (exp_parts of x, em1 through
// cut_near_zero) and a lane's reference (softpick_reference), as
// |2^(K-E) em1 + (2^(K-E) - 2^-E)|: one fma, never subnormal.
//  * K = 0 (|x| < ln2/2, em1 = expm1(x)): |em1| 2^-E, or 0 where that
//    would be subnormal (x near 0 in a lane whose E has moved up; E > 0 only
//    after a term of at least 2^-1 in the lane, pow2_rescaled_sum's rule, so
//    what is dropped lies far under the sum's ulp).
//  * else, E <= 122: at least 0.29 2^-E (the addend's sum exact for |K| <=
//    24): no cancellation. Clamped, K - E below -125 takes 2^-125 for
//    2^(K - E): an absolute error under 2^-124, beside a lane sum of at
//    least 2^-1 (E > 0) or a term of about 1 (E = 0).
//  * else (two_e = 0): 2^(K-E) e^d, clamped at 2^-125 e^d or flushed to 0
//    from 2^-123 down; the clamp's and the dropped 2^-E's error is under
//    2^-121 beside a lane sum of at least 2^-1.
template <class A, class T, low_power Low = low_power::clamped>
SMAX_INLINE xsimd::batch<T, A> softpick_scaled(xsimd::batch<T, A> em1, xsimd::batch<T, A> K,
                                               const softpick_reference<A, T>& ref) noexcept {
  const xsimd::batch<T, A> pk =
      Low == low_power::clamped ? pow2_clamped<A, T>(K - ref.E) : pow2_flush<A, T>(K - ref.E);
  // Unfused (SSE2), pk em1 alone may be tiny: flushed (below 2^-126; at most
  // 0.41 of a term of 2^-125, beside a lane sum of at least 2^-1).
  if constexpr (has_fma_v<A>)
    return xsimd::abs(fma_<A, T>(pk, em1, pk - ref.two_e));
  else
    return xsimd::abs(mul_normal<A, T>(pk, em1) + (pk - ref.two_e));
}

// Pass 1: the sum of a_j = |e^(x_j) - 1| as sum * 2^emax, and m = max x;
// false if not exact (NaN, +inf, max above the range). Per lane, the terms
// are summed against a reference 2^E (E >= 0) that moves up, as in
// pow2_rescaled_sum, when a chunk's K exceeds it by more than 16; the term and
// its scaling are one fma (softpick_scaled). Accumulators in locals (see
// pow2_rescaled_sum).
// x may be 16-bit (T float: each vector widened as loaded).
template <class A, class S, class T>
SMAX_FLATTEN bool softpick_pass1(const S* x, std::size_t n, double& sum, T& emax, T& m) noexcept {
  static_assert(std::is_same<T, compute_t<S>>::value, "the sums are in the type x is computed in");
  using B = xsimd::batch<T, A>;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  constexpr T slack = T(16);
  const B floor(-single_pass_limits<T>::limit), zero(T(0)), binf(ninf);
  B E(T(0)), vmax(ninf);
  softpick_reference<A, T> ref(E);
  B acc[4] = {B(T(0)), B(T(0)), B(T(0)), B(T(0))};
  compensated<A, T> total;
  std::size_t chunks = 0;
  const auto chunk = [&](B* v) {
    vmax = xsimd::max(vmax, xsimd::max(xsimd::max(v[0], v[1]), xsimd::max(v[2], v[3])));
    B e[4], k[4];
#pragma GCC unroll 4
    for (std::size_t u = 0; u < 4; ++u) exp_parts<A, T>(xsimd::max(floor, v[u]), e[u], k[u]);  // max keeps NaN
    const B km = xsimd::max(xsimd::max(k[0], k[1]), xsimd::max(k[2], k[3]));
    if (move_reference<A, T>(km > E + B(slack), km, E, acc, total,
                             [](B old, B next) { return ldexp_normal<A, T>(B(T(1)), old - next); }))
      ref = softpick_reference<A, T>(E);
    // -inf entries are masked (the clamp at -limit gave them a nonzero term).
#pragma GCC unroll 4
    for (std::size_t u = 0; u < 4; ++u)
      acc[u] += xsimd::select(v[u] == binf, zero, softpick_scaled<A, T>(ref.cut_near_zero(v[u], e[u]), k[u], ref));
    if (++chunks == loop_shape<A>::block_chunks) {
      drain_into(total, acc);
      chunks = 0;
    }
  };
  // -inf padding: a term of 0, and no effect on the max.
  for_each_chunk4<A>(x, n, ninf, chunk);
  drain_into(total, acc);
  const T em = hmax<A>(E);
  const double raw = total.sum();  // NaN seen before the rescale can flush it
  sum = total.dot(ldexp_normal<A, T>(B(T(1)), E - B(em)));
  emax = em;
  m = hmax<A>(vmax);
  return raw == raw && m <= single_pass_limits<T>::limit && sum - sum == 0;
}

// e^M 2^-Emax = e^(M - Emax ln2), M = max(0, m). M and Emax ln2 nearly
// cancel (M up to 2^20 for double), so ln2 is split in three (exact
// products with Emax) and the difference loses nothing.
template <class T>
double softpick_eM_scaled(T emax, T m) noexcept {
  using C = exp_constants<double>;
  const double M = m > T(0) ? static_cast<double>(m) : 0.0;
  const double E = static_cast<double>(emax);
  return std::exp(((M - E * C::ln2_hi) - E * C::ln2_mid) - E * C::ln2_lo);
}

// (s + eps e^M 2^-Emax): the denominator in pass-2 units.
template <class T>
double softpick_denominator(double sum, T emax, T m, double eps) noexcept {
  return sum + eps * softpick_eM_scaled(emax, m);
}

// The wide type of the scalar fallback.
template <class T>
using softpick_wide_t = std::conditional_t<std::is_same<T, float>::value, double, long double>;

// Scalar softpick in a wider type, for the denominators whose inverse would
// overflow T (every |x| < 2^-100 and eps < 2^-100).
template <class T>
void softpick_scalar(const T* x, T* y, std::size_t n, T eps) noexcept {
  using Wd = softpick_wide_t<T>;
  Wd m = -std::numeric_limits<Wd>::infinity();
  for (std::size_t i = 0; i < n; ++i) m = std::max<Wd>(m, x[i]);
  const Wd M = m > 0 ? m : Wd(0);
  const auto num = [&](Wd v) -> Wd {
    if (v == -std::numeric_limits<Wd>::infinity()) return 0;
    return std::fabs(v) < 1 ? std::exp(-M) * std::expm1(v) : std::exp(v - M) - std::exp(-M);
  };
  Wd s = 0;
  for (std::size_t i = 0; i < n; ++i) s += std::fabs(num(x[i]));
  const Wd den = s + static_cast<Wd>(eps);
  for (std::size_t i = 0; i < n; ++i) {
    const Wd a = num(x[i]);
    y[i] = (a > 0 && den > 0) ? static_cast<T>(a / den) : T(0);
  }
}

// NaN -> all NaN (true); +inf entries -> 1 / (count + eps) there, 0
// elsewhere (true); otherwise false (nothing written).
template <class T>
bool softpick_special(const T* x, T* y, std::size_t n, T eps) noexcept {
  constexpr T inf = std::numeric_limits<T>::infinity();
  std::size_t count = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] != x[i]) {
      fill(y, n, std::numeric_limits<T>::quiet_NaN());
      return true;
    }
    count += (x[i] == inf);
  }
  if (count == 0) return false;
  const T share = static_cast<T>(1.0 / (static_cast<double>(count) + static_cast<double>(eps)));
  for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] == inf) ? share : T(0);
  return true;
}

// max x above the two-pass range: e^(-M) underflows to 0 in T, so the
// terms are e^(x - M) (0 for every x <= 0) and the kernel is softmax with
// eps added to its sum.
template <class A, class T>
void softpick_huge(const T* x, T* y, std::size_t n, T eps, T m) noexcept {
  using B = xsimd::batch<T, A>;
  with_shifted_exp<A>(m, [&](auto ex) {
    const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, ex);
    const scale_normal<A, T> inv(static_cast<T>(1.0 / (s + static_cast<double>(eps))));
    map<A, staged>(x, y, n, [ex, inv](B v) { return inv(ex(v)); });
  });
}

constexpr double softpick_inv_max = 0x1p100;

// softpick's pass 2 after an accepted pass 1 (sum 2^emax, max m): calls
// write(f) once with the per-element map y = f(x) (each output 0 or
// normal), or returns false (nothing written) where the denominator is 0 or
// its inverse overflows T (softpick_scalar's rows). One body for T arrays
// and for 16-bit x widened as loaded.
template <class A, class T, class Write>
bool softpick_write(double sum, T emax, T m, T eps, Write&& write) noexcept {
  using B = xsimd::batch<T, A>;
  const double den = softpick_denominator(sum, emax, m, static_cast<double>(eps));
  // den = 0 (eps = 0; every x 0, -inf or subnormal, whose terms pass 1
  // flushes) or an inverse that overflows: the scalar loop in a wider type.
  if (!(den > 0) || !(1.0 / den <= softpick_inv_max)) return false;
  // y = |e^x - 1| 2^-Emax / den for x > 0 (K >= 0 there), else 0.
  const T inv = static_cast<T>(1.0 / den);
  const B eb(emax), zero(T(0));
  const softpick_reference<A, T> ref(eb);
  const B floor(-single_pass_limits<T>::limit);
  // Where every nonzero y of an x above the cut is normal (q = 2^emax den
  // min_normal <= 2^-4 and emax <= 122: the K > 0 outputs are at least
  // 0.41 2^-Emax / den; the cut, max(2.5 q, cut_near_zero's), leaves K = 0
  // outputs of at least 0.84 x 2^-Emax / den), the x at or below the cut go
  // through the exp as -limit (a normal term, then dropped by the select
  // that x > 0 needs anyway): no guard of its own, and nothing subnormal
  // formed in a dropped lane either. The rest (a huge emax, a tiny 1 / den)
  // with both guards, and 2^(K - Emax) flushed. (2.5 q is formed only where
  // it is at least min_normal: below, cut_near_zero's cut is the larger.)
  constexpr double min_normal = static_cast<double>(std::numeric_limits<T>::min());
  const double r = emax <= softpick_e_normal<T> ? std::ldexp(den, static_cast<int>(emax)) : 0.0;
  if (emax <= softpick_e_normal<T> && r <= 0x1p-4 / min_normal) {
    // (max(r, 0.4) in both arms: clang evaluates both, and 2.5 r min_normal
    // of a smaller r is subnormal)
    const B cut = xsimd::max(B(static_cast<T>(r >= 0.4 ? 2.5 * std::max(r, 0.4) * min_normal : 0.0)), ref.cut);
    const B invb(inv);
    write([=](B v) {
      const auto keep = v > cut;
      B em1, K;
      exp_parts<A, T>(xsimd::select(keep, v, floor), em1, K);
      return xsimd::select(keep, softpick_scaled<A, T>(em1, K, ref), zero) * invb;
    });
    return true;
  }
  const scale_normal<A, T> invs(inv);
  write([=](B v) {
    B em1, K;
    exp_parts<A, T>(xsimd::max(floor, v), em1, K);
    return invs(xsimd::select(v > zero, softpick_scaled<A, T, low_power::flushed>(ref.cut_near_zero(v, em1), K, ref), zero));
  });
  return true;
}

// smax::softpick's check of eps.
template <class T>
void check_softpick_eps(T eps) {
  if (!(eps >= T(0)) || !is_finite(eps)) throw std::invalid_argument("smax::softpick: eps must be finite and >= 0");
}

template <class A, class T>
void softpick(const T* x, T* y, std::size_t n, T eps) noexcept {
  if (n == 0) return;
  double sum;
  T emax, m;
  if (!softpick_pass1<A>(x, n, sum, emax, m)) {
    if (softpick_special(x, y, n, eps)) return;
    return softpick_huge<A>(x, y, n, eps, m);
  }
  if (!softpick_write<A, T>(sum, emax, m, eps, [&](auto f) { map<A>(x, y, n, f); })) softpick_scalar(x, y, n, eps);
}

// softpick_backward. With D = sum_j |a_j| + eps (a_j = e^(x_j - M) - e^(-M))
// and dot = sum_i dy_i y_i:
//     dx_k = (e^(x_k - M) / D) (1[x_k > 0] dy_k - sign(x_k) dot)
//            - [k = first argmax, max x > 0] eps dot / D
// The last term is the dependence through M (y depends on M only through
// eps e^M in the unshifted form relu(e^x - 1) / (sum |e^x - 1| + eps e^M));
// at x_k = 0 the subgradient 0 is used for |a_k|. -inf entries get 0. NaN
// in x gives NaN everywhere; +inf in x gives 0 everywhere (the limit).
// k is located (first_index_of) before anything is written: dx may alias x.

// One vector of softpick's gradient from e = e^(x - M) / D (the
// argmax term apart): e (dy - dot) for x > 0, e dot for x < 0, 0 at 0.
// Where dy - dot overflows and the result need not, e dy - e dot (found by
// fuzz_variants: dy = -DBL_MAX, dot = 0.6 DBL_MAX, e = 1/15). Built once per
// row: formed per vector, dot's conversion and cut (a double division) kept
// the loop at 3x its arithmetic's time (AMD EPYC Zen 4).
template <class A, class T>
struct softpick_gradient {
  using B = xsimd::batch<T, A>;
  B gd, ed_cut;
  explicit softpick_gradient(double dot) noexcept : gd(finite_mean<T>(dot)), ed_cut(product_cut(finite_mean<T>(dot))) {}
  SMAX_INLINE B operator()(B v, B g, B e) const noexcept {
    const B zero(T(0));
    // No product below the normal range (e is normal or 0): e dot through
    // the row's cut on e, e h flushed, and the two-product form only where h
    // overflows (elsewhere e g - e dot could be a subnormal, as e h can).
    const B ed = xsimd::select(e < ed_cut, zero, e) * gd, h = g - gd;
    const B eh = mul_normal<A, T>(e, h);
    const auto finite_h = xsimd::abs(h) < B(std::numeric_limits<T>::infinity());
    // (the fms on inputs zeroed where h is finite: clang may evaluate this arm
    // for every vector)
    const B pos = xsimd::all(finite_h) ? eh
                                       : xsimd::select(finite_h, eh,
                                                       xsimd::fms(xsimd::select(finite_h, zero, e), g,
                                                                  xsimd::select(finite_h, zero, ed)));
    return xsimd::select(v > zero, pos, xsimd::select(v < zero, ed, zero));
  }
};

// Degenerate denominators (every |x| below 2^-100): the gradient in the wide
// type, one element at a time.
template <class A, class T>
void softpick_backward_wide(const T* x, const T* dy, T* dx, std::size_t n, T eps, T m, double dot) noexcept {
  using Wd = softpick_wide_t<T>;
  Wd s = 0, mw = m;
  const Wd M = mw > 0 ? mw : Wd(0);
  for (std::size_t i = 0; i < n; ++i)
    if (x[i] != -std::numeric_limits<T>::infinity()) s += std::fabs(std::exp(-M) * std::expm1(Wd(x[i])));
  const Wd D = s + eps;
  const std::size_t k = m > T(0) ? first_index_of<A>(x, n, m) : n;
  for (std::size_t i = 0; i < n; ++i) {
    const Wd e = D > 0 ? std::exp(Wd(x[i]) - M) / D : Wd(0);
    const Wd h = x[i] > 0 ? Wd(dy[i]) - Wd(dot) : (x[i] < 0 ? Wd(dot) : Wd(0));
    dx[i] = static_cast<T>(e * h - (i == k && D > 0 ? Wd(eps) * Wd(dot) / D : Wd(0)));
  }
}

// The two-pass regime (pass 1 gave sum 2^Emax and m): e^(x - M) / D =
// e^x 2^-Emax / den = p 2^(K - Emax) / den. The output pass is left to
// write(f, k, term): dx = f(x, dy), then dx_k = dx_k - term in double (k < n,
// the first argmax). Returns false, having written nothing, for the
// degenerate denominators (softpick_backward_wide's). x may be 16-bit (T
// float, each vector widened as loaded).
template <class A, class S, class T, class Write>
SMAX_FLATTEN bool softpick_backward_two_pass_with(const S* x, std::size_t n, T eps, double dot, double sum, T emax,
                                                  T m, Write&& write) noexcept {
  using B = xsimd::batch<T, A>;
  const double den = softpick_denominator(sum, emax, m, static_cast<double>(eps));
  const double inv = 1.0 / den;
  if (den == 0 || !(inv <= softpick_inv_max)) return false;
  const std::size_t k = m > T(0) ? first_index_of<A>(x, n, m) : n;
  const scale_normal<A, T> invb(static_cast<T>(inv));
  const B eb(emax), zero(T(0));
  const B floor(-single_pass_limits<T>::limit);
  // Where 2^(K - Emax) is near or below the bottom of the normal range, e
  // alone would underflow although e dot may not (dy near the largest T:
  // found by fuzz_variants, float, x - M = -94, dot ~ 1e35): those lanes
  // form e 2^sh with K - Emax + sh = deep (normal, and small enough that
  // the products cannot overflow), combine, then scale by 2^-sh. The
  // other lanes are unchanged.
  const B deep(T(std::numeric_limits<T>::min_exponent + 24));
  const softpick_gradient<A, T> gradient(dot);
  const double term = k < n ? static_cast<double>(eps) * softpick_eM_scaled(emax, m) * inv * dot : 0.0;
  write(
      [=](B v, B g) {
        B p, K;
        extexp<A, T>(xsimd::max(floor, v), p, K);
        const auto low = (K - eb) < deep;
        const B sh = xsimd::select(low, deep - (K - eb), zero);
        const B e =
            xsimd::select(v == B(-std::numeric_limits<T>::infinity()), zero, invb(ldexp_normal<A, T>(p, K - eb + sh)));
        const B r = gradient(v, g, e);
        return xsimd::any(low) ? xsimd::select(low, ldexp_flush<A, T>(r, -sh), r) : r;
      },
      k, term);
  return true;
}
template <class A, class T>
SMAX_FLATTEN void softpick_backward_two_pass(const T* x, const T* dy, T* dx, std::size_t n, T eps, double dot,
                                             double sum, T emax, T m) noexcept {
  if (!softpick_backward_two_pass_with<A>(x, n, eps, dot, sum, emax, m, [&](auto f, std::size_t k, double term) {
        map_pairs<A>(x, dy, dx, n, f);
        if (k < n) dx[k] = static_cast<T>(static_cast<double>(dx[k]) - term);
      }))
    softpick_backward_wide<A>(x, dy, dx, n, eps, m, dot);
}

// Pass 1 refused: NaN, +inf, or a max beyond the single-pass range.
template <class A, class T>
SMAX_FLATTEN void softpick_backward_nonfinite(const T* x, const T* dy, T* dx, std::size_t n, T eps, double dot, T m) noexcept {
  using B = xsimd::batch<T, A>;
  bool nan = false;
  std::size_t posinf = 0;
  for (std::size_t i = 0; i < n; ++i) {
    nan |= (x[i] != x[i]);
    posinf += (x[i] == std::numeric_limits<T>::infinity());
  }
  if (nan) return fill(dx, n, std::numeric_limits<T>::quiet_NaN());
  if (posinf) return fill(dx, n, T(0));
  // Max beyond the range (so > 0): e^(-M) is 0 in T, D = sum e^(x - M) + eps.
  const std::size_t k = first_index_of<A>(x, n, m);
  with_shifted_exp<A>(m, [&](auto ex) {
    const double s = sum_map<A>(x, static_cast<T*>(nullptr), n, ex);
    const double den = s + static_cast<double>(eps);
    const scale_normal<A, T> invb(static_cast<T>(1.0 / den));
    const softpick_gradient<A, T> gradient(dot);
    map_pairs<A>(x, dy, dx, n, [=](B v, B g) { return gradient(v, g, invb(ex(v))); });
    if (k < n) dx[k] = static_cast<T>(static_cast<double>(dx[k]) - static_cast<double>(eps) / den * dot);
  });
}

template <class A, class T>
void softpick_backward(const T* x, const T* y, const T* dy, T* dx, std::size_t n, T eps) noexcept {
  if (n == 0) return;
  const double dot = dot_normal<A>(y, dy, n);
  double sum;
  T emax, m;
  if (softpick_pass1<A>(x, n, sum, emax, m)) return softpick_backward_two_pass<A>(x, dy, dx, n, eps, dot, sum, emax, m);
  softpick_backward_nonfinite<A>(x, dy, dx, n, eps, dot, m);
}

}  // namespace detail
}  // namespace smax
