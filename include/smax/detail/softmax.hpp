// smax — softmax and log-softmax kernels, one generic body per algorithm,
// written on xsimd::batch<T, A> for any architecture tag A.
//
//   three_pass_recompute  max; sum e^(x-m); y = e^(x-m)/sum     reads 3n, writes n
//   three_pass_reload     max; y = e^(x-m), sum; y *= 1/sum     reads 3n, writes 2n
//   two_pass              sum e^x as (p, 2^K) pairs; y = ...    reads 2n, writes n
//   online                running max and rescaled sum; y = ...  reads 2n, writes n
//
// Every algorithm computes the same function to within its rounding: the
// special cases (NaN, +inf, all -inf, |x| huge) are resolved by one shared
// path, and two_pass / online hand an input they cannot represent exactly in
// their single pass (max above split_limit or below -split_limit/2, NaN,
// +inf) to three_pass_recompute, at the cost of one extra read.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "exp.hpp"
#include "loops.hpp"

namespace smax {
namespace detail {

// Writes the result for an input whose max m is not finite (NaN, +inf, or
// -inf, i.e. every entry -inf or NaN). The special-value rules of the
// library: any NaN -> all NaN; +inf entries share the mass equally, the rest
// get 0; all -inf -> all 0 (log: all -inf).
enum class result_form { probabilities, logs };
template <class T>
void softmax_nonfinite(const T* x, T* y, std::size_t n, result_form form) noexcept {
  const bool log = form == result_form::logs;
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  std::size_t n_posinf = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] != x[i]) return fill(y, n, nan);
    n_posinf += (x[i] == inf);
  }
  if (n_posinf == 0) return fill(y, n, log ? -inf : T(0));
  const T share = log ? static_cast<T>(-std::log(static_cast<double>(n_posinf)))
                      : static_cast<T>(1.0 / static_cast<double>(n_posinf));
  const T rest = log ? -inf : T(0);
  for (std::size_t i = 0; i < n; ++i) y[i] = (x[i] == inf) ? share : rest;
}

// Calls f(shifted_exp<A, T, Split>) with the form that is exact for this m.
template <class A, class T, class F>
SMAX_INLINE void with_shifted_exp(T m, F&& f) {
  if (use_split(m))
    f(shifted_exp<A, T, true>(m));
  else
    f(shifted_exp<A, T, false>(m));
}

// m - E ln2 in double for an integer-valued E within a few dozen of m log2e,
// with ln2 in two parts: the error is a rounding of the (small) result, not
// one of E ln2 (up to 2^-53 |m|: the plain product gave double log_softmax
// errors of 3.4e-14 at m = 1000, beyond its bound of 2e-14).
SMAX_INLINE double minus_e_ln2(double m, double E) noexcept {
  using C = exp_constants<double>;
  return std::fma(-E, C::ln2_f1, m) - E * C::ln2_f2;
}

// The reference exponent of the three-pass kernels for a finite max m with
// |m| <= split_limit: E = round(m log2e), so that every e^x 2^-E (x <= m) is
// at most e^(m - E ln2) < 1.42, and r = m - E ln2 in double (to ~2^-60:
// fma(-E, ln2_f1, m) is exact, see cody_waite; log_softmax needs r for
// double inputs).
template <class T>
SMAX_INLINE T ref_exponent(T m, double& r) noexcept {
  const double E = std::nearbyint(static_cast<double>(m) * 1.4426950408889634);
  r = minus_e_ln2(static_cast<double>(m), E);
  return static_cast<T>(E);
}

// Where the three-pass kernels clamp x for a finite max m (|m| <= split_limit):
// far enough below m that e^(x - m) underflows T there, so the clamp changes
// no result, and close enough that the clamped x still range-reduces exactly
// (|K| < 2^13 float, 2^21 double). A fixed -split_limit is not enough: for m
// near -split_limit it clamped entries that still carry weight.
template <class T>
SMAX_INLINE T clamp_floor(T m) noexcept {
  return m - T(std::numeric_limits<T>::max_exponent + std::numeric_limits<T>::digits + 8) * T(0.6931471805599453);
}

