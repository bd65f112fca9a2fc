// smax — the sparse family: sparsemax, 1.5-entmax and alpha-entmax (Blondel
// et al.'s bisection), and their vector-Jacobian products, in expected
// linear time without sorting.
//
// Every forward kernel has the same shape (d_i = x_i - m, m = max x):
//
//   pass 1  m = max x (and whether x holds a NaN), and on the way   read n
//           the candidates d_i > -r against the running max, into
//           y itself (r = 1/(alpha-1): 1 for sparsemax, 2 for 1.5-entmax)
//   solve   the threshold t on the candidates only, in double
//   pass 2  y_i = ((alpha-1) (x_i - (m + t)))_+^(1/(alpha-1))      read n, write n
//
// (In place, the candidates go to a stack buffer; if they overflow it, a
// second read of x collects them against the final max.)
//
// Why only the candidates: the largest entry alone has output
// ((alpha-1)(0 - t))^(1/(alpha-1)) <= 1, so t >= -r, and every entry with
// d_i <= -r is outside the support. For logits of spread sigma that is the
// top few hundred entries of a million, so the solve costs nothing next to
// the passes; when every entry is a candidate (a narrow input) the solve is
// still linear in expectation (see sparse_threshold).
//
// Exactness. The solve works on d_i in double (exact for float input, and
// x - m needs no rounding near the max when |m| >= 2r by Sterbenz), finds the
// support, then solves the threshold on it in closed form (sparsemax,
// 1.5-entmax) or by Newton's method to full double precision (alpha-entmax).
// The threshold m + t is kept as an unevaluated pair hi + lo of T, so that
// (x - hi) - lo is x - (m + t) to within one rounding of the result even when
// the output is tiny against |x| (x - hi is exact by Sterbenz there), and
// even for |m| near the largest finite T.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "exp.hpp"
#include "log.hpp"
#include "loops.hpp"
#include "pair_loops.hpp"
#include "softmax.hpp"

namespace smax {
namespace detail {

// Pass 1 is loops.hpp's max_or_nan.

// The checks of entmax_bisect and entmax_backward (float, double and 16-bit
// forms): std::invalid_argument unless alpha >= 1 is finite and n_iter >= 0.
template <class T>
void check_entmax(const char* fn, T alpha, int n_iter = 0) {
  if (!(alpha >= T(1)) || !is_finite(alpha)) throw std::invalid_argument(std::string(fn) + ": alpha must be finite and >= 1");
  if (n_iter < 0) throw std::invalid_argument(std::string(fn) + ": n_iter must be >= 0");
}

// --------------------------------------------------------------- pass 2 --

// Where the candidates go: y itself when the call is out of place (y is
// free until the output pass, and its pages are the caller's, already
// mapped), else a stack buffer, then a heap one grown geometrically. They are
// stored as the T values x_i; the solve computes d_i = x_i - m in double.
template <class T>
class candidate_store {
 public:
  static constexpr std::size_t stack_capacity = 2048;
  candidate_store(T* spare, std::size_t spare_capacity) noexcept
      : data_(spare ? spare : stack_), cap_(spare ? spare_capacity : stack_capacity) {}
  candidate_store(const candidate_store&) = delete;
  candidate_store& operator=(const candidate_store&) = delete;
  T* data() noexcept { return data_; }
  // Room for `need` values, keeping the first `used`; never more than `bound`.
  void reserve(std::size_t need, std::size_t used, std::size_t bound) {
    if (need <= cap_) return;
    const std::size_t cap = std::min(std::max(need, 2 * cap_), std::max(need, bound));
    std::unique_ptr<T[]> h(new T[cap]);
    std::memcpy(h.get(), data_, used * sizeof(T));
    heap_ = std::move(h);
    data_ = heap_.get();
    cap_ = cap;
  }

