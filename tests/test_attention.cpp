// softmax / log_softmax / softmax_backward with softmax_options (scale,
// softcap, mask with mask_scale, length, sink), and the batched attention
// forms, forward and backward (mask broadcast over heads, causal and per-row
// lengths, ALiBi slopes, sinks), through smax::dynamic on every ISA the CPU
// has, float and double: long-double references for each option alone and
// all together, sizes around every vector width, misaligned and in-place
// calls with guard regions, special values, no subnormal output, bad
// arguments.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <smax/parallel.hpp>

#include "common.hpp"

namespace {

using ld = long double;
using smax_test::guarded;
using smax_test::isas;
using smax_test::normal;
using smax_test::use_isa;

template <class T>
struct tol;
template <>
struct tol<float> {
  static constexpr double flat = 2e-6;
  static constexpr double per_unit = 0x1p-22;  // rounding of z (scale x, tanh, the mask's add): per |z|
};
template <>
struct tol<double> {
  static constexpr double flat = 1e-14;
  static constexpr double per_unit = 0x1p-50;
};

// z in long double; masked entries -inf.
template <class T>
std::vector<ld> ref_z(const std::vector<T>& x, const smax::softmax_options<T>& o) {
  std::vector<ld> z(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    ld v = ld(o.scale) * x[i];
    if (o.softcap > 0) v = ld(o.softcap) * std::tanh(v / ld(o.softcap));
    if (o.mask) v = (o.mask[i] == -std::numeric_limits<T>::infinity()) ? -INFINITY : v + ld(o.mask_scale) * o.mask[i];
    if (i >= o.length) v = -INFINITY;
    z[i] = v;
  }
  return z;
}

// softmax of z with the sink (finite z assumed, at least one finite or a sink).
template <class T>
std::vector<ld> ref_softmax(const std::vector<ld>& z, T sink, ld* lse_out = nullptr, ld* M_out = nullptr) {
  ld M = sink;
  for (ld v : z) M = std::max(M, v);
  ld s = std::exp(ld(sink) - M);
  for (ld v : z) s += std::exp(v - M);
  std::vector<ld> y(z.size());
  for (std::size_t i = 0; i < z.size(); ++i) y[i] = std::exp(z[i] - M) / s;
  if (lse_out) *lse_out = M + std::log(s);
  if (M_out) *M_out = M;
  return y;
}

template <class T>
void check_forward(const std::vector<T>& x, const smax::softmax_options<T>& o, std::size_t offset) {
  const std::size_t n = x.size();
  const auto z = ref_z(x, o);
  ld lse, M;
  const auto ref = ref_softmax(z, o.sink, &lse, &M);
  guarded<T> y(n, offset, T(-7));
  smax::dynamic::softmax(x.data(), y.data(), n, o);
  REQUIRE(y.intact());
  const auto got = y.values();
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (z[i] == -INFINITY) {
      CHECK(got[i] == T(0));
      continue;
    }
    CHECK(std::fpclassify(got[i]) != FP_SUBNORMAL);
    if (ref[i] < 1e-30L) continue;
    const double bound = tol<T>::flat + tol<T>::per_unit * double(std::fabs(z[i]) + std::fabs(M));
    const double e = double(std::fabs((got[i] - ref[i]) / ref[i])) / bound;
    worst = std::max(worst, e == e ? e : INFINITY);
  }
  CHECK(worst <= 1.0);
  // log_softmax, and in place gives the same bits.
  guarded<T> ly(n, offset, T(-7));
  smax::dynamic::log_softmax(x.data(), ly.data(), n, o);
  REQUIRE(ly.intact());
  const auto lgot = ly.values();
  double lworst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (z[i] == -INFINITY) {
      CHECK(lgot[i] == -std::numeric_limits<T>::infinity());
      continue;
    }
    const ld r = z[i] - lse;
    const double bound = tol<T>::flat + tol<T>::per_unit * double(std::fabs(z[i]) + std::fabs(M) + std::fabs(r));
    const double e = double(std::fabs(lgot[i] - r) / std::max<ld>(1, std::fabs(r))) / bound;
    lworst = std::max(lworst, e == e ? e : INFINITY);
  }
  CHECK(lworst <= 1.0);
  std::vector<T> in = x;
  smax::dynamic::softmax(in.data(), in.data(), n, o);
  CHECK(smax_test::same_bits(in, got));

  // Backward against the long-double formula, from the kernel's own y.
  const auto dy = normal<T>(n, 1.0, n + 77);
  std::vector<T> dx(n);
  smax::dynamic::softmax_backward(x.data(), got.data(), dy.data(), dx.data(), n, o);
  ld dot = 0, mag = 0;
  for (std::size_t i = 0; i < n; ++i) dot += ld(got[i]) * dy[i], mag += std::fabs(ld(got[i]) * dy[i]);
  double bworst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ld d = ld(got[i]) * (ld(dy[i]) - dot) * ld(o.scale);
    if (o.softcap > 0) {
      const ld t = std::tanh(ld(o.scale) * x[i] / ld(o.softcap));
      d *= 1 - t * t;
    }
    if (z[i] == -INFINITY) {
      CHECK(dx[i] == T(0));
      continue;
    }
    const ld scale = std::fabs(ld(got[i])) * (std::fabs(ld(dy[i])) + mag) * std::fabs(ld(o.scale)) + 1e-30L;
    const double e = double(std::fabs(dx[i] - d) / scale) / (4 * tol<T>::flat);
    bworst = std::max(bworst, e == e ? e : INFINITY);
  }
  CHECK(bworst <= 1.0);
}