// Three-pass softmax: max; sum (reload: and store) e^x 2^-E; normalize.
// With |m| <= split_limit (always, in practice) the passes use exp_ref, which
// range-reduces x itself: no x - m is rounded, and the output is
// e^x 2^-E / sum(e^x 2^-E), the factor e^-(m - E ln2) of e^(x - m) cancelling.
// Beyond it x - m is exact wherever the result is not negligible and the
// plain shifted_exp is used. Pass 2 stores its terms in y for pass 3 to
// reload, or pass 3 computes them again.
enum class exp_terms { recompute, reload };

// Pass 2 of three-pass, given m = max x (pass 1): the sum s of the terms,
// each stored to terms[i] unless terms is null (as keep(x, term): sum_map);
// then finish(s, normalized), normalized(inv) giving the map x -> term * inv.
// False (nothing called) when m is not finite. x may be 16-bit (T float).
// Acc: how accurately the terms are computed where |m| <= split_limit.
template <class A, exp_accuracy Acc = exp_accuracy::full, class T, class S, class Finish, class Keep = store_term>
SMAX_INLINE bool three_pass_sum_from(T m, const S* x, T* terms, std::size_t n, Finish&& finish,
                                     Keep&& keep = Keep{}) noexcept {
  if (!is_finite(m)) return false;
  if (use_split(m)) {
    double r;
    const T E = ref_exponent(m, r);
    const T lo = clamp_floor(m);
    const double s = sum_map<A>(x, terms, n, exp_ref<A, T, Acc>(lo, E, T(1)), keep);
    finish(s, [&](T inv) { return exp_ref<A, T, Acc>(lo, E, inv); });
  } else {
    const shifted_exp<A, T, false> ex(m);
    const double s = sum_map<A>(x, terms, n, ex, keep);
    finish(s, [&](T inv) { return scaled_shifted_exp<A, T, false>(ex, inv); });
  }
  return true;
}

// Passes 1 and 2 of three-pass: m = max x, then three_pass_sum_from.
template <class A, exp_accuracy Acc = exp_accuracy::full, class T, class S, class Finish, class Keep = store_term>
SMAX_INLINE bool three_pass_sum(const S* x, T* terms, std::size_t n, Finish&& finish, Keep&& keep = Keep{}) noexcept {
  return three_pass_sum_from<A, Acc>(static_cast<T>(reduce_max<A>(x, n)), x, terms, n, finish, keep);
}

// Three-pass softmax after its pass 1: m must be max x as reduce_max finds
// it (a NaN it drops is caught by the sum); any other m changes the bits.
template <class A, class T>
SMAX_INLINE void softmax_three_pass_from(T m, const T* x, T* y, std::size_t n, exp_terms terms) noexcept {
  const bool reload = terms == exp_terms::reload;
  const auto finish = [&](double s, auto&& normalized) {
    if (!(s == s)) return fill(y, n, std::numeric_limits<T>::quiet_NaN());
    if (reload) {
      map<A>(y, y, n, scale_normal<A, T>(static_cast<T>(1.0 / s)));
    } else {
      map<A, staged>(x, y, n, normalized(static_cast<T>(1.0 / s)));
    }
  };
  if (!three_pass_sum_from<A>(m, x, reload ? y : static_cast<T*>(nullptr), n, finish))
    softmax_nonfinite(x, y, n, result_form::probabilities);
}

template <class A, class T>
SMAX_FLATTEN void softmax_three_pass(const T* x, T* y, std::size_t n, exp_terms terms) noexcept {
  softmax_three_pass_from<A>(reduce_max<A>(x, n), x, y, n, terms);
}

// The single-pass reductions (online, two_pass) below clamp x at -limit and
// accept the result only when the max lies in [-limit/2, limit]: then every
// term they flush (below the lane reference by more than the normal range) is
// below the max by as much, and negligible. Anything else goes to three-pass.
template <class T>
struct single_pass_limits {
  static constexpr T limit = exp_constants<T>::split_limit;
  static SMAX_INLINE bool accepts(T vmax, double s) noexcept {
    return vmax >= -limit / 2 && vmax <= limit && s > 0 && s < std::numeric_limits<double>::infinity();
  }
};