 private:
  T stack_[stack_capacity];
  std::unique_ptr<T[]> heap_;
  T* data_;
  std::size_t cap_;
};

// A T at or below the largest T under m - r (r > 0, may be +inf): x > cut
// keeps every x with x - m > -r, and a few more, never fewer.
template <class T>
T candidate_cut(T m, double r) noexcept {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const double c = static_cast<double>(m) - r;
  if (!(c >= -static_cast<double>(std::numeric_limits<T>::max()))) return ninf;
  return std::nextafter(static_cast<T>(c), ninf);
}

// Copies every x_i > cut to the store, in order; returns how many. Vectors
// without a candidate (nearly all, for spread-out logits) cost one compare;
// the others are copied lane by lane without branches.
// (x may be 16-bit, T float: the candidates are the widened values.)
template <class A, class S, class T>
std::size_t collect_candidates(const S* x, std::size_t n, T cut, candidate_store<T>& store) {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  const B cv(cut);
  std::size_t k = 0, i = 0;
  const auto take = [&](std::size_t start, std::size_t count) {
    store.reserve(k + count, k, k + (n - start));
    T* b = store.data();
    for (std::size_t l = 0; l < count; ++l) {
      const T v = static_cast<T>(x[start + l]);
      b[k] = v;
      k += (v > cut);
    }
  };
  for (; i + 4 * W <= n; i += 4 * W) {
    const auto hit = ((load_as<A, T>(x + i) > cv) | (load_as<A, T>(x + i + W) > cv)) |
                     ((load_as<A, T>(x + i + 2 * W) > cv) | (load_as<A, T>(x + i + 3 * W) > cv));
    if (xsimd::any(hit)) take(i, 4 * W);
  }
  for (; i + W <= n; i += W)
    if (xsimd::any(load_as<A, T>(x + i) > cv)) take(i, W);
  if (i < n) take(i, n - i);
  return k;
}

// Appends the lanes of v where `keep` holds to b[k..] in order, as T (v is
// T, or double holding T values: exact); returns the new count. b must have
// room for a whole vector at b + k. AVX-512 has a compress instruction (to a
// register, then a plain store: vcompressps to memory is microcoded on AMD);
// elsewhere lane by lane without branches.
template <class A, class T, class S>
SMAX_INLINE std::size_t append_where(T* b, std::size_t k, xsimd::batch<S, A> v, xsimd::batch_bool<S, A> keep) noexcept {
#if defined(__AVX512F__)
  if constexpr (is_avx512_v<A>) {
    if constexpr (std::is_same<S, float>::value) {
      const __mmask16 mk = keep.data;
      _mm512_storeu_ps(b + k, _mm512_maskz_compress_ps(mk, v));
      return k + static_cast<std::size_t>(__builtin_popcount(mk));
    } else {
      const __mmask8 mk = keep.data;
      const __m512d c = _mm512_maskz_compress_pd(mk, v);
      if constexpr (std::is_same<T, float>::value)
        _mm256_storeu_ps(b + k, _mm512_cvtpd_ps(c));
      else
        _mm512_storeu_pd(b + k, c);
      return k + static_cast<std::size_t>(__builtin_popcount(mk));
    }
  }
#endif
  constexpr std::size_t W = xsimd::batch<S, A>::size;
  alignas(64) S lanes[W];
  alignas(64) bool kept[W];
  v.store_aligned(lanes);
  keep.store_aligned(kept);
  for (std::size_t l = 0; l < W; ++l) {
    b[k] = static_cast<T>(lanes[l]);
    k += kept[l];
  }
  return k;
}

// Passes 1 and 2 in one read of x: the max (NaN when x holds a NaN), and the
// candidates against the running max. The running max never exceeds m, so
// its cut never exceeds the final one: every x_i > m - r is collected, plus
// some that the final max rules out, which the solve drops in its first
// pass. The cut starts from the max of the first 1024 entries and is
// refreshed from the lanes' maxima every 16 chunks. Collection stops when
// it would pass `limit` (in place: the stack buffer); `complete` then says
// the caller must collect again against the final max (collect_candidates).
template <class A, class S, class T>
T max_and_candidates(const S* x, std::size_t n, double r, candidate_store<T>& store, std::size_t limit,
                     std::size_t& count, bool& complete) {
  using B = xsimd::batch<T, A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t refresh = 16;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  count = 0;
  complete = true;
  const T seed = max_or_nan<A>(x, std::min<std::size_t>(n, 1024));
  if (seed != seed) return seed;
  T cut = candidate_cut(seed, r);
  B cv(cut);
  B m0(seed), m1(ninf), m2(ninf), m3(ninf);
  auto ok = B(T(0)) == B(T(0));
  std::size_t i = 0, k = 0, since = 0;
  const auto lanes_max = [&] { return hmax<A>(xsimd::max(xsimd::max(m0, m1), xsimd::max(m2, m3))); };
  for (; i + 4 * W <= n; i += 4 * W) {
    const B v0 = load_as<A, T>(x + i), v1 = load_as<A, T>(x + i + W);
    const B v2 = load_as<A, T>(x + i + 2 * W), v3 = load_as<A, T>(x + i + 3 * W);
    m0 = xsimd::max(m0, v0);
    m1 = xsimd::max(m1, v1);
    m2 = xsimd::max(m2, v2);
    m3 = xsimd::max(m3, v3);
    ok = ok & ((v0 == v0) & (v1 == v1)) & ((v2 == v2) & (v3 == v3));
    if (complete) {
      const auto h0 = v0 > cv, h1 = v1 > cv, h2 = v2 > cv, h3 = v3 > cv;
      if (xsimd::any((h0 | h1) | (h2 | h3))) {
        if (k + 4 * W > limit) {
          complete = false;
        } else {
          store.reserve(k + 4 * W, k, n);
          T* b = store.data();
          k = append_where<A>(b, k, v0, h0);
          k = append_where<A>(b, k, v1, h1);
          k = append_where<A>(b, k, v2, h2);
          k = append_where<A>(b, k, v3, h3);
        }
      }
    }
    if (++since == refresh) {
      since = 0;
      if (!xsimd::all(ok)) return std::numeric_limits<T>::quiet_NaN();
      cut = candidate_cut(lanes_max(), r);
      cv = B(cut);
    }
  }
  for (; i < n; i += W) {
    const std::size_t len = std::min(W, n - i);
    const B v = len == W ? load_as<A, T>(x + i) : load_as_partial<A, T>(x + i, len, ninf);
    m0 = xsimd::max(m0, v);
    ok = ok & (v == v);
    if (complete && xsimd::any(v > cv)) {
      if (k + W > limit) {
        complete = false;
      } else {
        store.reserve(k + W, k, n);
        T* b = store.data();
        for (std::size_t l = 0; l < len; ++l) {
          const T v = static_cast<T>(x[i + l]);
          b[k] = v;
          k += (v > cut);
        }
      }
    }
  }
  if (!xsimd::all(ok)) return std::numeric_limits<T>::quiet_NaN();
  count = k;
  return lanes_max();
}

// ---------------------------------------------------------------- solve --

// One pass over the candidates b[0..k) (T values; d = x - m in double):
// keeps, in order and in place, the entries with lo < d < hi; calls
// stat(d, keep-mask) on every batch of doubles and flush() every block of
// batches and at the end (stat's per-lane sums go to compensated totals
// there, so their error does not grow with k); returns how many were kept.
template <class A, class T, class Stat, class Flush>
std::size_t filter_pass(T* b, std::size_t k, double m, double lo, double hi, Stat&& stat, Flush&& flush) noexcept {
  using D = xsimd::batch<double, A>;
  constexpr std::size_t W = D::size;
  constexpr std::size_t block = 64;
  const D md(m), lov(lo), hiv(hi);
  const auto keep1 = [&](T v) {
    const double d = static_cast<double>(v) - m;  // the same operation as the batch's
    return (d > lo) & (d < hi);
  };
  std::size_t j = 0, i = 0, in_block = 0;
  // Compacts one batch loaded from b + at (at >= j: never overwrites an
  // unread value).
  const auto compact = [&](std::size_t at, D v, decltype(lov > hiv) keep) {
    if (xsimd::all(keep)) {
      if (j != at)
        for (std::size_t l = 0; l < W; ++l) b[j + l] = b[at + l];  // j < at: forward copy is safe
      j += W;
    } else if (xsimd::any(keep)) {
      j = append_where<A>(b, j, v, keep);  // (j <= the index v was loaded from)
    }
  };
  // Four batches per step: their stat computations (a power each, for
  // alpha-entmax) are independent chains the core overlaps.
  for (; i + 4 * W <= k; i += 4 * W) {
    in_block += 4;
    if (in_block >= block) {
      flush();
      in_block = 0;
    }
    const D v0 = D::load_unaligned(b + i), v1 = D::load_unaligned(b + i + W);  // float -> double is exact
    const D v2 = D::load_unaligned(b + i + 2 * W), v3 = D::load_unaligned(b + i + 3 * W);
    const D d0 = v0 - md, d1 = v1 - md, d2 = v2 - md, d3 = v3 - md;
    const auto k0 = (d0 > lov) & (d0 < hiv), k1 = (d1 > lov) & (d1 < hiv);
    const auto k2 = (d2 > lov) & (d2 < hiv), k3 = (d3 > lov) & (d3 < hiv);
    stat(d0, k0);
    stat(d1, k1);
    stat(d2, k2);
    stat(d3, k3);
    compact(i, v0, k0);
    compact(i + W, v1, k1);
    compact(i + 2 * W, v2, k2);
    compact(i + 3 * W, v3, k3);
  }
  for (; i + W <= k; i += W) {
    const D v = D::load_unaligned(b + i);
    const D d = v - md;
    const auto keep = (d > lov) & (d < hiv);
    stat(d, keep);
    compact(i, v, keep);
  }
  if (i < k) {
    alignas(64) double tail[W];
    for (std::size_t l = 0; l < W; ++l) tail[l] = i + l < k ? static_cast<double>(b[i + l]) - m : -std::numeric_limits<double>::infinity();
    const D d = D::load_aligned(tail);
    stat(d, (d > lov) & (d < hiv));
    for (std::size_t l = i; l < k; ++l) {
      const T v1 = b[l];
      b[j] = v1;
      j += keep1(v1);
    }
  }
  flush();
  return j;
}

// The entries known to be in the support (sparse_threshold's pivot steps):
// their count and sum (d - R), sum (d - R)^2 about a reference R, every such
// d >= R > t*.
struct known_support {
  double count = 0, s1 = 0, s2 = 0, R = 0;
};

// sparse_threshold's pivot step on v: if G(v) >= P^P, v is a lower bound of
// the root and t (and the cut) rise to v or Newton's step from it, whichever
// is larger; otherwise every entry >= v is in the support: its moments join
// `known` (re-expressed relative to R = v) and it leaves b. Returns the
// candidates left; counts its passes.
template <class A, int P, class T>
std::size_t sparse_pivot(T* b, std::size_t k, double m, double v, double& t, double& cut, known_support& known,
                         int& pass_count) noexcept {
  using B = xsimd::batch<double, A>;
  constexpr double target = P == 1 ? 1.0 : 4.0;
  constexpr double inf = std::numeric_limits<double>::infinity();
  B cg(0.0), cge(0.0), q1(0.0), q2(0.0);
  compensated<A, double> q1c, q2c;
  const B vv(v);
  ++pass_count;
  filter_pass<A>(
      b, k, m, -inf, inf,
      [&](B d, auto keep) {
        const auto ge = keep & (d >= vv);
        const B e = d - vv;
        cg += xsimd::select(keep & (d > vv), B(1.0), B(0.0));
        cge += xsimd::select(ge, B(1.0), B(0.0));
        q1 += xsimd::select(ge, e, B(0.0));
        if (P == 2) q2 += xsimd::select(ge, e * e, B(0.0));
      },
      [&] {
        q1c.add(q1);
        q2c.add(q2);
        q1 = q2 = B(0.0);
      });
  double Cg = hsum<A>(cg), Q1 = hsum<A>(q1c.value()), Q2 = hsum<A>(q2c.value());
  const double Cge = hsum<A>(cge);
  const double kc = known.count, k1 = known.s1, k2 = known.s2;
  const double g = kc > 0 ? known.R - v : 0.0;  // known entries are >= R > v
  const double G = P == 1 ? Q1 + k1 + kc * g : Q2 + k2 + 2 * g * k1 + kc * g * g;
  if (G >= target) {
    // v is a lower bound; Newton from it is a better one.
    Cg += kc;
    Q1 += k1 + kc * g;
    const double nv = v + (P == 1 ? (G - 1.0) / Cg : (G - 4.0) / (2.0 * Q1));
    t = std::max(t, std::max(v, nv));
    cut = t;
    return k;
  }
  // v > t*: every entry >= v is in the support.
  known.s2 += 2 * g * k1 + kc * g * g;
  known.s1 += kc * g;
  known.s1 += Q1;
  known.s2 += Q2;
  known.count += Cge;
  known.R = v;
  ++pass_count;
  return filter_pass<A>(b, k, m, -inf, v, [](B, auto) {}, [] {});
}

// The threshold t of sparsemax (P = 1) and 1.5-entmax (P = 2) on the
// candidates b[0..k) (destroyed): the root of
//     G(t) = sum_i (d_i - t)_+^P = P^P     (sparsemax: 1, 1.5-entmax: 4),
// G convex and decreasing; -P <= t < 0.
//
// Newton's method from the left (t a lower bound, G(t) >= P^P): for a convex
// G every step stays a lower bound, and for P = 1 it is Michelot's
// algorithm. Each pass drops the entries d <= t (outside the support) and
// tries the closed form on the rest (sum of (e - w) and count for P = 1, the
// smaller root of the quadratic for P = 2, e = d - t); it is the exact
// threshold when every kept entry stays above it. Sums are taken relative to
// the current t, so no term cancels (all e > 0). The closed form evaluated
// far below the root loses digits (its discriminant cancels like the moments
// of e do), so once the support is known one more pass re-evaluates it
// relative to the threshold just found: that correction is tiny and exact.
//
// Expected linear time: when a pass removes less than a quarter of the
// entries, a pivot step (median of three random entries v) follows: if
// G(v) >= P^P then t jumps to v and beyond, else every entry >= v is in the
// support and moves to the "known" moments (taken relative to v, so they
// stay positive too). Either way an expected constant fraction goes.
template <class A, int P, class T>
double sparse_threshold(T* b, std::size_t k, double m, int* passes = nullptr) noexcept {
  using B = xsimd::batch<double, A>;
  constexpr double inf = std::numeric_limits<double>::infinity();
  double t = -static_cast<double>(P);  // the max alone gives G(-P) = P^P
  double cut = t;                      // entries d <= cut are out
  bool refining = false;
  known_support known;
  std::uint64_t rng = 0x9E3779B97F4A7C15ull;
  const auto random_index = [&](std::size_t size) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return static_cast<std::size_t>(rng % size);
  };
  int pass_count = 0;
  struct report {  // the passes taken, on every return
    int& count;
    int* out;
    ~report() {
      if (out) *out = count;
    }
  } rep{pass_count, passes};
  for (int iter = 0; iter < 10000; ++iter) {
    const std::size_t before = k;
    ++pass_count;
    B c(0.0), s1(0.0), s2(0.0), mn(inf);
    compensated<A, double> s1c, s2c;
    const B tv(t);
    k = filter_pass<A>(
        b, k, m, cut, inf,
        [&](B v, auto keep) {
          const B e = v - tv;
          c += xsimd::select(keep, B(1.0), B(0.0));
          s1 += xsimd::select(keep, e, B(0.0));
          if (P == 2) s2 += xsimd::select(keep, e * e, B(0.0));
          mn = xsimd::min(mn, xsimd::select(keep, e, B(inf)));
        },
        [&] {
          s1c.add(s1);
          s2c.add(s2);
          s1 = s2 = B(0.0);
        });
    double cnt = hsum<A>(c), S1 = hsum<A>(s1c.value()), S2 = hsum<A>(s2c.value());
    const double mine = -hmax<A>(-mn);  // +inf when nothing is left
    if (known.count > 0) {
      const double g = known.R - t;  // > 0
      cnt += known.count;
      S2 += known.s2 + 2 * g * known.s1 + known.count * g * g;
      S1 += known.s1 + known.count * g;
    }
    if (!(cnt > 0)) return t;
    // Closed form assuming the support is exactly what is left.
    double w;
    if (P == 1) {
      w = (S1 - 1.0) / cnt;
    } else {
      const double F = S2 - 4.0, disc = S1 * S1 - cnt * F;
      w = disc >= 0 ? F / (S1 + std::sqrt(disc)) : std::numeric_limits<double>::quiet_NaN();
    }
    if (w <= mine && (known.count == 0 || t + w < known.R)) {
      if (refining) return t + w;
      cut = t;  // the same entries, measured from the new t
      t += w;
      refining = true;
      continue;
    }
    // The re-evaluation found an entry within rounding of t: keep the first
    // closed form.
    if (refining) return t;
    // Newton step from the lower bound t.
    const double step = P == 1 ? w : (S2 - 4.0) / (2.0 * S1);
    if (!(step > 0)) return t;  // at the root to rounding
    t += step;
    cut = t;
    if (k > 64 && (before - k) * 4 < before) {
      // Pivot step on the median of three random entries.
      const auto at = [&](std::size_t idx) { return static_cast<double>(b[idx]) - m; };
      const double p0 = at(random_index(k)), p1 = at(random_index(k)), p2 = at(random_index(k));
      const double v = std::max(std::min(p0, p1), std::min(std::max(p0, p1), p2));
      k = sparse_pivot<A, P>(b, k, m, v, t, cut, known, pass_count);
    }
  }
  return t;
}

// Iterations one entmax_bisect threshold search took: bisection steps (until
// the support was known or n_iter ran out) and Newton steps after them.
struct bisect_count {
  int bisection = 0;
  int newton = 0;
};

// The threshold t of alpha-entmax on the candidates b[0..k) (destroyed): the
// root of F(t) = sum_i (am1 (d_i - t))_+^p = 1, p = 1/am1, t in [-p, 0).
// Blondel et al.'s bisection on t (vectorized over the candidates, each step
// dropping the entries below the bracket), stopped as soon as no candidate
// lies inside the bracket (lo, hi]: then the support is known, F is smooth
// on the bracket, and Newton's method (from the side where it converges
// monotonically: lo for a convex F, p >= 1; hi for a concave F, p < 1;
// bisection whenever a step would leave the bracket) finishes at full double
// precision in a few steps. n_iter bounds the bisection; the safeguarded
// Newton phase makes the result exact for any n_iter, 0 included.
//
// A double t is not always enough: for p < 1 with many entries just above
// the threshold (heavy ties below a larger maximum), the outputs
// (am1 (d_i - t))^p depend on d_i - t, a tiny difference of numbers near
// |t|, so one ulp of t becomes ~1e-10 relative in each of them and in their
// sum. *t_lo receives the Newton correction (F(t) - 1) / -F'(t) at the
// returned t, below t's own ulp: t + *t_lo is the threshold to ~1e-20.
template <class A, class T>
class entmax_root {
 public:
  using B = xsimd::batch<double, A>;
  static constexpr double inf = std::numeric_limits<double>::infinity();