template <class T>
std::vector<T> make_mask(std::size_t n, std::uint64_t seed) {
  auto m = normal<T>(n, 2.0, seed);
  for (std::size_t i = 0; i < n; ++i)
    if ((i * 2654435761u + seed) % 5 == 0) m[i] = -std::numeric_limits<T>::infinity();
  return m;
}

TEMPLATE_TEST_CASE("softmax options: each alone and all together match a long-double reference",
                   "[attention]", float, double) {
  using T = TestType;
  for (const auto& isa : isas()) {
    use_isa u(isa);
    INFO("isa " << isa);
    for (std::size_t n : smax_test::sizes_up_to_max()) {
      if (n == 0 || n > 5000) continue;
      INFO("n " << n);
      const auto x = normal<T>(n, 4.0, n + 3);
      const auto mask = make_mask<T>(n, n + 5);
      std::vector<smax::softmax_options<T>> cases(7);
      cases[0].scale = T(0.125);
      cases[1].softcap = T(3);
      cases[1].scale = T(2);  // well into tanh's saturation
      cases[2].mask = mask.data();
      cases[3].mask = mask.data();
      cases[3].mask_scale = T(0.37);
      cases[4].length = n / 2 + 1;
      cases[5].sink = T(2.5);
      auto& all = cases[6];
      all.scale = T(0.3);
      all.softcap = T(5);
      all.mask = mask.data();
      all.mask_scale = T(0.5);
      all.length = (2 * n) / 3 + 1;
      all.sink = T(1);
      for (std::size_t c = 0; c < cases.size(); ++c) {
        INFO("case " << c);
        check_forward(x, cases[c], c % 2);
      }
      // The soft-cap on logits spread over most of the normal range (scale
      // 1: x scale is formed as given): z below cap 2^-12 passes through,
      // tanh sees clamped arguments; forward, log and backward.
      std::vector<T> spread(x);
      const int span = sizeof(T) == 4 ? 100 : 900;
      for (std::size_t i = 0; i < n; ++i) spread[i] = std::ldexp(x[i], -static_cast<int>((i * 7) % span));
      // (|scale / softcap| of 2^110 and 2^-110: the backward's two-step
      // products)
      const std::pair<T, T> scale_cap[] = {
          {T(1), T(30)}, {T(1), T(0.5)}, {T(1), T(0x1p-110)}, {T(0x1p-60), T(0x1p50)}};
      for (const auto& sc : scale_cap) {
        INFO("spread logits, scale " << sc.first << " softcap " << sc.second);
        smax::softmax_options<T> o;
        o.scale = sc.first;
        o.softcap = sc.second;
        check_forward(spread, o, 1);
      }
    }
  }
}

