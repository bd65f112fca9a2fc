// smax — attention-shaped softmax: the options a transformer's attention
// scores and logits carry (scale, soft-cap, additive mask with an ALiBi
// slope, a valid length, a sink logit), fused into the softmax's passes.
//
//   z_i = scale x_i; softcap > 0: z_i = softcap tanh(z_i / softcap);
//   mask: z_i += mask_scale mask_i (a -inf mask entry masks, whatever x_i);
//   i >= length: masked.
//   y_i = e^(z_i - M) / (sum_j e^(z_j - M) + e^(sink - M)), M = max(z, sink)
//
// Passes (three-pass reload on z, over the first `length` entries only):
//   1. z from x and mask, written to y, and its max     reads x, mask; writes y
//   2. y = e^z 2^-E and their sum                       y in place (in cache)
//   3. y *= 1 / (sum + sink term)                       y in place (in cache)
// so x and the mask are read once, and y written once from memory's point of
// view for a row that stays in L2 (attention rows: a few thousand entries).
// Pass 1 is loops.hpp's transform_max, passes 2 and 3 its sum_map and map
// on y. Without a soft-cap, pass 1 may store nothing and pass 2 form z
// again from x (and the mask): softmax_opts says where. No subnormal is
// formed: pass 2's exp is normal_exp (exp.hpp), pass 3 selects 0 where
// the product would fall below the smallest normal T.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "../parameters.hpp"
#include "../types.hpp"
#include "backward.hpp"
#include "batched.hpp"
#include "half.hpp"
#include "log.hpp"
#include "softmax.hpp"