  entmax_root(T* b, std::size_t k, double m, double am1) noexcept
      : b_(b), k_(k), m_(m), am1_(am1), p_(1.0 / am1), lo_(-p_), hi_(0.0) {}

  // For p > 1, cheap passes first (no powers): for any set C of entries,
  // the power-mean inequality gives am1 (mean_C d - t) <= |C|^(-1/p), i.e.
  // t >= mean_C d - p |C|^(-am1); applied to C = {d > lo} and repeated
  // (Michelot's iteration for p = 1), it drops most of a dense candidate set
  // before any power is taken.
  void raise_lower_bound() noexcept {
    if (!(p_ > 1.0)) return;
    for (int it = 0; it < 64 && k_ > 64; ++it) {
      const std::size_t before = k_;
      B c(0.0), s(0.0);
      compensated<A, double> sc;
      k_ = filter_pass<A>(b_, k_, m_, lo_, inf,
                          [&](B v, auto keep) {
                            c += xsimd::select(keep, B(1.0), B(0.0));
                            s += xsimd::select(keep, v, B(0.0));
                          },
                          [&] {
                            sc.add(s);
                            s = B(0.0);
                          });
      const double cnt = hsum<A>(c);
      const double bound = hsum<A>(sc.value()) / cnt - p_ * std::pow(cnt, -am1_);
      const double safe = bound - 0x1p-40 * (std::fabs(bound) + p_);  // sums and pow round
      if (!(safe > lo_)) break;
      lo_ = std::min(safe, hi_);
      if (it > 0 && (before - k_) * 8 < before) break;  // converging slowly: bisection takes over
    }
  }