TEMPLATE_TEST_CASE("softmax options: special values and bad arguments", "[attention]", float, double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (const auto& isa : isas()) {
    use_isa u(isa);
    INFO("isa " << isa);
    const std::size_t n = 45;
    std::vector<T> x = normal<T>(n, 1.0, 1), y(n), mask(n, -inf);
    smax::softmax_options<T> o;
    o.mask = mask.data();
    // Everything masked: zeros, with a sink too; log: -inf.
    for (T sink : {-inf, T(3)}) {
      o.sink = sink;
      smax::dynamic::softmax(x.data(), y.data(), n, o);
      for (T v : y) CHECK(v == T(0));
      smax::dynamic::log_softmax(x.data(), y.data(), n, o);
      for (T v : y) CHECK(v == -inf);
    }
    o = {};
    o.length = 0;
    smax::dynamic::softmax(x.data(), y.data(), n, o);
    for (T v : y) CHECK(v == T(0));
    // One dominant score under a scale that rounds: its log-probability is
    // at most 0 (z = scale x rounded once, not fused into z - M).
    {
      std::vector<T> d(n, T(0)), ld(n);
      d[7] = T(1000.7);  // scale x - M in one fma: positive in float and double
      smax::softmax_options<T> s;
      s.scale = T(0.1);
      smax::dynamic::log_softmax(d.data(), ld.data(), n, s);
      for (T v : ld) CHECK(v <= T(0));
      for (T& v : d) v = static_cast<T>(std::ldexp(1.0, 20)) + T(3) * v;  // (another max)
      smax::dynamic::log_softmax(d.data(), ld.data(), n, s);
      for (T v : ld) CHECK(v <= T(0));
    }
    // A sink far above every score takes the mass; the rest are 0, not subnormal.
    o = {};
    o.sink = T(200);
    smax::dynamic::softmax(x.data(), y.data(), n, o);
    for (T v : y) CHECK((v == T(0) || std::fpclassify(v) == FP_NORMAL));
    // NaN in an unmasked entry: all NaN; under a -inf mask or past length: ignored.
    o = {};
    x[4] = nan;
    smax::dynamic::softmax(x.data(), y.data(), n, o);
    for (T v : y) CHECK(std::isnan(v));
    // ... through the soft-cap too (its tanh argument is clamped, NaN kept;
    // fuzz_losses found it lost on AVX2 and AVX-512), and with +-inf and
    // +-max around it (tanh's argument clamped, not undefined).
    o.softcap = T(1);
    o.scale = T(-0.127);
    x[0] = inf;
    x[1] = -std::numeric_limits<T>::max();
    smax::dynamic::softmax(x.data(), y.data(), n, o);
    for (T v : y) CHECK(std::isnan(v));
    smax::dynamic::log_softmax(x.data(), y.data(), n, o);
    for (T v : y) CHECK(std::isnan(v));
    x[4] = T(0.5);
    smax::dynamic::softmax(x.data(), y.data(), n, o);
    for (T v : y) CHECK(std::isfinite(v));
    x[0] = T(0.25);
    x[1] = T(-0.5);
    x[4] = nan;
    o = {};
    std::vector<T> m2(n, T(0));
    m2[4] = -inf;
    o.mask = m2.data();
    smax::dynamic::softmax(x.data(), y.data(), n, o);
    for (T v : y) CHECK(!std::isnan(v));
    CHECK(y[4] == T(0));
    o = {};
    o.length = 4;
    smax::dynamic::softmax(x.data(), y.data(), n, o);
    for (T v : y) CHECK(!std::isnan(v));
    // +inf scores share the mass.
    x = normal<T>(n, 1.0, 2);
    x[7] = x[30] = inf;
    o = {};
    o.sink = T(1);
    smax::dynamic::softmax(x.data(), y.data(), n, o);
    for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == ((i == 7 || i == 30) ? T(0.5) : T(0)));
    // Huge finite scores: no overflow.
    x.assign(n, std::numeric_limits<T>::max());
    o = {};
    o.scale = T(1);
    smax::dynamic::softmax(x.data(), y.data(), n, o);
    for (T v : y) CHECK(std::fabs(v - T(1.0 / n)) <= T(1e-6));

    const auto bad = [&](smax::softmax_options<T> b) {
      std::vector<T> out(n, T(9));
      CHECK_THROWS_AS(smax::dynamic::softmax(x.data(), out.data(), n, b), std::invalid_argument);
      CHECK_THROWS_AS(smax::dynamic::log_softmax(x.data(), out.data(), n, b), std::invalid_argument);
      for (T v : out) CHECK(v == T(9));
    };
    smax::softmax_options<T> b;
    b.scale = inf;
    bad(b);
    b = {};
    b.scale = nan;
    bad(b);
    b = {};
    b.softcap = T(-1);
    bad(b);
    b = {};
    b.mask_scale = nan;
    bad(b);
    b = {};
    b.sink = nan;
    bad(b);
    b = {};
    b.sink = inf;
    bad(b);
  }
}