// Online softmax (Milakov & Gimelshein 2018): one pass keeps, per lane, a
// reference r (a running max) and the sum of e^(x - r). The reference moves
// only when a chunk's max exceeds it by more than `slack` (e^16 leaves ample
// float range for the sum), so a rescale always shrinks the old partial sum
// by at least e^-16 and the rescale roundings cannot accumulate with n, even
// for sorted input.
template <class A, class T>
SMAX_FLATTEN void softmax_online(const T* x, T* y, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  using L = single_pass_limits<T>;
  using E = shifted_exp<A, T, true>;
  using C = exp_constants<T>;
  constexpr T slack = T(16);
  const B floor(-L::limit);
  const B tiny_ref(std::ldexp(T(1), std::numeric_limits<T>::min_exponent - 1 + C::mantissa_bits));
  const auto make_exp = [](B r) {
    const B kr = round_to_int<A, T>(r * B(C::log2e));
    return E(r, kr, cody_waite<A, T>(r, kr));
  };

  B ref(-L::limit / 2);
  E ex = make_exp(ref);
  B vmax(-L::limit);
  B acc[4] = {B(T(0)), B(T(0)), B(T(0)), B(T(0))};
  compensated<A, T> total;
  std::size_t chunks = 0;
  // max(floor, x) keeps a NaN x on every ISA (x86 max returns its second
  // operand when either is NaN; NEON propagates NaN).
  const auto chunk = [&](B* v) {
#pragma GCC unroll 4
    for (std::size_t u = 0; u < 4; ++u) v[u] = xsimd::max(floor, v[u]);
    const B cm = xsimd::max(xsimd::max(v[0], v[1]), xsimd::max(v[2], v[3]));
    vmax = xsimd::max(vmax, cm);
    // The factor is e^(ref - new ref), exactly 1 where unchanged.
    // (a chunk max below 2^-103 in magnitude, double 2^-970, becomes a
    // reference of 0: x - r of two such values could be subnormal, while the
    // ulps of any larger r keep every x - r 0 or normal)
    const B candidate = xsimd::select(xsimd::abs(cm) < tiny_ref, B(T(0)), cm);
    move_reference<A, T>(cm > ref + B(slack), candidate, ref, acc, total, [&](B old, B next) {
      ex = make_exp(next);
      return ex(old);
    });
#pragma GCC unroll 4
    for (std::size_t u = 0; u < 4; ++u) acc[u] += ex(v[u]);
    if (++chunks == loop_shape<A>::block_chunks) {
      drain_into(total, acc);
      chunks = 0;
    }
  };
  // -inf padding clamps to -limit: a zero term.
  for_each_chunk4<A>(x, n, -std::numeric_limits<T>::infinity(), chunk);
  drain_into(total, acc);

  const T R = hmax<A>(ref);
  const T vm = hmax<A>(vmax);
  const E rex = make_exp(B(R));
  const double s = total.dot(rex(ref));
  if (!L::accepts(vm, s) || !(R == R)) return softmax_three_pass<A>(x, y, n, exp_terms::recompute);
  map<A, staged>(x, y, n, scaled_shifted_exp<A, T, true>(rex, static_cast<T>(1.0 / s)));
}