  // Bisection (at most n_iter steps) until no candidate lies inside the
  // bracket or, for p >= 1, Newton's lower bound has converged; returns the
  // steps taken.
  int bisect(int n_iter) noexcept {
    int nb = 0;
    while (nb < n_iter) {
      const double mid = 0.5 * (lo_ + hi_);
      if (!(mid > lo_ && mid < hi_)) break;
      evaluate(mid);
      ++nb;
      double undecided;
      if (F_ >= 1.0) {
        undecided = c_at_ - c_hi_;  // entries in (mid, hi] (or fewer, below)
        lo_ = mid;
        // For p >= 1 F is convex, so Newton's step from mid is a lower bound
        // too, and a much better one near the root: bisection keeps the
        // upper side, Newton the lower (a margin of a few ulp covers the
        // rounding of the step).
        if (p_ >= 1.0 && Fp_ > 0) {
          const double step = (F_ - 1.0) / Fp_;
          const double nl = mid + step;
          lo_ = std::max(lo_, std::min(nl - 0x1p-50 * std::fabs(nl), hi_));
          if (step <= 0x1p-50 * std::fabs(nl)) break;  // converged: Newton finishes
        }
      } else {
        undecided = static_cast<double>(k_) - c_at_;  // entries in (lo, mid]
        hi_ = mid;
      }
      if (undecided == 0) break;
    }
    return nb;
  }

  // Safeguarded Newton from the side where it converges monotonically (lo
  // for a convex F, hi for a concave one; bisection whenever a step would
  // leave the bracket), to full double precision; counts its steps in nn.
  double newton(int& nn) noexcept {
    double t = p_ >= 1.0 ? lo_ : hi_;
    double result = t;
    for (int it = 0; it < 200; ++it) {
      evaluate(t);
      ++nn;
      if (F_ >= 1.0)
        lo_ = t;
      else
        hi_ = t;
      double next = t + (F_ - 1.0) / Fp_;  // Newton: F' = -Fp
      if (!(Fp_ > 0) || !(next >= lo_ && next <= hi_)) next = 0.5 * (lo_ + hi_);
      const double tol = 0x1p-51 * std::max(std::fabs(t), 0x1p-60 * p_);
      if (std::fabs(next - t) <= tol || F_ == 1.0) {
        result = F_ == 1.0 ? t : next;
        break;
      }
      t = next;
      result = t;
    }
    return result;
  }

  // The part of the root below the ulp of t (the returned threshold): the
  // residual at t (one more pass over the few candidates left) gives it; a
  // correction that is not small (no convergence, F' = 0 or not finite) is
  // not used. It is used only if t + c crosses no entry (the support, and so
  // the smoothness of F between t and t + c, unchanged): F' is unbounded
  // where an entry joins the support, and a step across that kink would move
  // tied entries out of it (found in review: alpha = 6, 20 ties).
  double below_ulp(double t) noexcept {
    evaluate(t);
    if (F_ == 1.0) return 0.0;
    if (Fp_ > 0) {
      double c = (F_ - 1.0) / Fp_;
      const double gap_above = above_, gap_below = below_;
      const auto inside = [&](double v) { return v > 0 ? v < gap_above : -v < gap_below; };
      if (inside(c) && std::fabs(c) <= 0x1p-40 * std::max(std::fabs(t), 0x1p-60 * p_)) {
        // One Newton step is exact to second order in c / (d - t) for the
        // nearest support entry; where that is not negligible (entries just
        // above the threshold, p != 1: found by fuzz_sparse, alpha = 4 with 28
        // ties 2.6e-13 above it, whose outputs were 1.6e-10 off and the sum
        // 4e-13) the step is repeated at t + c until it settles.
        for (int it = 0; it < 8 && p_ != 1.0 && std::fabs(c) > 0x1p-30 * gap_above; ++it) {
          evaluate(t, c);
          if (!(Fp_ > 0)) break;
          const double next = c + (F_ - 1.0) / Fp_;
          if (!inside(next) || next == c) break;
          const bool settled = std::fabs(next - c) <= 0x1p-50 * std::fabs(c);
          c = next;
          if (settled) break;
        }
        return c;
      }
    }
    return bisect_below_ulp(t);
  }

 private:
  // The correction would cross an entry (or F' is 0 or not finite there):
  // the root lies within an ulp of entries that join the support at it.
  // F(t + tl) is monotone in tl, and with tl kept apart from t every
  // (d - t) - tl is formed to full precision: bisect tl in [-2, 2] ulp of t.
  double bisect_below_ulp(double t) noexcept {
    const double at = std::fabs(t);
    const double ulp = std::max(std::nextafter(at, inf) - at, std::numeric_limits<double>::denorm_min());
    double a = -2 * ulp, z = 2 * ulp;
    evaluate(t, a);
    const bool low_ok = F_ >= 1.0;
    evaluate(t, z);
    if (!(low_ok && F_ < 1.0)) return 0.0;
    // Down to 2^-60 ulp of t (t + tl to ~2^-112 relative, beyond any use):
    // at most 63 halvings, each a pass over the candidates left.
    while (z - a > 0x1p-60 * ulp) {
      const double mid = 0.5 * (a + z);
      if (!(mid > a && mid < z)) break;
      evaluate(t, mid);
      if (F_ >= 1.0)
        a = mid;
      else
        z = mid;
    }
    return 0.5 * (a + z);
  }