TEMPLATE_TEST_CASE("batched attention: heads, broadcast mask, causal, lengths, ALiBi, sinks", "[attention][batched]",
                   float, double) {
  using T = TestType;
  // ggml's slopes: 8 heads, max_bias 8 -> 2^-1 .. 2^-8; 12 heads -> 2^-0.5, 2^-1.5 after the first 8.
  CHECK(smax::alibi_slope(0, 8, 8.0) == 0.5);
  CHECK(smax::alibi_slope(7, 8, 8.0) == std::exp2(-8.0));
  CHECK(std::fabs(smax::alibi_slope(8, 12, 8.0) - std::exp2(-0.5)) < 1e-15);
  CHECK(std::fabs(smax::alibi_slope(9, 12, 8.0) - std::exp2(-1.5)) < 1e-15);

  const std::size_t heads = 3, queries = 7, cols = 37, rows = heads * queries, stride = 41;
  std::vector<T> x(rows * stride);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(std::sin(0.37 * double(i)) * 5);
  const auto mask = make_mask<T>(queries * cols, 11);
  const std::vector<T> slopes = {T(0.5), T(0.25), T(0.125)}, sinks = {T(0.5), -std::numeric_limits<T>::infinity(), T(2)};
  std::vector<std::size_t> lens(rows);
  for (std::size_t r = 0; r < rows; ++r) lens[r] = (r * 5) % (cols + 3);
  smax::thread_pool pool(3);
  for (const auto& isa : isas()) {
    use_isa u(isa);
    INFO("isa " << isa);
    for (int variant = 0; variant < 4; ++variant) {
      INFO("variant " << variant);
      smax::attention_options<T> o;
      o.scale = T(0.25);
      o.heads = heads;
      o.mask = smax::matrix_view<const T>(mask.data(), queries, cols);
      if (variant == 0) o.lengths = smax::causal(0);
      if (variant == 1) o.lengths = smax::causal(cols - queries);
      if (variant == 2) o.lengths = lens.data();
      if (variant % 2) o.slopes = slopes.data();
      else o.max_bias = T(8);
      if (variant >= 2) o.sinks = sinks.data();
      if (variant == 3) o.softcap = T(4);
      std::vector<T> y(rows * stride, T(3)), y2(rows * stride, T(3));
      const smax::matrix_view<const T> xv(x.data(), rows, cols, stride);
      smax::dynamic::softmax(xv, smax::matrix_view<T>(y.data(), rows, cols, stride), o);
      smax::dynamic::softmax(xv, smax::matrix_view<T>(y2.data(), rows, cols, stride), o, &pool);
      CHECK(smax_test::same_bits(y, y2));
      std::vector<T> one(cols);
      std::vector<smax::softmax_options<T>> row_so(rows);  // each row's options, built here
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t h = r / queries, q = r % queries;
        smax::softmax_options<T> so;
        so.scale = o.scale;
        so.softcap = o.softcap;
        so.mask = mask.data() + q * cols;
        so.mask_scale = o.slopes ? slopes[h] : static_cast<T>(smax::alibi_slope(h, heads, 8.0));
        so.length = variant == 0 ? q + 1 : variant == 1 ? q + 1 + (cols - queries) : variant == 2 ? lens[r] : cols;
        if (o.sinks) so.sink = sinks[h];
        row_so[r] = so;
        smax::dynamic::softmax(x.data() + r * stride, one.data(), cols, so);
        CHECK(std::equal(one.begin(), one.end(), y.data() + r * stride));
        for (std::size_t c = cols; c < stride && r + 1 < rows; ++c) CHECK(y[r * stride + c] == T(3));
        // causal: nothing past q + offset.
        if (variant == 0)
          for (std::size_t c = q + 1; c < cols; ++c) CHECK(y[r * stride + c] == T(0));
      }
      // The backward pass: each row the single-vector call, any thread
      // count, in place over dy the same bits; the stride's gap untouched.
      const auto dy = normal<T>(rows * stride, 1.0, 91 + variant);
      std::vector<T> dx(rows * stride, T(3)), dx2(rows * stride, T(3)), dx_in_place = dy;
      const smax::matrix_view<const T> yv(y.data(), rows, cols, stride), dyv(dy.data(), rows, cols, stride);
      smax::dynamic::softmax_backward(xv, yv, dyv, smax::matrix_view<T>(dx.data(), rows, cols, stride), o);
      smax::dynamic::softmax_backward(xv, yv, dyv, smax::matrix_view<T>(dx2.data(), rows, cols, stride), o, &pool);
      CHECK(smax_test::same_bits(dx, dx2));
      smax::dynamic::softmax_backward(xv, yv, smax::matrix_view<const T>(dx_in_place.data(), rows, cols, stride),
                                      smax::matrix_view<T>(dx_in_place.data(), rows, cols, stride), o);
      for (std::size_t r = 0; r < rows; ++r) {
        smax::dynamic::softmax_backward(x.data() + r * stride, y.data() + r * stride, dy.data() + r * stride,
                                        one.data(), cols, row_so[r]);
        CHECK(std::equal(one.begin(), one.end(), dx.data() + r * stride));
        CHECK(std::equal(one.begin(), one.end(), dx_in_place.data() + r * stride));
        for (std::size_t c = cols; c < stride && r + 1 < rows; ++c) CHECK(dx[r * stride + c] == T(3));
        if (variant == 0)
          for (std::size_t c = r % queries + 1; c < cols; ++c) CHECK(dx[r * stride + c] == T(0));
      }
      smax::dynamic::log_softmax(xv, smax::matrix_view<T>(y.data(), rows, cols, stride), o);
      smax::dynamic::log_softmax(x.data() + 5 * stride, one.data(), cols, smax::detail::row_options(o, rows, 5));
      CHECK(std::equal(one.begin(), one.end(), y.data() + 5 * stride));
    }
    smax::attention_options<T> b;
    b.heads = 2;  // 21 rows
    std::vector<T> y(rows * stride);
    const smax::matrix_view<const T> xv(x.data(), rows, cols, stride);
    const smax::matrix_view<T> yv(y.data(), rows, cols, stride);
    CHECK_THROWS_AS(smax::dynamic::softmax(xv, yv, b), std::invalid_argument);
    b = {};
    b.mask = smax::matrix_view<const T>(mask.data(), queries, cols - 1);
    CHECK_THROWS_AS(smax::dynamic::softmax(xv, yv, b), std::invalid_argument);
    b = {};
    b.max_bias = T(-1);
    CHECK_THROWS_AS(smax::dynamic::softmax(xv, yv, b), std::invalid_argument);
    CHECK_THROWS_AS(smax::dynamic::softmax_backward(xv, xv, xv, yv, b), std::invalid_argument);
    b = {};
    b.softcap = T(-1);
    CHECK_THROWS_AS(smax::dynamic::softmax_backward(xv, xv, xv, yv, b), std::invalid_argument);
    // Shapes: dy one row short, y with a stride below its cols.
    CHECK_THROWS_AS(smax::dynamic::softmax_backward(xv, xv, smax::matrix_view<const T>(x.data(), rows - 1, cols, stride),
                                                    yv, smax::attention_options<T>{}),
                    std::invalid_argument);
    CHECK_THROWS_AS(smax::dynamic::softmax_backward(xv, smax::matrix_view<const T>(x.data(), rows, cols, cols - 1), xv,
                                                    yv, smax::attention_options<T>{}),
                    std::invalid_argument);
    // Nothing written before a throw.
    CHECK(std::all_of(y.begin(), y.end(), [](T v) { return v == T(0); }));
  }
}