// Two-pass softmax (Dukhan & Ablavatski 2020): pass 1 sums e^x kept as
// (p, 2^K) pairs, with no max pass; pass 2 writes. Each lane holds a
// power-of-two reference 2^E and the sum of p * 2^(K - E); moving E rescales
// by a power of two, which is exact. E moves only when a chunk's K exceeds it
// by more than 16, so terms stay below 2^17.
//
// The rounding of x log2e adds a per-lane magic number bias_magic - E,
// which leaves K - E + bias in the low mantissa bits: one shift gives
// 2^(K - E) (pow2_biased) and one fma adds p * 2^(K - E) to the
// accumulator. This needs K - E >= -125 (a normal power of two), so x is
// clamped per lane at (E - 125) ln2: a term clamped there is below 2^-125 of
// its lane's largest term, which is in the sum, so the clamp changes the sum
// by less than n 2^-125 relative (nothing for n < 2^80). Every product is
// then of normal numbers, which AVX-512's vscalefps(p, K - E) was not: it
// formed the far terms as subnormals, or underflowed them, each a microcode
// assist on Intel cores (11x slower on logits reaching that band).
//
// Pass 1 of two_pass: sum(e^x 2^-Emax) = s over x[0..n) in one read, with
// Emax the largest per-lane reference exponent. False (s, Emax unusable)
// for a NaN, an infinite or empty sum, or a max outside the range the
// single-pass reduction accepts: the caller then takes three passes.
// `pre` maps each loaded vector first (seeds.hpp: MultiMax's modulator, or
// a min/max tracker); in the tail it sees 0 in the padding lanes, and its
// results there are replaced by -inf.
struct pass_through {
  template <class B>
  SMAX_INLINE B operator()(B v) const noexcept {
    return v;
  }
};
// A `pre` of a few operations (sa_softmax's min/max tracker) says so with a
// member `light = true`: it keeps the two halves' interleaving, which a
// heavy one (MultiMax's modulator) does not.
template <class Pre, class = void>
struct pre_is_light : std::is_same<Pre, pass_through> {};
template <class Pre>
struct pre_is_light<Pre, std::void_t<decltype(Pre::light)>> : std::integral_constant<bool, Pre::light> {};
// x may also be bf16 / fp16 (S) with T float: each vector is widened as it
// is loaded (softmax_half.hpp); for S = T the loads are the plain ones.
// WithMax: also the largest x (after pre) into xmax, one max per vector
// (log_softmax's two-pass form).
template <class A, bool WithMax, exp_accuracy Acc = exp_accuracy::full, class T, class Pre, class S>
SMAX_FLATTEN bool two_pass_sum_tracked(const S* x, std::size_t n, double& s, T& Emax, T& xmax, Pre&& pre) noexcept {
  using B = xsimd::batch<T, A>;
  using L = single_pass_limits<T>;
  using C = exp_constants<T>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t U = loop_shape<A>::unroll;
  constexpr T slack = T(16);
  constexpr T headroom = T(125);  // K - E >= -headroom keeps 2^(K - E) normal
  const B floor(-L::limit);
  const B ln2(static_cast<T>(0.6931471805599453));

  // K counts 1/unit powers of two: 16ths where the terms come from a table
  // (sixteenths_v, exp.hpp), whole ones elsewhere. E is whole either way.
  constexpr bool sixteenths = sixteenths_v<A, T, Acc>;
  constexpr T unit = sixteenths ? T(16) : T(1);
  constexpr T base = sixteenths ? T(0x1.8p23) : C::bias_magic;  // the magic less unit E
  const B log2e_units(C::log2e * unit);
  // Per lane: the clamp of x (see above) and the magic of the rounding.
  const auto lane_floor = [&](B e) { return xsimd::max(floor, (e - B(headroom)) * ln2); };
  const auto lane_magic = [&](B e) { return B(base) - e * B(unit); };
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  // The loop runs a local copy of pre (its vectors then stay in registers:
  // "Functor copies", loops.hpp); a pre with state of its own (a tracker
  // passed as a non-const lvalue) gets the copy back at the end.
  local_copy_t<Pre> pre_local(pre);
  using P = std::remove_reference_t<Pre>;
  // A pre whose call may change it (not callable as const) and that cannot
  // be assigned back (a mutable lambda) would lose its state here.
  static_assert(!std::is_lvalue_reference<Pre>::value || std::is_const<P>::value || std::is_copy_assignable<P>::value ||
                    std::is_invocable<const P&, B>::value,
                "two_pass_sum: a stateful pre passed as an lvalue must be copy-assignable");
  const auto put_back = [&] {
    if constexpr (std::is_lvalue_reference<Pre>::value && !std::is_const<P>::value && std::is_copy_assignable<P>::value)
      pre = pre_local;
  };

  // The sums of one stretch of x (the whole of x, or one of its two halves
  // below): per-lane references, accumulators and the chunk count.
  struct lane_sums {
    B E, lo, magic, kmax, vmax;
    B acc[U];
    compensated<A, T> total;
    std::size_t chunks = 0;
  };
  const auto start = [&](lane_sums& st) {
    st.E = round_to_int<A, T>(B(-L::limit / 2 * C::log2e));
    st.lo = lane_floor(st.E);
    st.magic = lane_magic(st.E);
    st.kmax = B(-L::limit * C::log2e * unit);  // max K: the range test at the end
    st.vmax = B(ninf);
#pragma GCC unroll 16
    for (std::size_t u = 0; u < U; ++u) st.acc[u] = B(T(0));
  };

  // One iteration: U vectors (the tail: padded with -inf, which clamps to a
  // term below 2^-125 of its lane).
  const auto chunk = [&](lane_sums& st, B* v) SMAX_LAMBDA_INLINE {
    B K[U];  // K - E + bias_magic
    if constexpr (WithMax) {
#pragma GCC unroll 16
      for (std::size_t u = 0; u < U; ++u) st.vmax = xsimd::max(st.vmax, v[u]);
    }
#pragma GCC unroll 16
    for (std::size_t u = 0; u < U; ++u) v[u] = xsimd::max(st.lo, v[u]);  // keeps NaN (see softmax_online)
#pragma GCC unroll 16
    for (std::size_t u = 0; u < U; ++u) K[u] = mul_add_magic<A, T>(v[u], log2e_units, st.magic);
    B km = K[0];
#pragma GCC unroll 16
    for (std::size_t u = 1; u < U; ++u) km = xsimd::max(km, K[u]);
    st.kmax = xsimd::max(st.kmax, km - st.magic);
    // (the new E: the whole part of the largest K)
    const B top = sixteenths ? xsimd::floor((km - st.magic) * B(T(1) / unit)) : km - st.magic;
    if (move_reference<A, T>(km > B(base + slack * unit), top, st.E, st.acc, st.total,
                             [](B old, B next) { return ldexp_normal<A, T>(B(T(1)), old - next); })) {
      st.lo = lane_floor(st.E);
      st.magic = lane_magic(st.E);
#pragma GCC unroll 16
      for (std::size_t u = 0; u < U; ++u) {
        v[u] = xsimd::max(st.lo, v[u]);
        K[u] = mul_add_magic<A, T>(v[u], log2e_units, st.magic);
      }
    }
#pragma GCC unroll 16
    for (std::size_t u = 0; u < U; ++u) {
      if constexpr (sixteenths) {
        B scale;
        const B p = sixteenths_term<A>(v[u], K[u], st.magic, scale);
        st.acc[u] = fma_<A, T>(p, scale, st.acc[u]);
      } else {
        const B p = exp_poly<A, T, Acc>(cody_waite<A, T, Acc>(v[u], K[u] - st.magic));
        st.acc[u] = fma_<A, T>(p, pow2_biased<A, T>(K[u]), st.acc[u]);
      }
    }
  };
  const auto flush = [&](lane_sums& st) SMAX_LAMBDA_INLINE {
#pragma GCC unroll 16
    for (std::size_t w = U / 2; w >= 1; w /= 2) {
#pragma GCC unroll 16
      for (std::size_t u = 0; u < w; ++u) st.acc[u] = st.acc[u] + st.acc[u + w];
    }
    st.total.add(st.acc[0]);
#pragma GCC unroll 16
    for (std::size_t u = 0; u < U; ++u) st.acc[u] = B(T(0));
  };
  const bool far = read_loop_prefetches<S>(n);
  // The U vectors at p, whole.
  const auto whole = [&](lane_sums& st, const S* p) SMAX_LAMBDA_INLINE {
    if (far) prefetch_as<A, U, T>(p);
    B v[U];
#pragma GCC unroll 16
    for (std::size_t u = 0; u < U; ++u) v[u] = pre_local(load_as<A, T>(p + u * W));
    chunk(st, v);
    if (++st.chunks == loop_shape<A>::block_chunks) {
      flush(st);
      st.chunks = 0;
    }
  };
  // The rest of a stretch from p on: whole iterations, the tail, the flush.
  const auto finish = [&](lane_sums& st, const S* p, std::size_t len) SMAX_LAMBDA_INLINE {
    std::size_t i = 0;
    for (; i + U * W <= len; i += U * W) whole(st, p + i);
    if (i < len) {
      const std::size_t r = len - i;
      B v[U];
      for (std::size_t u = 0; u < U; ++u) {
        const std::size_t live = live_lanes(r, u, W);
        v[u] = xsimd::select(lane_index<A, T>() < B(static_cast<T>(live)),
                             pre_local(load_as_partial<A, T>(p + i + u * W, live, T(0))), B(ninf));
      }
      chunk(st, v);
    }
    flush(st);
  };

  // The result from one stretch's sums, or from both halves' merged.
  const auto conclude = [&](const lane_sums& first, const auto&... rest) SMAX_LAMBDA_INLINE {
    B kmax = first.kmax, E = first.E, vmax = first.vmax;
    ((kmax = xsimd::max(kmax, rest.kmax), E = xsimd::max(E, rest.E), vmax = xsimd::max(vmax, rest.vmax)), ...);
    const T km = hmax<A>(kmax) / unit;
    const bool in_range =
        km >= std::nearbyint(-L::limit / 2 * C::log2e) && km <= std::nearbyint(L::limit * C::log2e);
    Emax = hmax<A>(E);
    if constexpr (WithMax) xmax = hmax<A>(vmax);
    // A NaN partial sum must be seen before the rescale below: a lane whose E
    // is far under Emax is flushed to 0 there, NaN or not.
    double raw = first.total.sum();
    ((raw += rest.total.sum()), ...);
    const bool nan_seen = !(raw == raw);
    const auto scaled = [&](const lane_sums& st) { return st.total.dot(ldexp_normal<A, T>(B(T(1)), st.E - B(Emax))); };
    s = scaled(first);
    ((s += scaled(rest)), ...);
    return !nan_seen && in_range && s > 0 && s < std::numeric_limits<double>::infinity();
  };

  lane_sums a;
  start(a);
  if (n * sizeof(S) < two_halves_min_bytes) {
    finish(a, x, n);
    put_back();
    return conclude(a);
  }
  // Large x: two halves, [0, h) and [h, n), each summed as above on its own
  // and the two merged; where one stream of reads is slower than two
  // (interleave_halves), their iterations alternate, which gives the same
  // sums as one half after the other (docs/tuning.md, "Two halves"). Not
  // with a heavy `pre` (MultiMax's modulator: bound by its arithmetic, and
  // 2-5% slower with both halves' state live).
  const std::size_t h = n / (2 * U * W) * (U * W);
  lane_sums b;
  start(b);
  if (pre_is_light<std::decay_t<Pre>>::value && interleave_halves()) {
    for (std::size_t i = 0; i < h; i += U * W) {
      whole(a, x + i);
      whole(b, x + h + i);
    }
    flush(a);
    finish(b, x + 2 * h, n - 2 * h);
  } else {
    finish(a, x, h);
    finish(b, x + h, n - h);
  }
  put_back();
  return conclude(a, b);
}