  // F and -F' = sum phi/u at t (+ tl, a part below t's ulp: the argument is
  // (d - t) - tl, and d - t is exact near t); counts of entries > t and > hi;
  // the distances from t to the nearest entries above and at or below it;
  // drops d <= lo.
  void evaluate(double t, double tl = 0.0) noexcept {
    const bool p1 = p_ == 1.0, p2 = p_ == 2.0;
    const double p = p_;
    B f(0.0), fp(0.0), ca(0.0), ch(0.0), gap_in(inf), gap_out(inf);
    compensated<A, double> fc, fpc;
    const B tv(t), hv(hi_), a(am1_), tlv(tl);
    const positive_power<A, double> power;
    k_ = filter_pass<A>(b_, k_, m_, lo_, inf, [&](B v, auto keep) {
      const auto pos = keep & ((v - tv) - tlv > B(0.0));
      const B u = xsimd::select(pos, a * ((v - tv) - tlv), B(1.0));  // ln's argument stays positive
      gap_in = xsimd::min(gap_in, xsimd::select(pos, v - tv, B(inf)));
      gap_out = xsimd::min(gap_out, xsimd::select(keep & !pos, tv - v, B(inf)));
      B phi, dphi;  // u^p and u^(p-1) (= -d phi / dt)
      if (p1) {
        phi = u;
        dphi = B(1.0);
      } else if (p2) {
        phi = u * u;
        dphi = u;
      } else {
        phi = power(u, B(p));
        dphi = phi / u;
      }
      f += xsimd::select(pos, phi, B(0.0));
      fp += xsimd::select(pos, dphi, B(0.0));
      ca += xsimd::select(pos, B(1.0), B(0.0));
      ch += xsimd::select(keep & (v > hv), B(1.0), B(0.0));
    }, [&] {
      fc.add(f);
      fpc.add(fp);
      f = fp = B(0.0);
    });
    F_ = hsum<A>(fc.value());
    Fp_ = hsum<A>(fpc.value());
    c_at_ = hsum<A>(ca);
    c_hi_ = hsum<A>(ch);
    above_ = -hmax<A>(-gap_in);
    below_ = -hmax<A>(-gap_out);
  }

  T* b_;
  std::size_t k_;
  double m_, am1_, p_;
  double lo_, hi_;                         // the bracket of the root
  double F_ = 0, Fp_ = 0, c_at_ = 0, c_hi_ = 0;
  double above_ = inf, below_ = inf;      // from t to the nearest entry above it, at or below it
};

template <class A, class T>
double entmax_threshold(T* b, std::size_t k, double m, double am1, int n_iter, bisect_count* count,
                        double* t_lo) noexcept {
  entmax_root<A, T> root(b, k, m, am1);
  root.raise_lower_bound();
  const int nb = root.bisect(n_iter);
  int nn = 0;
  const double t = root.newton(nn);
  *t_lo = root.below_ulp(t);
  if (count) {
    count->bisection = nb;
    count->newton = nn;
  }
  return t;
}

// m + t + t_lo as an unevaluated pair hi + lo of T (Knuth's TwoSum in double, then
// split to T), exact to double rounding at any magnitude of m.
template <class T>
void split_threshold(T m, double t, T& hi, T& lo, double* lo_double = nullptr, double t_lo = 0.0) noexcept {
  const double a = static_cast<double>(m);
  const double s = a + t;
  const double bb = s - a;
  const double err = (a - (s - bb)) + (t - bb) + t_lo;
  hi = static_cast<T>(s);
  const double l = (s - static_cast<double>(hi)) + err;
  lo = static_cast<T>(l);
  // The float kernels that work in double keep lo unrounded: with |m| far
  // above |t| (m near FLT_MAX), lo is t itself, and its float rounding
  // (2^-24 relative) would reach the output amplified by the power p.
  if (lo_double) *lo_double = l;
}

// The special inputs, shared by every forward kernel: NaN -> all NaN; +inf
// entries share the mass equally (the limit of every member of the family);
// all -inf -> all 0. Returns false when m is finite (the normal path).
template <class T>
bool sparse_nonfinite(const T* x, T* y, std::size_t n, T m) noexcept {
  if (m != m) {
    fill(y, n, std::numeric_limits<T>::quiet_NaN());
    return true;
  }
  if (is_finite(m)) return false;
  softmax_nonfinite(x, y, n, result_form::probabilities);
  return true;
}

// ---------------------------------------------------------------- kernels --

// sparsemax (P = 1) and 1.5-entmax (P = 2) on a row whose max m is finite:
// pass 1, the solve, then write(f) runs the output pass y = f(x) (the
// caller's loop: a plain map, or 16-bit x and y widened and rounded).
// Returns false, having written nothing, when m (set either way) is NaN or
// infinite. x may be 16-bit, T float: the float kernel's passes on the
// widened x; `limit` as max_and_candidates.
template <class A, int P, class S, class T, class Write>
bool sparse_forward_finite(const S* x, std::size_t n, candidate_store<T>& store, std::size_t limit, T& m,
                           Write&& write) {
  using B = xsimd::batch<T, A>;
  const double r = P;
  std::size_t k;
  bool complete;
  m = max_and_candidates<A>(x, n, r, store, limit, k, complete);
  if (!is_finite(m)) return false;
  if (!complete) k = collect_candidates<A>(x, n, candidate_cut(m, r), store);
  const double t = sparse_threshold<A, P>(store.data(), k, static_cast<double>(m));
  T hi, lo;
  split_threshold(m, t, hi, lo);
  const B hv(hi), lv(lo), zero(T(0));
  if (P == 1) {
    write([=](B v) { return xsimd::max((v - hv) - lv, zero); });
  } else {
    const B half(T(0.5));
    write([=](B v) {
      const B s = xsimd::max((v - hv) - lv, zero) * half;
      return s * s;
    });
  }
  return true;
}

template <class A, class T, int P>
void sparse_forward(const T* x, T* y, std::size_t n) {
  if (n == 0) return;
  candidate_store<T> store(x == y ? nullptr : y, n);
  T m;
  if (!sparse_forward_finite<A, P>(x, n, store, x == y ? store.stack_capacity : n, m,
                                   [&](auto f) { map<A>(x, y, n, f); }))
    sparse_nonfinite(x, y, n, m);
}

// y = (am1 (x - (hi + lo)))_+^p for a general p, computed in double (for
// float the power is then exact to the final rounding); vectors without a
// support entry (nearly all) are just zeros.
template <class A, class T>
struct entmax_power {
  using B = xsimd::batch<T, A>;
  using D = xsimd::batch<double, A>;
  double am1, p;
  T hi, lo;
  double lo_d;  // lo unrounded (split_threshold)
  positive_power<A, double> raise{};

  SMAX_INLINE D power(D s) const noexcept {
    const auto pos = s > D(0.0);
    const D u = xsimd::select(pos, D(am1) * s, D(1.0));  // keeps ln's argument positive
    return xsimd::select(pos, raise(u, D(p)), D(0.0));
  }