namespace smax {

namespace detail {

template <class T>
void check_softmax_options(const char* fn, const softmax_options<T>& o) {
  const std::string f(fn);
  if (!is_finite(o.scale)) throw std::invalid_argument(f + ": scale must be finite");
  if (!(o.softcap >= 0) || !is_finite(o.softcap)) throw std::invalid_argument(f + ": softcap must be finite and >= 0");
  if (!is_finite(o.mask_scale)) throw std::invalid_argument(f + ": mask_scale must be finite");
  if (o.sink != o.sink || o.sink == std::numeric_limits<typename softmax_options<T>::S>::infinity())
    throw std::invalid_argument(f + ": sink must not be NaN or +inf");
}

// The |u| where tanh u already rounds to 1 (float 10, double 20).
template <class T>
constexpr T tanh_saturated = sizeof(T) == 4 ? T(10) : T(20);

// tanh(u) with |u| clamped where tanh(u) already rounds to +-1 (float 10,
// double 20), NaN passed around it: xsimd's double tanh on AVX2 converts
// exp(2u) to an integer, undefined for u = +-inf or NaN (UBSan, fuzz_losses).
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> tanh_clamped(xsimd::batch<T, A> u) noexcept {
  using B = xsimd::batch<T, A>;
  const B bound(tanh_saturated<T>);
  const B t = xsimd::tanh(xsimd::select(xsimd::abs(u) <= bound, u, xsimd::copysign(bound, u)));
  return xsimd::select(xsimd::isnan(u), u, t);  // (batch != is ordered on AVX: NaN != NaN is false)
}

// tanh u for u >= 0 (or NaN on NEON, where max keeps it): xsimd's generic
// tanh, the same bits, without its sign handling (an abs, the sign bit and
// an xor), which the soft-cap does once for both of its uses.
template <class A, class T>
SMAX_INLINE xsimd::batch<T, A> tanh_nonneg(xsimd::batch<T, A> u) noexcept {
  using B = xsimd::batch<T, A>;
  const auto small = u < B(T(0.625));
  B z(T(1));
  if (xsimd::any(small)) {
    z = xsimd::kernel::detail::tanh_kernel<B>::tanh(u);
    if (xsimd::all(small)) return z;
  }
  const B one(T(1));
  return xsimd::select(small, z, xsimd::fma(B(T(-2)), one / (one + xsimd::exp(u + u)), one));
}

// Where cap tanh(z / cap) is z: |z| < cap 2^-12 (float; double 2^-27), as
// tanh u = u (1 - u^2/3 ...) rounds to u there; at least min. Below it
// z / cap could be subnormal and xsimd's tanh squares its argument.
template <class T>
T softcap_linear_below(T cap) noexcept {
  const double r = static_cast<double>(cap) * (sizeof(T) == 4 ? 0x1p-12 : 0x1p-27);
  return static_cast<T>(std::max(r, static_cast<double>(std::numeric_limits<T>::min())));
}

// z from x (and the mask) for one vector of lanes. x scale is formed as
// given: an x within min / |scale| of 0 (about 1e-37 for scale 1/8) gives a
// subnormal product, as a subnormal x does (a cut there cost 12% in cache).
// The soft-cap forms none (caps outside [2^-114, 2^126] aside: float).
template <class A, class T, bool Mask, bool Cap>
struct score_transform {
  using B = xsimd::batch<T, A>;
  B scale, cap, inv_cap, linear_below, mscale;
  explicit score_transform(const softmax_options<T>& o) noexcept
      : scale(o.scale),
        cap(o.softcap),
        inv_cap(Cap ? static_cast<T>(std::min(1.0 / static_cast<double>(o.softcap),
                                              static_cast<double>(std::numeric_limits<T>::max())))
                    : T(0)),
        linear_below(Cap ? softcap_linear_below(o.softcap) : T(0)),
        mscale(o.mask_scale) {}
  SMAX_INLINE B operator()(B x, B m) const noexcept {
    B z = x * scale;
    if (Cap) {
      // |z| below linear_below (and NaN) stay z; tanh sees |z| / cap within
      // [2^-12, its saturation] (x86's max gives linear_below for NaN; caps
      // above 2^126 make 1 / cap itself subnormal).
      const B a = xsimd::abs(z);
      const auto linear = !(a >= linear_below);
      const B t = cap * tanh_nonneg<A, T>(xsimd::min(xsimd::max(a, linear_below) * inv_cap, B(tanh_saturated<T>)));
      z = xsimd::select(linear, z, t ^ (z & B(T(-0.0))));
    }
    if (Mask) {
      constexpr T ninf = -std::numeric_limits<T>::infinity();
      z = xsimd::select(m == B(ninf), B(ninf), fma_<A, T>(mscale, m, z));
    }
    return z;
  }
};

template <class A, class T>
T transform_max(const T* x, T* y, std::size_t n, const softmax_options<T>& o) noexcept {
  const bool cap = o.softcap > 0;
  if (o.mask)
    return cap ? transform_max<A, T, true>(x, o.mask, y, n, score_transform<A, T, true, true>(o))
               : transform_max<A, T, true>(x, o.mask, y, n, score_transform<A, T, true, false>(o));
  return cap ? transform_max<A, T, false>(x, o.mask, y, n, score_transform<A, T, false, true>(o))
             : transform_max<A, T, false>(x, o.mask, y, n, score_transform<A, T, false, false>(o));
}

// The output, in bytes, from which softmax with a mask forms z again in
// pass 2 (reading x and the mask twice) rather than storing it in pass 1:
// below it, pass 1's stores find y's lines in cache and are cheaper than
// the second read (docs/tuning.md, "Attention passes").
constexpr std::size_t recompute_masked_min_bytes = std::size_t(4) << 20;
// Where that was measured to pay: AVX-512 on Zen 4 only (docs/tuning.md,
// "With the mask, on Zen 4", has the other ISAs and cores).
template <class A>
bool recompute_masked_pays() noexcept {
  return is_avx512_v<A> && avx512_on_256bit_units();
}

// softmax / log_softmax with options (arguments checked by the caller).
// batch_bytes: the output of the whole batch this row belongs to (0: the
// row alone).
template <class A, class T>
void softmax_opts(const T* x, T* y, std::size_t n, const softmax_options<T>& o, result_form form,
                  std::size_t batch_bytes = 0) noexcept {
  const bool log = form == result_form::logs;
  using B = xsimd::batch<T, A>;
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  if (n == 0) return;
  const std::size_t len = std::min(n, o.length);
  const T masked = log ? -inf : T(0);
  // Without a soft-cap, z = scale x is formed again where it is needed
  // rather than stored by pass 1 and read back: pass 1 then only reads, as
  // plain softmax's max pass does (docs/tuning.md, "Attention passes").
  // With a mask too where the output is large and that pays (pass 2 then
  // reads x and the mask row again); the log form with a mask stores z. The
  // same z, sums and outputs either way.
  const bool recompute =
      !(o.softcap > 0) && (!o.mask || (!log && std::max(batch_bytes, n * sizeof(T)) >= recompute_masked_min_bytes &&
                                       recompute_masked_pays<A>()));
  const T m = transform_max<A>(x, recompute ? static_cast<T*>(nullptr) : y, len, o);
  touch_gap(x, len, n);
  if (o.mask) touch_gap(o.mask, len, n);
  if (!is_finite(m)) {
    // NaN (or one the max dropped), +inf entries sharing the mass, or
    // everything masked (zeros, with or without a sink): read from z.
    if (recompute) transform_max<A>(x, y, len, o);
    for (std::size_t i = 0; i < len; ++i)
      if (y[i] != y[i]) return fill(y, n, nan);
    if (m == inf)
      softmax_nonfinite(y, y, len, form);
    else
      fill(y, len, masked);
    return fill(y + len, n - len, masked);
  }
  const T M = std::max(m, o.sink);
  // sum over z of e^z 2^-E (or e^(z - M)) into s, with shift = E ln2 (or M).
  double s, shift;
  T* const terms = log ? static_cast<T*>(nullptr) : y;
  const auto pass2 = [&](auto&& e) {
    if (recompute && o.mask) {
      // (the scores formed in the loads, from x and the mask row)
      const auto z = pair_source(x, o.mask, score_transform<A, T, true, false>(o));
      s = sum_map<A>(z, terms, len, [=](B v) SMAX_LAMBDA_INLINE { return e(opaque<A, T>(v)); });
    } else if (recompute) {
      // (opaque: z rounded as the stored one was, not contracted into the
      // exp's subtraction of M)
      const score_transform<A, T, false, false> z(o);
      s = sum_map<A>(x, terms, len, [=](B v) SMAX_LAMBDA_INLINE { return e(opaque<A, T>(z(v, B(T(0))))); });
    } else {
      s = sum_map<A>(y, terms, len, e);
    }
  };
  if (use_split(M)) {
    double r;
    const T E = ref_exponent(M, r);
    shift = static_cast<double>(M) - r;
    pass2(normal_exp<A, T>(E, T(1)));
  } else {
    const B Mb(M);
    const normal_exp<A, T> e(T(0), T(1));
    shift = static_cast<double>(M);
    pass2([&](B v) SMAX_LAMBDA_INLINE { return e(v - Mb); });
  }
  if (!(s == s)) return fill(y, n, nan);
  s += exp_flushed(static_cast<double>(o.sink) - shift);  // 0 for no sink
  if (log) {
    // log sum e^(z - M) >= 0: M is a z or the sink, whose term is 1.
    with_log_probability<A>(M, std::log(s) + shift - static_cast<double>(M), [&](auto f) {
      if (recompute) {  // (never with a mask in the log form: z is x scale here)
        const score_transform<A, T, false, false> z(o);
        map<A>(x, y, len, [=](B v) SMAX_LAMBDA_INLINE { return f(opaque<A, T>(z(v, B(T(0))))); });
      } else {
        map<A>(y, y, len, f);
      }
    });
  } else {
    // Products that would be subnormal are 0: compare before multiplying.
    const B inv(static_cast<T>(1.0 / s));
    // (at least min: with s < 1, which the split reference allows, every
    // normal v gives a normal v / s. No branch: clang evaluates both arms.)
    const double tmin = static_cast<double>(std::numeric_limits<T>::min());
    const B t(static_cast<T>(tmin * std::max(s, 1.0) * (1 + 0x1p-20)));
    map<A>(y, y, len, [=](B v) SMAX_LAMBDA_INLINE { return xsimd::select(v < t, B(T(0)), v) * inv; });
  }
  vector_fill<A>(y + len, n - len, masked);
}

// dx w.r.t. x: dz = y (dy - y.dy) (the sink's own gradient is not
// returned), dx = dz scale (softcap: times 1 - tanh^2(scale x / softcap)).
// Masked entries (y = 0) get 0.
template <class A, class T>
void softmax_backward_opts(const T* x, const T* y, const T* dy, T* dx, std::size_t n,
                           const softmax_options<T>& o) noexcept {
  using B = xsimd::batch<T, A>;
  if (n == 0) return;
  const std::size_t len = std::min(n, o.length);
  // (softmax_backward's term and products kept normal: no subnormal is formed)
  const T dot = softmax_backward_term<A, T>::dot_of(y, dy, len);
  touch_gap(y, len, n);
  touch_gap(dy, len, n);
  const B sc(o.scale);
  with_backward_term<A, T>(dot, [&](const auto& term) {
    map_pairs<A>(y, dy, dx, len, [=](B a, B b) SMAX_LAMBDA_INLINE {
      return xsimd::select(a == B(T(0)), B(T(0)), mul_normal<A, T>(term(a, b), sc));
    });
  });
  if (o.softcap > 0) {
    // 1 - tanh^2 u, u = |x| f, f = |scale / softcap|, no u (nor tanh's u^2)
    // subnormal: |x| is clamped below where 1 - tanh^2 already rounds to 1
    // (u = 2^-13, double 2^-28), u above at tanh's saturation. For f in
    // [2^-100, 2^100], u = max(|x|, lo) f. Beyond, the product in two steps
    // through 2^k, k = 64 (double 512) so that neither leaves T's range:
    // above 2^100, max(|x| 2^k, lo 2^k) (f 2^-k), f taken at most 2^150
    // (float: every normal x saturates there; double: DBL_MAX); below 2^-100,
    // (max(|x|, lo) 2^-k) (f 2^k), or 1 - tanh^2 = 1 for every finite x where
    // lo is beyond T's range. (A NaN x reaches dx through y; x86's max drops
    // it here.)
    const double f = std::fabs(static_cast<double>(o.scale) / static_cast<double>(o.softcap));
    const double lo = (sizeof(T) == 4 ? 0x1p-13 : 0x1p-28) / f;  // (inf for f = 0)
    const double k = sizeof(T) == 4 ? 0x1p64 : 0x1p512;
    const double tmax = static_cast<double>(std::numeric_limits<T>::max());
    const B one(T(1)), sat(tanh_saturated<T>);
    const auto factor = [&](B g, B t) SMAX_LAMBDA_INLINE {
      return xsimd::select(g == B(T(0)), B(T(0)), mul_normal<A, T>(g, fnma_<A, T>(t, t, one)));
    };
    if (f >= 0x1p-100 && f <= 0x1p100) {
      const B lo_b(static_cast<T>(lo)), ic(static_cast<T>(f));
      map_pairs<A>(x, dx, dx, len, [=](B v, B g) SMAX_LAMBDA_INLINE {
        return factor(g, tanh_nonneg<A, T>(xsimd::min(xsimd::max(xsimd::abs(v), lo_b) * ic, sat)));
      });
    } else if (f > 0x1p100) {
      const double fc = std::min(f, sizeof(T) == 4 ? 0x1p150 : std::numeric_limits<double>::max());
      const B up(static_cast<T>(k)), lo_up(static_cast<T>((sizeof(T) == 4 ? 0x1p-13 : 0x1p-28) / fc * k)),
          ic(static_cast<T>(fc / k));
      map_pairs<A>(x, dx, dx, len, [=](B v, B g) SMAX_LAMBDA_INLINE {
        return factor(g, tanh_clamped<A, T>(xsimd::max(xsimd::abs(v) * up, lo_up) * ic));
      });
    } else if (lo <= tmax) {
      const B lo_b(static_cast<T>(lo)), down(static_cast<T>(1 / k)), ic(static_cast<T>(f * k));
      map_pairs<A>(x, dx, dx, len, [=](B v, B g) SMAX_LAMBDA_INLINE {
        return factor(g, tanh_clamped<A, T>((xsimd::max(xsimd::abs(v), lo_b) * down) * ic));
      });
    } else {
      const B inf(std::numeric_limits<T>::infinity());
      map_pairs<A>(x, dx, dx, len, [=](B v, B g) SMAX_LAMBDA_INLINE {
        return factor(g, xsimd::select(xsimd::abs(v) == inf, one, B(T(0))));
      });
    }
    touch_gap(x, len, n);
  }
  fill(dx + len, n - len, T(0));  // memset: faster here than vector_fill (docs/tuning.md, "Masked tails")
}

// ---- batched ----

template <class T>
void check_attention(const char* fn, const matrix_view<const T>& x, const attention_options<T>& o) {
  const std::string f(fn);
  softmax_options<T> so;
  so.scale = o.scale;
  so.softcap = o.softcap;
  check_softmax_options(fn, so);
  if (o.heads == 0 || x.rows % o.heads != 0) throw std::invalid_argument(f + ": heads must divide rows");
  if (o.mask.data) {
    if (o.mask.rows == 0 || o.mask.cols < x.cols || o.mask.stride < o.mask.cols)
      throw std::invalid_argument(f + ": mask must have rows > 0, cols >= x.cols and stride >= cols");
  }
  if (!(o.max_bias >= 0) || !is_finite(o.max_bias)) throw std::invalid_argument(f + ": max_bias must be finite and >= 0");
  for (std::size_t h = 0; o.slopes && h < o.heads; ++h)
    if (!is_finite(o.slopes[h])) throw std::invalid_argument(f + ": slopes must be finite");
  for (std::size_t h = 0; o.sinks && h < o.heads; ++h)
    if (o.sinks[h] != o.sinks[h] || o.sinks[h] == std::numeric_limits<typename attention_options<T>::S>::infinity())
      throw std::invalid_argument(f + ": sinks must not be NaN or +inf");
}

// Row r's single-vector options.
template <class T>
softmax_options<T> row_options(const attention_options<T>& o, std::size_t rows, std::size_t r) noexcept {
  softmax_options<T> so;
  so.scale = o.scale;
  so.softcap = o.softcap;
  const std::size_t per_head = rows / o.heads;
  const std::size_t h = r / per_head, q = r % per_head;
  if (o.mask.data) so.mask = o.mask.row(r % o.mask.rows);
  if (o.slopes)
    so.mask_scale = o.slopes[h];
  else if (o.max_bias > 0)
    so.mask_scale = static_cast<typename softmax_options<T>::S>(alibi_slope(h, o.heads, static_cast<double>(o.max_bias)));
  if (o.lengths.per_row) {
    so.length = o.lengths.per_row[r];
  } else if (o.lengths.is_causal) {
    const std::ptrdiff_t keep = static_cast<std::ptrdiff_t>(q) + o.lengths.offset + 1;
    so.length = keep < 0 ? 0 : static_cast<std::size_t>(keep);
  }
  if (o.sinks) so.sink = o.sinks[h];
  return so;
}

template <class A, class T>
void softmax_attention_rows(matrix_view<const T> x, matrix_view<T> y, const attention_options<T>& o, executor* ex,
                            result_form form) {
  const std::size_t bytes = y.rows * y.cols * sizeof(T);
  for_each_row_index(
      x.rows, x.cols, default_executor(ex),
      [&](std::size_t r) { softmax_opts<A>(x.row(r), y.row(r), x.cols, row_options(o, x.rows, r), form, bytes); },
      o.mask.data ? rows_ahead_pays(x, o.mask) : rows_ahead_pays(x));  // (the mask read beside x: dense too)
}

// Row r's options for the backward pass, which uses the scale, the
// softcap and the length only: no mask row (the 16-bit form would widen it).
template <class T>
softmax_options<T> backward_row_options(const attention_options<T>& o, std::size_t rows, std::size_t r) noexcept {
  softmax_options<T> so = row_options(o, rows, r);
  so.mask = nullptr;
  return so;
}

// The backward pass of softmax_attention_rows: row r is softmax_backward_opts
// with row r's options.
template <class A, class T>
void softmax_backward_attention_rows(matrix_view<const T> x, matrix_view<const T> y, matrix_view<const T> dy,
                                     matrix_view<T> dx, const attention_options<T>& o, executor* ex) {
  for_each_row_index(
      dx.rows, dx.cols, default_executor(ex),
      [&](std::size_t r) {
        softmax_backward_opts<A>(x.row(r), y.row(r), dy.row(r), dx.row(r), dx.cols,
                                 backward_row_options(o, dx.rows, r));
      },
      o.softcap > 0 ? rows_ahead_pays(y, dy, x) : rows_ahead_pays(y, dy));  // (x read with a soft-cap)
}

}  // namespace detail
}  // namespace smax