template <class A, exp_accuracy Acc = exp_accuracy::full, class T, class Pre = pass_through, class S>
SMAX_INLINE bool two_pass_sum(const S* x, std::size_t n, double& s, T& Emax, Pre&& pre = {}) noexcept {
  T unused;
  return two_pass_sum_tracked<A, false, Acc>(x, n, s, Emax, unused, std::forward<Pre>(pre));
}

template <class A, class T>
void softmax_two_pass(const T* x, T* y, std::size_t n) noexcept {
  double s;
  T Emax;
  if (!two_pass_sum<A>(x, n, s, Emax)) return softmax_three_pass<A>(x, y, n, exp_terms::recompute);
  // y = e^x 2^-Emax / s (every K here is at most Emax + 16).
  map<A, staged>(x, y, n, exp_ref<A, T>(-single_pass_limits<T>::limit, Emax, static_cast<T>(1.0 / s)));
}

// `automatic`: three-pass reload while the input fits in cache (one exp per
// element; its five passes over the data then cost little), two-pass from
// this many bytes of input (two reads and one write from DRAM, but two exps
// per element): 4 MiB where AVX-512 runs on 512-bit units, 8 MiB on 256-bit
// ones (AVX2, and AVX-512 on Zen 4), whose second exp costs twice as much;
// 16 MiB for double on AMD family 0x19 (Zen 3 and Zen 4: half the lanes per
// exp, measured on both, AVX2 and AVX-512). The crossings: docs/tuning.md,
// "automatic's threshold"; 4-lane ISAs (SSE2, NEON) are bound by the exp at
// every size: reload.
template <class A, class T = float>
std::size_t automatic_two_pass_bytes() noexcept {
  constexpr std::size_t wide = std::size_t(4) << 20, narrow = std::size_t(8) << 20;
  if constexpr (is_avx512_v<A>)
    return avx512_on_256bit_units() ? (sizeof(T) == 8 ? 2 * narrow : narrow) : wide;
  else if constexpr (std::is_base_of<xsimd::fma3<xsimd::avx2>, A>::value)
    return sizeof(T) == 8 && amd_family_19h() ? 2 * narrow : narrow;
  else
    return ~std::size_t(0);
}