  B operator()(B v) const noexcept {
    const B s = (v - B(hi)) - B(lo);
    if (!xsimd::any(s > B(T(0)))) return B(T(0));
    if constexpr (std::is_same<T, double>::value) {
      return power(s);
    } else {
      constexpr std::size_t W = B::size, WD = D::size;
      alignas(64) float in[W], out[W];
      v.store_aligned(in);
      const D h(static_cast<double>(hi)), l(lo_d);
      for (std::size_t j = 0; j < W; j += WD) {
        const D xd = D::load_unaligned(in + j);  // converts float -> double
        power((xd - h) - l).store_unaligned(out + j);
      }
      return B::load_aligned(out);
    }
  }
};

// `scale` c (seeds.hpp's asentmax): alpha-entmax of c x, c x rounded to T
// as if it were the input but never stored when c > 0: the candidates lie
// within p / c of the max, are scaled once found, and the output pass
// scales each x. c <= 0, alpha = 1, a max that is not finite, or a c m
// that overflows T: c x is written to y and solved there.
// What entmax_bisect_finite left to its caller.
enum class entmax_rest {
  done,      // y written
  prescale,  // c x must be written out and solved there (special values of c x)
  nonfinite  // m is NaN or infinite (unscaled): sparse_nonfinite
};

// entmax_bisect for alpha > 1 and, when scaled, c > 0 (the caller handles
// the others): pass 1, the solve, and write(f) the output pass y = f(x),
// as sparse_forward_finite (x may be 16-bit; nothing is written unless
// the result is done).
template <class A, class S, class T, class Write>
entmax_rest entmax_bisect_finite(const S* x, std::size_t n, T alpha, int n_iter, bisect_count* count, T scale,
                                 candidate_store<T>& store, std::size_t limit, T& m, Write&& write) {
  using B = xsimd::batch<T, A>;
  const bool scaled = scale != T(1);
  const double am1 = static_cast<double>(alpha) - 1.0;
  const double p = 1.0 / am1;
  const double width = p / static_cast<double>(scale);
  std::size_t k;
  bool complete;
  m = max_and_candidates<A>(x, n, width, store, limit, k, complete);
  // Special values of c x (a finite x whose c x overflows shares with the
  // infinities): on c x written out.
  if (scaled && !is_finite(static_cast<T>(m * scale))) return entmax_rest::prescale;
  if (!is_finite(m)) return entmax_rest::nonfinite;
  if (!complete) k = collect_candidates<A>(x, n, candidate_cut(m, width), store);
  if (scaled) {
    T* c = store.data();
    for (std::size_t i = 0; i < k; ++i) c[i] *= scale;
    m *= scale;
  }
  double t_lo;
  const double t = entmax_threshold<A>(store.data(), k, static_cast<double>(m), am1, n_iter, count, &t_lo);
  T hi, lo;
  double lo_d;
  split_threshold(m, t, hi, lo, &lo_d, t_lo);
  const B hv(hi), lv(lo), zero(T(0)), sv(scale), ninf(-std::numeric_limits<T>::infinity());
  const auto out = [&](auto f) {
    // max(-inf, c x) rounds c x to T as the candidates were (an FMA
    // contracted from c x - hi would not) and keeps NaN.
    if (scaled)
      write([=](B v) { return f(xsimd::max(ninf, v * sv)); });
    else
      write(f);
  };
  if (p == 1.0) {
    out([&](B v) { return xsimd::max((v - hv) - lv, zero); });
  } else if (p == 2.0) {
    const B a(static_cast<T>(am1));
    out([&](B v) {
      const B u = xsimd::max((v - hv) - lv, zero) * a;
      return u * u;
    });
  } else {
    out(entmax_power<A, T>{am1, p, hi, lo, lo_d});
  }
  return entmax_rest::done;
}

template <class A, class T>
void entmax_bisect(const T* x, T* y, std::size_t n, T alpha, int n_iter, bisect_count* count = nullptr,
                   T scale = T(1)) {
  using B = xsimd::batch<T, A>;
  if (n == 0) return;
  const bool scaled = scale != T(1);
  const auto prescale = [&]() {
    const B c(scale);
    map<A>(x, y, n, [c](B v) { return v * c; });
    entmax_bisect<A, T>(y, y, n, alpha, n_iter, count);
  };
  if (scaled && (alpha == T(1) || !(scale > T(0)))) return prescale();
  if (alpha == T(1)) return softmax<A>(x, y, n, algorithm::automatic);
  candidate_store<T> store(x == y ? nullptr : y, n);
  T m;
  switch (entmax_bisect_finite<A>(x, n, alpha, n_iter, count, scale, store, x == y ? store.stack_capacity : n, m,
                                  [&](auto f) { map<A>(x, y, n, f); })) {
    case entmax_rest::done:
      return;
    case entmax_rest::prescale:
      return prescale();
    case entmax_rest::nonfinite:
      sparse_nonfinite(x, y, n, m);
      return;
  }
}

// --------------------------------------------------------------- backward --

// 2^-k with 2^k > n: a sum of n terms each at most the largest double, so
// scaled, cannot overflow.
inline double support_sum_scale(std::size_t n) noexcept {
  return std::ldexp(1.0, -std::ilogb(static_cast<double>(n)) - 1);
}

// The mean of dy over the support (y > 0; 0 where it is empty) where
// support_mean's scaled sum overflows, with no subnormal formed or read.
// Float on x86: dy added in double lanes, where no scale is needed (n float
// values cannot overflow a double) and every partial sum is a multiple of
// 2^-149, far above double's smallest normal number; the blocks'
// sums compensated. Elsewhere dy 2^-k (2^k > n: no overflow), and in
// double the dy below 2^(digits - 1 + k) min are dropped, so that every
// term is a multiple of min and no lane sum cancels to a subnormal (the
// sum's absolute error: under n 2^-969, far below the contract's 1e-30);
// float on NEON keeps every term (dropping would cost accuracy at
// |dy| ~ 2^-95). y and dy may be 16-bit (widened as loaded; T float).
template <class A, class S, class T = compute_t<S>>
double support_mean_exact(const S* y, const S* dy, std::size_t n) noexcept {
  if constexpr (dot_in_double_v<A, T>) {
    using B = xsimd::batch<float, A>;
    using D = xsimd::batch<double, A>;
    // (blocks of 2^14: a block's double lane sums lose nothing that
    // matters, its counts stay exact in float, and the flush between
    // blocks, at 256 a quarter of the pass's time in cache, is rare)
    constexpr std::size_t W = B::size, block = std::size_t(1) << 14;
    const B zero(0.0f), one(1.0f);
    neumaier_sum total;
    double c = 0;
    std::size_t i = 0;
    // dy on the support, its count added to cnt
    const auto on_support = [&](B vy, B vd, B& cnt) SMAX_LAMBDA_INLINE {
      const auto pos = vy > zero;
      cnt += xsimd::select(pos, one, zero);
      return xsimd::select(pos, vd, zero);
    };
    while (i < n) {
      // (four double accumulators, as sum_of_pairs_normal: two chains were
      // bound by the adds' latency; a block's counts are exact in float)
      D s0(0.0), s1(0.0), s2(0.0), s3(0.0), lo, hi;
      B c0(0.0f), c1(0.0f);
      const std::size_t end = i + std::min(block, n - i);
      for (; i + 2 * W <= end; i += 2 * W) {
        widen_halves<A>(on_support(load_as<A, float>(y + i), load_as<A, float>(dy + i), c0), lo, hi);
        s0 += lo;
        s1 += hi;
        widen_halves<A>(on_support(load_as<A, float>(y + i + W), load_as<A, float>(dy + i + W), c1), lo, hi);
        s2 += lo;
        s3 += hi;
      }
      for (; i < end; i += W) {
        // (the padding lanes read y = 0: outside the support)
        const std::size_t r = std::min(W, end - i);
        widen_halves<A>(on_support(load_as_partial<A, float>(y + i, r, 0.0f), load_as_partial<A, float>(dy + i, r, 0.0f), c0),
                        lo, hi);
        s0 += lo;
        s1 += hi;
      }
      total.add(xsimd::hadd((s0 + s2) + (s1 + s3)));
      c += hsum<A>(c0 + c1);
    }
    return c > 0 ? total.value() / c : 0.0;
  } else {
    using B = xsimd::batch<T, A>;
    const B zero(T(0)), one(T(1));
    double count = 0, sum = 0;
    const double scale = support_sum_scale(n);
    const B sc(static_cast<T>(scale));
    constexpr bool drop = std::is_same<T, double>::value;
    const B cut(drop ? std::ldexp(std::numeric_limits<T>::min(), exp_constants<T>::mantissa_bits) / static_cast<T>(scale)
                     : T(0));
    // (the tail's padding lanes read y = 0: outside the support, they add nothing)
    two_sums_of_pairs<A>(y, dy, n,
                         [&](B yv, B d, B& c, B& s) {
                           const auto pos = yv > zero;
                           c += xsimd::select(pos, one, zero);
                           if constexpr (drop)
                             s += xsimd::select(pos & (xsimd::abs(d) >= cut), d, zero) * sc;
                           else
                             s += xsimd::select(pos, d * sc, zero);
                         },
                         count, sum);
    return count > 0 ? sum / count / scale : 0.0;
  }
}

// The mean of dy over the support (y > 0; 0 where it is empty), with no
// subnormal formed or read (tiny gradients, dy ~ 2^-110, stay at full
// speed on Intel). First dy 2^U in T's lanes, U = 64 (double 600): every
// term is then at least 2^U min and a multiple of 2^(U - digits + 1) min,
// so no product or lane sum is subnormal, and the rounding is that of the
// unscaled sum (the same bits as dy 2^-k, this pass's scale until
// 2026-12-06). Where that sum overflows (dy near 2^(max_exponent - U) / n)
// or is NaN, support_mean_exact.
template <class A, class S, class T = compute_t<S>>
double support_mean(const S* y, const S* dy, std::size_t n) noexcept {
  using B = xsimd::batch<T, A>;
  constexpr int U = std::is_same<T, double>::value ? 600 : 64;
  const B zero(T(0)), one(T(1)), up(std::ldexp(T(1), U));
  double count = 0, sum = 0;
  // (the tail's padding lanes read y = 0: outside the support, they add nothing)
  two_sums_of_pairs<A>(y, dy, n,
                       [&](B yv, B d, B& c, B& s) {
                         const auto pos = yv > zero;
                         c += xsimd::select(pos, one, zero);
                         s += xsimd::select(pos, d * up, zero);
                       },
                       count, sum);
  if (!(sum - sum == 0)) return support_mean_exact<A>(y, dy, n);
  if (count == 0) return 0.0;
  // (the mean 2^U; a mean below T's normal range is 0, never formed)
  const double scaled_mean = sum / count;
  const double tiny = std::ldexp(static_cast<double>(std::numeric_limits<T>::min()), U);
  return std::fabs(scaled_mean) < tiny ? 0.0 : std::ldexp(scaled_mean, -U);
}

// dx_i = s_i (dy_i - mean over the support of dy), s_i = [y_i > 0]: the
// sums, then write(f) runs the output pass dx = f(y, dy) (the caller's
// loop). y and dy may be 16-bit, widened as loaded (T float).
template <class A, class S, class Write, class T = compute_t<S>>
void sparsemax_backward_pass(const S* y, const S* dy, std::size_t n, Write&& write) noexcept {
  using B = xsimd::batch<T, A>;
  const B zero(T(0));
  // (the mean of tiny gradients, below T's normal range, is 0)
  const T m = finite_mean<T>(normal_or_zero<T>(support_mean<A>(y, dy, n)));
  const B mean(m);
  if (difference_always_normal(m))
    write([=](B yv, B d) { return xsimd::select(yv > zero, d - mean, zero); });
  else
    write([=](B yv, B d) { return xsimd::select(yv > zero, difference_normal_or_zero<A, T>(d, mean), zero); });
}
template <class A, class T>
void sparsemax_backward(const T* y, const T* dy, T* dx, std::size_t n) noexcept {
  if (n == 0) return;
  sparsemax_backward_pass<A>(y, dy, n, [&](auto f) { map_pairs<A>(y, dy, dx, n, f); });
}

// dx = g dy - g (sum g dy / sum g), g_i = y_i^(2 - alpha) on the support
// (alpha = 1: softmax's, alpha = 2: sparsemax's): the sums, then write(f)
// runs the output pass dx = f(y, dy), as sparsemax_backward_pass (y and dy
// may be 16-bit). `scratch`, where not null, is dx as a T array of its own
// (neither y nor dy): a general power then keeps g there between the passes.
template <class A, class S, class Write, class T = compute_t<S>>
SMAX_FLATTEN void entmax_backward_pass(const S* y, const S* dy, std::size_t n, T alpha, T* scratch,
                                       Write&& write) noexcept {
  using B = xsimd::batch<T, A>;
  const B zero(T(0));
  const T e = T(2) - alpha;
  const B ev(e);
  const B inf(std::numeric_limits<T>::infinity());
  const T inf_pow = e > T(0) ? std::numeric_limits<T>::infinity() : e < T(0) ? T(0) : T(1);
  // g(y) on the support: exact for the usual exponents, exp(e log y)
  // otherwise; vectors without a support entry skip the power.
  const positive_power<A, T> power;
  const auto g = [&](B yv) -> B {
    const auto pos = yv > zero;
    if (e == T(0)) return xsimd::select(pos, B(T(1)), zero);
    if (!xsimd::any(pos)) return zero;
    if (e == T(1)) return xsimd::select(pos, yv, zero);
    if (e == T(0.5)) return xsimd::select(pos, xsimd::sqrt(yv), zero);
    // e^(e log y) on finite positive lanes only; y = +inf (not a forward
    // output, but legal input) gets inf^e exactly.
    const B safe = xsimd::select(pos & (yv < inf), yv, B(T(1)));
    return xsimd::select(yv == inf, B(inf_pow), xsimd::select(pos, power(safe, ev), zero));
  };
  double sg = 0, sgd = 0;
  const double scale = support_sum_scale(n);  // as sparsemax_backward
  const B sc(static_cast<T>(scale));
  // The sums stop at the first pair of dy vectors holding a nonzero |dy|
  // below 2^-60 (double 2^-500), before its products: beside it d sc or a
  // product could fall below the normal range. Such a row runs the scaled
  // form below (the sums again, unguarded, where dy holds NaN or inf on
  // the support).
  const B floor(static_cast<T>(std::is_same<T, float>::value ? 0x1p-60 : 0x1p-500));
  const auto stop_at = [&](auto guarded) {
    if constexpr (decltype(guarded)::value)
      return [&](B d0, B d1) { return any_tiny_nonzero<A>(d0, d1, floor); };
    else
      return never_stop{};
  };
  const auto sums = [&](B yv, B d, B& s0, B& s1, B gv) {
    s0 += gv;
    s1 += xsimd::select(yv > zero, gv * (d * sc), zero);
  };
  // The scaled form: dy 2^K for the sums, K set so that the support's
  // largest product |g dy| 2^K lies near 1 (estimated from the bit fields:
  // within 1 + 0.09 |e| binades) and the largest |dy| 2^K below
  // 2^(max_exponent - 1); exact for K >= 0, by mul_normal below. The sums'
  // products are kept where they are multiples of the smallest normal
  // number (the dropped ones far below the largest); for K >= 0 g (dy 2^K
  // - q) where normal, scaled back with +0 below the normal range; for
  // K < 0 g (dy - q 2^-K) where normal. No subnormal is formed. False for
  // a dy holding NaN or inf on the support (the plain form then).
  const auto scaled = [&]() -> bool {
    // (the support only: an entry off it gives 0 whatever its dy, and a
    // huge one, scaling the row down, would take the support's terms below
    // the normal range; found by fuzz_sparse, dy = -FLT_MAX off a support
    // of one entry. The product, not |dy| alone: dy = -FLT_MAX on
    // y = 1e-20 took K = -126 and the others' g (dy 2^K - q) below the
    // normal range, dx = 0 for 4e-3; found by fuzz_sparse, alpha = 1)
    // (log2 g within 0.09 |e| of e log2_estimate(y); found in review: e
    // times the exponent alone was |e| binades high for y near 1, alpha =
    // 120, and the sums dropped every product)
    const B ev(e);
    T M, E;
    if (!largest_product_exponent<A, false>(y, dy, n, [=](B yv) { return yv > zero; },
                                            [=](B yv) { return ev * log2_estimate<A, T>(yv); }, M, E))
      return false;
    // (2^K normal, K in [-top, top]; |dy| 2^K below 2^(max_exponent - 1))
    constexpr int top = std::numeric_limits<T>::max_exponent - 2;
    const int K = M == T(0) ? 0
                            : static_cast<int>(std::max<T>(
                                  T(-top), std::min<T>({-std::ceil(E), T(top), T(top - std::max(std::ilogb(M), -top))})));
    const B up(std::ldexp(T(1), K)), kb(static_cast<T>(-K));
    const auto lift = [=](B d) { return K >= 0 ? d * up : mul_normal<A, T>(d, up); };
    double s0 = 0, s1 = 0;
    two_sums_of_pairs<A>(y, dy, n,
                         [&](B yv, B d, B& a0, B& a1) {
                           const B gv = g(yv);
                           a0 += gv;
                           a1 += xsimd::select(yv > zero, mul_summable<A, T>(gv, lift(d)), zero);
                         },
                         s0, s1);
    const T qt = s0 > 0 ? to_normal<T>(s1 / s0) : T(0);
    if (K >= 0) {
      const B q(qt);
      const auto out = [=](B yv, B h) {
        return xsimd::select(yv > zero, ldexp_flush<A, T>(mul_normal<A, T>(g(yv), h), kb), zero);
      };
      if (difference_always_normal(qt))
        write([=](B yv, B d) { return out(yv, lift(d) - q); });
      else
        write([=](B yv, B d) { return out(yv, difference_normal_or_zero<A, T>(lift(d), q)); });
      return true;
    }
    // K < 0 (a product above 1): g (dy - q) unscaled, q = qt 2^-K (a
    // weighted mean of dy: finite). The lifted dy of the sums would drop a
    // dy that matters to its own output (found in review: alpha = 3, y =
    // {1e-35, 0.5}, dy = {1, 1e-3}, K = -117 took dy_1 2^K below the normal
    // range: dx_1 = -2 for -1.998). Where dy - q overflows, g dy - g q.
    // (|q| below half an ulp of the largest T: dy - q cannot overflow;
    // above it, g q is far above the normal range and so is g dy - g q)
    const T qu = std::ldexp(qt, -K);
    const B q(qu), inf(std::numeric_limits<T>::infinity());
    const bool plain = difference_always_normal(qu);
    constexpr int half_ulp_of_max = std::numeric_limits<T>::max_exponent - std::numeric_limits<T>::digits - 1;
    const bool may_overflow = !(std::fabs(qu) < std::ldexp(T(1), half_ulp_of_max));
    write([=](B yv, B d) {
      const B gv = g(yv);
      const B h = plain ? d - q : difference_normal_or_zero<A, T>(d, q);
      B o = mul_normal<A, T>(gv, h);
      if (may_overflow)
        o = xsimd::select(xsimd::abs(h) < inf, o, mul_normal<A, T>(gv, d) - mul_normal<A, T>(gv, q));
      return xsimd::select(yv > zero, o, zero);
    });
    return true;
  };
  // g (dy - q), exact 0 where dy = q; where dy - q overflows (|dy| near
  // the largest T: found by fuzz_sparse, dy = -FLT_MAX, q = 0.05 FLT_MAX,
  // g = 0.11) g dy - g q instead, both products bounded by the scale
  // g (|dy| + |q|) of the result.
  // (an infinite dy keeps g (dy - q): g q would be inf 0 for y = +inf)
  // Where |q| is below half an ulp of the largest T (2^103 for float),
  // dy - q cannot overflow for a finite dy: g (dy - q) alone, the same bits
  // without the select's five operations a vector.
  const auto gradient = [inf](auto may_overflow, B gv, B d, B q) {
    const B h = d - q;
    if constexpr (!decltype(may_overflow)::value)
      return gv * h;
    else
      return xsimd::select((xsimd::abs(h) < inf) | !(xsimd::abs(d) < inf), gv * h, xsimd::fms(gv, d, gv * q));
  };
  const auto write_with = [&](T qt, auto&& pass) {
    constexpr int half_ulp_of_max = std::numeric_limits<T>::max_exponent - std::numeric_limits<T>::digits - 1;
    if (std::fabs(qt) < std::ldexp(T(1), half_ulp_of_max))
      pass(std::false_type{});
    else
      pass(std::true_type{});
  };
  // A general power (two logs and exps a vector) is computed once where dx
  // is its own array: pass 1 keeps g in dx, -inf off the support (g is
  // never negative), and pass 2 reads it back. The same bits either way.
  if (e != T(0) && e != T(1) && e != T(0.5) && scratch) {
    T* dx = scratch;
    const auto run_scratch = [&](auto guarded) {
      return two_sums_of_pairs<A>(y, dy, n,
                           [&](B yv, B d, B& s0, B& s1) {
                             const B gv = g(yv);
                             sums(yv, d, s0, s1, gv);
                             return xsimd::select(yv > zero, gv, -inf);
                           },
                           sg, sgd, dx, stop_at(guarded));
    };
    if (!run_scratch(std::true_type{})) {
      if (scaled()) return;
      run_scratch(std::false_type{});
    }
    const T qt = sg > 0 ? finite_mean<T>(sgd / sg / scale) : T(0);
    const B q(qt);
    if constexpr (std::is_same<S, T>::value)
      write_with(qt, [&](auto may_overflow) {
        map_pairs<A>(static_cast<const T*>(dx), dy, dx, n, [=](B gk, B d) {
          return xsimd::select(gk == -inf, zero, gradient(may_overflow, xsimd::max(gk, zero), d, q));
        });
      });
    return;
  }
  const auto run = [&](auto guarded) {
    return two_sums_of_pairs<A>(y, dy, n, [&](B yv, B d, B& s0, B& s1) { sums(yv, d, s0, s1, g(yv)); }, sg,
                                sgd, nullptr, stop_at(guarded));
  };
  if (!run(std::true_type{})) {
    if (scaled()) return;
    run(std::false_type{});
  }
  const T qt = sg > 0 ? finite_mean<T>(sgd / sg / scale) : T(0);
  const B q(qt);
  write_with(qt, [&](auto may_overflow) {
    write([=](B yv, B d) { return xsimd::select(yv > zero, gradient(may_overflow, g(yv), d, q), zero); });
  });
}
template <class A, class T>
SMAX_FLATTEN void entmax_backward(const T* y, const T* dy, T* dx, std::size_t n, T alpha) noexcept {
  if (n == 0) return;
  entmax_backward_pass<A>(y, dy, n, alpha, dx != y && dx != dy ? dx : nullptr,
                          [&](auto f) { map_pairs<A>(y, dy, dx, n, f); });
}

}  // namespace detail
}  // namespace smax