// Batches of dense rows of >= 4 KiB and >= 1 MiB in all run with rows_ahead
// (prefetches into the next row, and on AMD the touch of a causal row's
// unread tail: loops.hpp): each row still the single-vector call's bits.
// (Prefetches cannot change a result, and off AMD the touch does not run:
// this checks the rows_ahead paths' arithmetic and addressing.) Where the
// size-scaled tests run that large, the batch's output is
// recompute_masked_min_bytes: with the mask, on a CPU where
// recompute_masked_pays, the rows form z again in pass 2 where the single
// rows store it.
TEMPLATE_TEST_CASE("batched attention: large dense batches give each row's single-vector result",
                   "[attention][batched]", float, double) {
  using T = TestType;
  constexpr std::size_t heads = 2, cols = 1024;
  static_assert(heads * 512 * cols * sizeof(float) == smax::detail::recompute_masked_min_bytes,
                "512 queries make the float batch the recompute threshold");
  // (128: 1 MiB of float, the least rows_ahead takes; offsets below need
  // queries <= cols / 2)
  const std::size_t queries = heads * 512 * cols <= smax_test::max_n() ? 512 : 128;
  const std::size_t rows = heads * queries;
  INFO("queries " << queries);
  const auto x = normal<T>(rows * cols, 3.0, 5);
  const auto dy = normal<T>(rows * cols, 1.0, 6);
  const auto mask = make_mask<T>(queries * cols, 13);
  smax::thread_pool pool(2);
  for (const auto& isa : isas()) {
    use_isa u(isa);
    INFO("isa " << isa);
    for (int variant = 0; variant < 4; ++variant) {
      INFO("variant " << variant);
      smax::attention_options<T> o;
      o.scale = T(0.125);
      o.heads = heads;
      // causal rows end up to queries - 1 short of their end (the tail touched); or
      // read at most half (the tail touched only where it is exactly half);
      // with a mask; with a soft-cap (the backward reads x too).
      const std::ptrdiff_t offsets[] = {std::ptrdiff_t(cols - queries), std::ptrdiff_t(cols / 2 - queries),
                                        std::ptrdiff_t(cols - queries), std::ptrdiff_t(cols - queries)};
      o.lengths = smax::causal(offsets[variant]);
      if (variant == 2) o.mask = smax::matrix_view<const T>(mask.data(), queries, cols);
      if (variant == 3) o.softcap = T(4);
      std::vector<T> y(rows * cols), y2(rows * cols), dx(rows * cols), dx2(rows * cols), one(cols);
      const smax::matrix_view<const T> xv(x.data(), rows, cols), yv(y.data(), rows, cols), dyv(dy.data(), rows, cols);
      REQUIRE(smax::detail::rows_ahead_pays(xv));
      REQUIRE(smax::detail::rows_ahead_pays(yv, dyv, xv));
      smax::dynamic::softmax(xv, smax::matrix_view<T>(y.data(), rows, cols), o);
      smax::dynamic::softmax(xv, smax::matrix_view<T>(y2.data(), rows, cols), o, &pool);
      CHECK(smax_test::same_bits(y, y2));
      smax::dynamic::softmax_backward(xv, yv, dyv, smax::matrix_view<T>(dx.data(), rows, cols), o);
      smax::dynamic::softmax_backward(xv, yv, dyv, smax::matrix_view<T>(dx2.data(), rows, cols), o, &pool);
      CHECK(smax_test::same_bits(dx, dx2));
      for (std::size_t r = 0; r < rows; ++r) {
        const smax::softmax_options<T> so = smax::detail::row_options(o, rows, r);
        smax::dynamic::softmax(x.data() + r * cols, one.data(), cols, so);
        CHECK(std::equal(one.begin(), one.end(), y.data() + r * cols));
        smax::softmax_options<T> sb = so;
        sb.mask = nullptr;
        smax::dynamic::softmax_backward(x.data() + r * cols, y.data() + r * cols, dy.data() + r * cols, one.data(),
                                        cols, sb);
        CHECK(std::equal(one.begin(), one.end(), dx.data() + r * cols));
      }
    }
  }
}

}  // namespace