// Whether `automatic` takes two passes over n elements of T.
template <class A, class T>
SMAX_INLINE bool automatic_takes_two_pass(std::size_t n) noexcept {
  // Below the smallest threshold without a look at the CPU.
  return n * sizeof(T) >= (std::size_t(4) << 20) && n * sizeof(T) >= automatic_two_pass_bytes<A, T>();
}

template <class A, class T>
void softmax(const T* x, T* y, std::size_t n, algorithm a) noexcept {
  if (n == 0) return;
  switch (a) {
    case algorithm::three_pass_recompute:
      return softmax_three_pass<A>(x, y, n, exp_terms::recompute);
    case algorithm::three_pass_reload:
      return softmax_three_pass<A>(x, y, n, exp_terms::reload);
    case algorithm::two_pass:
      return softmax_two_pass<A>(x, y, n);
    case algorithm::online:
      return softmax_online<A>(x, y, n);
    case algorithm::automatic:
    default:
      if (!automatic_takes_two_pass<A, T>(n)) return softmax_three_pass<A>(x, y, n, exp_terms::reload);
      return softmax_two_pass<A>(x, y, n);
  }
}

// Calls g(f) with f(v) = v's log-probability, (v - m) - l, l = max(lse, 0)
// the log of the row's sum of e^(x - m), for every v of a row whose max is
// m: formed without a subnormal operand or result (every log form's write:
// log_softmax, its blocked rows, the attention rows, the 16-bit kernels).
template <class A, class T, class G>
SMAX_INLINE void with_log_probability(T m, double lse, G&& g) {
  using B = xsimd::batch<T, A>;
  constexpr T tiny = std::numeric_limits<T>::min() * static_cast<T>(std::uint64_t(1) << (exp_constants<T>::mantissa_bits + 2));
  // The true log-sum is >= 0 (the max's own term is 1); its rounding may
  // land a hair below, which would make the max's log-probability positive
  // (found by fuzz_softmax: x = {2^-149} gave y = 2^-149). Below the
  // smallest normal number it is taken as 0 (no subnormal operand; it
  // moves no output by more than that).
  const double l = std::max(lse, 0.0);
  if (!(std::fabs(m) < tiny)) {
    const B mb(m), lb(to_normal<T>(l));
    return g([=](B v) SMAX_LAMBDA_INLINE { return (v - mb) - lb; });
  }
  // A max below 2^(mantissa bits + 2) times the smallest normal number:
  // v - m can be subnormal (two such numbers closer than that), so f(v) =
  // v - c, c = m + l rounded once, and where both v and c are that small,
  // the difference taken scaled by 2^(mantissa bits + 9), exactly, and 0
  // where it lies below the normal range (found by the sanitized tests at
  // -O1: logits |normal(0, 1)| 2^-120, log_softmax's DE flag).
  T c = static_cast<T>(static_cast<double>(m) + l);
  if (std::fabs(c) < std::numeric_limits<T>::min()) c = T(0);
  const B cb(c);
  if (!(std::fabs(c) < tiny)) return g([=](B v) SMAX_LAMBDA_INLINE { return v - cb; });
  constexpr T up = static_cast<T>(std::uint64_t(1) << (exp_constants<T>::mantissa_bits + 9));
  const B tinyb(tiny), upb(up), downb(T(1) / up), cut(std::numeric_limits<T>::min() * up), cs(c * up);
  g([=](B v) SMAX_LAMBDA_INLINE {
    // (each side's operands set to harmless values on the other's lanes:
    // both sides are computed)
    const auto in_tiny = xsimd::abs(v) < tinyb;
    const B r = xsimd::fms(xsimd::select(in_tiny, v, B(T(0))), upb, cs);  // (v - c) 2^k, rounded once
    const B scaled_back = xsimd::select(xsimd::abs(r) >= cut, r * downb, B(T(0)));
    return xsimd::select(in_tiny, scaled_back, xsimd::select(in_tiny, B(T(1)), v) - cb);
  });
}

// log_softmax: y = (x - m) - log(sum e^(x - m)); the log of the sum is taken
// in double, from sum(e^x 2^-E) (see softmax_three_pass):
// log sum e^(x - m) = log sum(e^x 2^-E) - (m - E ln2).
template <class A, class T>
SMAX_INLINE void log_softmax_write(const T* x, T* y, std::size_t n, T m, double lse) noexcept {
  with_log_probability<A>(m, lse, [&](auto f) { map<A>(x, y, n, f); });
}

// Two reads: the max and sum(e^x 2^-E) in one (two_pass_sum), then the
// write; log sum e^(x - m) = log sum(e^x 2^-E) - (m - E ln2), in double. False
// (nothing written) where two_pass_sum cannot take x.
template <class A, class T>
SMAX_FLATTEN bool log_softmax_two_pass(const T* x, T* y, std::size_t n) noexcept {
  double s;
  T E, m;
  if (!two_pass_sum_tracked<A, true>(x, n, s, E, m, pass_through{})) return false;
  log_softmax_write<A>(x, y, n, m, std::log(s) - minus_e_ln2(static_cast<double>(m), static_cast<double>(E)));
  return true;
}

// From this many bytes of input log_softmax takes the two reads above
// instead of max, sum, write. AVX-512: in cache too (the saved max pass is
// worth more than two_pass_sum's bookkeeping from 16 KiB); AVX2: from 1 MiB;
// 4-lane ISAs (SSE2, NEON), bound by the arithmetic at every size: never
// (docs/tuning.md, "log_softmax in two passes").
template <class A>
constexpr std::size_t log_softmax_two_pass_bytes =
    is_avx512_v<A> ? (std::size_t(16) << 10)
    : std::is_base_of<xsimd::fma3<xsimd::avx2>, A>::value ? (std::size_t(1) << 20)
                                                           : ~std::size_t(0);

template <class A, class T>
SMAX_FLATTEN void log_softmax(const T* x, T* y, std::size_t n) noexcept {
  if (n == 0) return;
  if (n * sizeof(T) >= log_softmax_two_pass_bytes<A> && log_softmax_two_pass<A>(x, y, n)) return;
  const T m = reduce_max<A>(x, n);
  if (!is_finite(m)) return softmax_nonfinite(x, y, n, result_form::logs);
  double lse;
  if (use_split(m)) {
    double r;
    const T E = ref_exponent(m, r);
    lse = std::log(sum_map<A>(x, static_cast<T*>(nullptr), n,
                              exp_ref<A, T>(clamp_floor(m), E, T(1)))) - r;
  } else {
    lse = std::log(sum_map<A>(x, static_cast<T*>(nullptr), n, shifted_exp<A, T, false>(m)));
  }
  if (!(lse == lse)) return fill(y, n, std::numeric_limits<T>::quiet_NaN());
  log_softmax_write<A>(x, y, n, m, lse);
}

}  // namespace detail
}  // namespace smax
