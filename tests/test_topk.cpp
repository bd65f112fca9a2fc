// topk_softmax and sample through smax::dynamic on every ISA the CPU has,
// float and double: indices against a sort-based reference (with ties and
// -inf), probabilities bitwise equal to softmax's three-pass output and
// within the softmax contract of a long-double reference, special values,
// bad arguments, guards and misaligned pointers; the sampler's draws
// against the filtered distribution of a sort-based reference (chi-square),
// always inside the kept set, reproducible, and the batched forms row by row
// on any thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <smax/parallel.hpp>
#include <smax/detail/topk.hpp>  // detail::philox_scalar, sample_uniform (scalar code)

#include "variants_common.hpp"

namespace {

using variants_test::ld;
using variants_test::type_name;
namespace d = smax::dynamic;

template <class T>
struct bound;
template <>
struct bound<float> {
  static constexpr double rel = 1e-6;  // softmax's contract, outputs above 1e-30
};
template <>
struct bound<double> {
  static constexpr double rel = 1e-14;
};

// All indices by (value descending, index ascending): the order both
// functions rank by. x holds no NaN.
template <class T>
std::vector<std::size_t> ranked(const std::vector<T>& x) {
  std::vector<std::size_t> r(x.size());
  std::iota(r.begin(), r.end(), std::size_t(0));
  std::sort(r.begin(), r.end(), [&](std::size_t a, std::size_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  return r;
}

// Normal values rounded to halves: many ties.
template <class T>
std::vector<T> tied(std::size_t n, std::uint64_t seed) {
  auto x = smax_test::normal<T>(n, 3.0, seed);
  for (auto& v : x) v = static_cast<T>(std::round(v * 2) / 2);
  return x;
}

std::vector<std::size_t> k_values(std::size_t n) {
  // Large k costs a sort of k: the middle ones only for small n.
  std::vector<std::size_t> ks = {0, 1, 2, 5, 64, n};
  if (n <= 5000) ks.insert(ks.end(), {n / 2, n - 1});
  std::vector<std::size_t> out;
  for (std::size_t k : ks)
    if (k <= n && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  return out;
}

template <class T>
void check_topk(const std::vector<T>& x, std::size_t k, const std::string& what) {
  const std::size_t n = x.size();
  INFO(what << " " << type_name<T>() << " n=" << n << " k=" << k);
  const auto order = ranked(x);
  std::vector<T> y(n);
  if (n) d::softmax(x.data(), y.data(), n, smax::algorithm::three_pass_recompute);
  const auto ref = smax_test::ref_softmax(x);
  variants_test::misaligned<T> xin(x);
  smax_test::guarded<T> probs(k, 1, T(-7));
  smax_test::guarded<std::uint32_t> index(k, 3, 0xDEADBEEFu);
  d::topk_softmax(xin.p, n, k, probs.data(), index.data());
  REQUIRE(probs.intact());
  REQUIRE(index.intact());
  bool same_index = true, same_bits = true;
  double worst = 0;
  for (std::size_t j = 0; j < k; ++j) {
    same_index = same_index && index[j] == order[j];
    same_bits = same_bits && std::memcmp(&probs[j], &y[order[j]], sizeof(T)) == 0;
    if (ref[order[j]] > 1e-30L)
      worst = std::max(worst, static_cast<double>(std::fabs((probs[j] - ref[order[j]]) / ref[order[j]])));
    else
      CHECK((probs[j] >= 0 && probs[j] <= T(2e-30)));
  }
  CHECK(same_index);
  CHECK(same_bits);
  CHECK(worst <= bound<T>::rel);
}

template <class T>
void topk_isa_body() {
  for (std::size_t n : smax_test::sizes_up_to_max()) {
    if (n > smax_test::max_n() / 64) continue;  // QEMU (max_n 256K): up to 4096
    const auto a = tied<T>(n, 11 + n);
    const auto b = smax_test::normal<T>(n, 4.0, 12 + n);
    auto c = b;  // -inf entries: k above the finite count ranks them by index
    for (std::size_t i = 0; i < n; i += 3) c[i] = -std::numeric_limits<T>::infinity();
    for (std::size_t k : k_values(n)) {
      check_topk(a, k, "ties");
      check_topk(b, k, "normal");
      check_topk(c, k, "-inf");
    }
  }
  // Emulated and sanitized builds (a smaller max_n) take a shorter row.
  const std::size_t vocab = std::min<std::size_t>(151936, smax_test::max_n() / 8);
  check_topk(smax_test::normal<T>(vocab, 2.0, 5), 64, "vocab");
  check_topk(tied<T>(vocab, 6), 40, "vocab ties");
  // The selection's worst cases: ascending (every entry enters the buffer),
  // descending, constant.
  std::vector<T> up(5000), down(5000), flat(5000, T(0.25));
  for (std::size_t i = 0; i < up.size(); ++i) {
    up[i] = static_cast<T>(i) / 64;
    down[i] = -up[i];
  }
  for (std::size_t k : {std::size_t(1), std::size_t(10), std::size_t(300), std::size_t(4999)}) {
    check_topk(up, k, "ascending");
    check_topk(down, k, "descending");
    check_topk(flat, k, "constant");
  }
  // Huge finite magnitudes: no overflow.
  std::vector<T> huge = {std::numeric_limits<T>::max(), -std::numeric_limits<T>::max(), T(0),
                         std::numeric_limits<T>::max() / 2, std::numeric_limits<T>::max()};
  std::vector<T> p(5);
  std::vector<std::uint32_t> idx(5);
  d::topk_softmax(huge.data(), 5, 5, p.data(), idx.data());
  CHECK(idx == std::vector<std::uint32_t>({0, 4, 3, 2, 1}));
  CHECK(p == std::vector<T>({T(0.5), T(0.5), T(0), T(0), T(0)}));
}

TEST_CASE("topk_softmax: indices and probabilities on every ISA", "[topk]") {
  for (const auto& isa : smax_test::isas()) {
    SECTION(isa) {
      smax_test::use_isa use(isa);
      topk_isa_body<float>();
      topk_isa_body<double>();
    }
  }
}

template <class T>
void topk_special_body() {
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> p(4, T(-1));
  std::vector<std::uint32_t> idx(4, 99);
  // NaN anywhere: all NaN, indices 0 .. k-1.
  for (std::size_t at : {std::size_t(0), std::size_t(17), std::size_t(99)}) {
    auto x = smax_test::normal<T>(100, 1.0, 3);
    x[at] = nan;
    d::topk_softmax(x.data(), x.size(), 4, p.data(), idx.data());
    CHECK(variants_test::all_nan(p));
    CHECK(idx == std::vector<std::uint32_t>({0, 1, 2, 3}));
  }
  // +inf entries share the mass; the next entries follow at 0.
  std::vector<T> x = {1, inf, 5, -inf, inf, 4};
  d::topk_softmax(x.data(), x.size(), 4, p.data(), idx.data());
  CHECK(idx == std::vector<std::uint32_t>({1, 4, 2, 5}));
  CHECK(p == std::vector<T>({T(0.5), T(0.5), T(0), T(0)}));
  // All -inf: zeros, lowest indices first.
  std::vector<T> ninf(7, -inf);
  d::topk_softmax(ninf.data(), ninf.size(), 4, p.data(), idx.data());
  CHECK(idx == std::vector<std::uint32_t>({0, 1, 2, 3}));
  CHECK(p == std::vector<T>(4, T(0)));
  // k > n: nothing written.
  std::vector<T> q(4, T(-1));
  CHECK_THROWS_AS(d::topk_softmax(x.data(), 3, 4, q.data(), idx.data()), std::invalid_argument);
  CHECK(q == std::vector<T>(4, T(-1)));
}

TEST_CASE("topk_softmax: special values and bad arguments on every ISA", "[topk]") {
  for (const auto& isa : smax_test::isas()) {
    SECTION(isa) {
      smax_test::use_isa use(isa);
      topk_special_body<float>();
      topk_special_body<double>();
    }
  }
}

template <class T>
void topk_batched_body() {
  const std::size_t rows = 9, cols = 1000, k = 37;
  const auto data = tied<T>(rows * (cols + 3), 8);
  const smax::matrix_view<const T> x(data.data(), rows, cols, cols + 3);
  std::vector<T> p1(rows * (k + 2)), p2(rows * (k + 2));
  std::vector<std::uint32_t> i1(rows * (k + 2)), i2(rows * (k + 2));
  d::topk_softmax(x, k, smax::matrix_view<T>(p1.data(), rows, k, k + 2),
                  smax::matrix_view<std::uint32_t>(i1.data(), rows, k, k + 2));
  for (std::size_t r = 0; r < rows; ++r) {
    std::vector<T> p(k);
    std::vector<std::uint32_t> idx(k);
    d::topk_softmax(x.row(r), cols, k, p.data(), idx.data());
    CHECK(std::equal(p.begin(), p.end(), p1.begin() + static_cast<std::ptrdiff_t>(r * (k + 2))));
    CHECK(std::equal(idx.begin(), idx.end(), i1.begin() + static_cast<std::ptrdiff_t>(r * (k + 2))));
  }
  for (std::size_t threads : {1, 2, 4}) {
    smax::thread_pool pool(threads);
    d::topk_softmax(x, k, smax::matrix_view<T>(p2.data(), rows, k, k + 2),
                    smax::matrix_view<std::uint32_t>(i2.data(), rows, k, k + 2), &pool);
    CHECK(smax_test::same_bits(p1, p2));
    CHECK(i1 == i2);
  }
  CHECK_THROWS_AS(d::topk_softmax(x, cols + 1, smax::matrix_view<T>(p2.data(), rows, cols + 1),
                                  smax::matrix_view<std::uint32_t>(i2.data(), rows, cols + 1)),
                  std::invalid_argument);
  CHECK_THROWS_AS(d::topk_softmax(x, k, smax::matrix_view<T>(p2.data(), rows, k + 1),
                                  smax::matrix_view<std::uint32_t>(i2.data(), rows, k)),
                  std::invalid_argument);
}

TEST_CASE("topk_softmax: batched rows equal single rows on any thread count", "[topk][batched]") {
  for (const auto& isa : smax_test::isas()) {
    SECTION(isa) {
      smax_test::use_isa use(isa);
      topk_batched_body<float>();
      topk_batched_body<double>();
    }
  }
}

// ------------------------------------------------------------- sampling --

TEST_CASE("sample: Philox4x32-10 matches the Random123 known answers; u in (0, 1)", "[topk][sample]") {
  // Random123 tests/kat_vectors, "philox4x32 10" (key words as (k0, k1)).
  struct kat {
    std::uint32_t ctr[4];
    std::uint64_t seed;
    std::uint32_t out[4];
  };
  const kat kats[] = {
      {{0, 0, 0, 0}, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, ~0ull, {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0x299f31d0a4093822ull,
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto& t : kats) {
    std::uint32_t c[4] = {t.ctr[0], t.ctr[1], t.ctr[2], t.ctr[3]};
    smax::detail::philox_scalar(c, smax::detail::philox_key(t.seed));
    CHECK(std::equal(c, c + 4, t.out));
  }
  double sum = 0;
  const int count = 20000;
  for (int i = 0; i < count; ++i) {
    const double u = smax::detail::sample_uniform(7, static_cast<std::uint64_t>(i));
    REQUIRE((u > 0 && u < 1));
    sum += u;
  }
  CHECK(std::fabs(sum / count - 0.5) < 5 * std::sqrt(1.0 / 12 / count));
}

// The filtered distribution by the contract, in long double, by sorting.
template <class T>
std::vector<ld> ref_filtered(const std::vector<T>& x, const smax::sampling& s) {
  const std::size_t n = x.size();
  const auto order = ranked(x);
  std::vector<ld> p(n, 0), out(n, 0);
  const ld m = x[order[0]];
  for (std::size_t i = 0; i < n; ++i) p[i] = std::exp((static_cast<ld>(x[i]) - m) / s.temperature);
  const std::size_t k = s.top_k ? s.top_k : n;
  ld total = 0;
  for (std::size_t j = 0; j < k; ++j) total += p[order[j]];
  ld mass = 0;
  for (std::size_t j = 0; j < k; ++j) {
    if (p[order[j]] < static_cast<ld>(s.min_p) * p[order[0]]) break;
    out[order[j]] = p[order[j]];
    mass += p[order[j]];
    if (mass >= static_cast<ld>(s.top_p) * total) break;
  }
  for (auto& v : out) v /= mass;
  return out;
}

// Draws `count` indices at offsets 0 .. count-1; each must be in the kept
// set; returns the chi-square statistic against `ref` over bins of
// expected count >= 5 (the rest pooled), and its degrees of freedom.
struct chi2 {
  double stat, df;
};

template <class T>
chi2 chi_square(const std::vector<T>& x, const smax::sampling& s, std::size_t count,
                                     std::uint64_t seed) {
  const auto ref = ref_filtered(x, s);
  std::vector<double> seen(x.size(), 0);
  bool inside = true;
  for (std::size_t t = 0; t < count; ++t) {
    const std::size_t i = d::sample(x.data(), x.size(), s, seed, t);
    if (i >= x.size() || !(ref[i] > 0)) {
      inside = false;
      break;
    }
    seen[i] += 1;
  }
  REQUIRE(inside);
  double stat = 0, pool_e = 0, pool_o = 0;
  std::size_t bins = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double e = static_cast<double>(ref[i]) * static_cast<double>(count);
    if (e >= 5) {
      stat += (seen[i] - e) * (seen[i] - e) / e;
      ++bins;
    } else {
      pool_e += e;
      pool_o += seen[i];
    }
  }
  if (pool_e > 0) {
    stat += (pool_o - pool_e) * (pool_o - pool_e) / std::max(pool_e, 1.0);
    ++bins;
  }
  return {stat, static_cast<double>(bins > 1 ? bins - 1 : 1)};
}

smax::sampling make(float temperature, std::size_t top_k, float top_p, float min_p) {
  smax::sampling s;
  s.temperature = temperature;
  s.top_k = top_k;
  s.top_p = top_p;
  s.min_p = min_p;
  return s;
}

template <class T>
void sample_distribution_body() {
  // Fewer draws where every instruction is emulated or instrumented (the
  // bound below holds for any count; fewer draws only test less finely).
  const bool native = smax_test::max_n() >= (std::size_t(1) << 24);
  const std::size_t draws = native ? 8000 : smax_test::sanitized ? 700 : 2000;
  const std::size_t big_draws = native ? 3000 : smax_test::sanitized ? 250 : 800;
  auto x = smax_test::normal<T>(60, 1.5, 21);
  x[10] = x[11] = x[12];  // ties
  const smax::sampling settings[] = {
      make(1.0f, 40, 0.95f, 0.0f),  make(0.7f, 10, 1.0f, 0.0f), make(1.3f, 0, 0.9f, 0.0f),
      make(1.0f, 0, 1.0f, 0.05f),   make(1.0f, 0, 1.0f, 0.0f),  make(0.8f, 25, 0.8f, 0.1f),
      make(2.0f, 60, 0.5f, 0.0f),
  };
  for (const auto& s : settings) {
    INFO(type_name<T>() << " T=" << s.temperature << " top_k=" << s.top_k << " top_p=" << s.top_p
                        << " min_p=" << s.min_p);
    const auto r = chi_square(x, s, draws, 1234);
    // About p = 1e-6 for the chi-square with r.df degrees of freedom.
    CHECK(r.stat < r.df + 7 * std::sqrt(2 * r.df) + 20);
  }
  // Long rows: the block walk (top_p = 1) and the growing selection
  // (top_p < 1, top_k = 0) over several blocks and selections.
  auto big = smax_test::normal<T>(5000, 1.0, 22);
  for (std::size_t i = 0; i < 30; ++i) big[i * 163] = static_cast<T>(5 + 0.1 * static_cast<double>(i));
  for (const auto& s : {make(1.0f, 0, 1.0f, 0.0f), make(1.0f, 0, 1.0f, 0.01f), make(1.0f, 0, 0.7f, 0.0f)}) {
    INFO(type_name<T>() << " n=5000 top_p=" << s.top_p << " min_p=" << s.min_p);
    const auto r = chi_square(big, s, big_draws, 99);
    CHECK(r.stat < r.df + 7 * std::sqrt(2 * r.df) + 20);
  }
}

TEST_CASE("sample: draws follow the filtered distribution on every ISA (chi-square)", "[topk][sample]") {
  for (const auto& isa : smax_test::isas()) {
    SECTION(isa) {
      smax_test::use_isa use(isa);
      sample_distribution_body<float>();
      sample_distribution_body<double>();
    }
  }
}

template <class T>
void sample_special_body() {
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  const smax::sampling settings[] = {make(0.0f, 0, 1.0f, 0.0f), make(1.0f, 0, 1.0f, 0.0f), make(1.0f, 3, 0.9f, 0.0f),
                                     make(1.0f, 0, 0.5f, 0.0f), make(0.5f, 0, 1.0f, 0.2f)};
  for (std::size_t n : {std::size_t(1), std::size_t(5), std::size_t(17), std::size_t(100), std::size_t(5000)}) {
    auto x = tied<T>(n, 30 + n);
    const auto order = ranked(x);
    for (const auto& s0 : settings) {
      smax::sampling s = s0;
      s.top_k = std::min(s.top_k, n);
      INFO(type_name<T>() << " n=" << n << " T=" << s.temperature << " top_k=" << s.top_k);
      // Temperature 0, top_k = 1, min_p = 1 and a tiny temperature: the
      // argmax (lowest index among ties) or, for min_p = 1, one of the ties.
      smax::sampling g = s;
      g.temperature = 0;
      CHECK(d::sample(x.data(), n, g, 5, 1) == order[0]);
      g = s;
      g.top_k = 1;
      CHECK(d::sample(x.data(), n, g, 5, 2) == order[0]);
      g = s;
      g.min_p = 1;
      CHECK(x[d::sample(x.data(), n, g, 5, 3)] == x[order[0]]);
      g = s;
      g.temperature = 1e-30f;
      CHECK(x[d::sample(x.data(), n, g, 5, 4)] == x[order[0]]);
      // Reproducible; NaN anywhere, or all -inf: n.
      CHECK(d::sample(x.data(), n, s, 77, 9) == d::sample(x.data(), n, s, 77, 9));
      auto y = x;
      y[n / 2] = nan;
      CHECK(d::sample(y.data(), n, s, 5, 0) == n);
      std::vector<T> none(n, -inf);
      CHECK(d::sample(none.data(), n, s, 5, 0) == n);
      // +inf entries: only they are drawn.
      if (n >= 5) {
        y = x;
        y[1] = y[n - 1] = inf;
        for (std::uint64_t t = 0; t < 20; ++t) {
          const std::size_t i = d::sample(y.data(), n, s, 5, t);
          CHECK((i == 1 || i == n - 1));
        }
      }
    }
  }
  // Huge finite logits: no NaN, the top entry wins.
  std::vector<T> huge = {-std::numeric_limits<T>::max(), std::numeric_limits<T>::max(), T(0)};
  CHECK(d::sample(huge.data(), 3, make(1.0f, 0, 1.0f, 0.0f), 1, 0) == 1);
  CHECK(d::sample(huge.data(), 3, make(1.0f, 2, 0.5f, 0.0f), 1, 0) == 1);
  // Different offsets and seeds draw different indices.
  const auto x = smax_test::normal<T>(1000, 0.5, 3);
  std::vector<std::size_t> a, b;
  for (std::uint64_t t = 0; t < 50; ++t) {
    a.push_back(d::sample(x.data(), x.size(), smax::sampling{}, 1, t));
    b.push_back(d::sample(x.data(), x.size(), smax::sampling{}, 2, t));
  }
  CHECK(a != b);
  CHECK(std::count(a.begin(), a.end(), a[0]) < 10);
}

TEST_CASE("sample: argmax, special values, reproducibility on every ISA", "[topk][sample]") {
  for (const auto& isa : smax_test::isas()) {
    SECTION(isa) {
      smax_test::use_isa use(isa);
      sample_special_body<float>();
      sample_special_body<double>();
    }
  }
}

TEST_CASE("sample: bad arguments throw", "[topk][sample]") {
  const std::vector<float> x = {1, 2, 3};
  const auto bad = [&](smax::sampling s, std::size_t n = 3) {
    CHECK_THROWS_AS(d::sample(x.data(), n, s, 1, 0), std::invalid_argument);
  };
  bad(smax::sampling{}, 0);
  bad(make(-1.0f, 0, 1.0f, 0.0f));
  bad(make(std::numeric_limits<float>::infinity(), 0, 1.0f, 0.0f));
  bad(make(std::numeric_limits<float>::quiet_NaN(), 0, 1.0f, 0.0f));
  bad(make(1.0f, 4, 1.0f, 0.0f));
  bad(make(1.0f, 0, 0.0f, 0.0f));
  bad(make(1.0f, 0, 1.5f, 0.0f));
  bad(make(1.0f, 0, std::numeric_limits<float>::quiet_NaN(), 0.0f));
  bad(make(1.0f, 0, 1.0f, -0.1f));
  bad(make(1.0f, 0, 1.0f, 1.1f));
  bad(make(1.0f, 0, 1.0f, std::numeric_limits<float>::quiet_NaN()));
  std::vector<std::size_t> out(2, 7);
  CHECK_THROWS_AS(d::sample(smax::matrix_view<const float>(x.data(), 2, 1), out.data(), make(1.0f, 2, 1.0f, 0.0f), 1),
                  std::invalid_argument);
  CHECK(out == std::vector<std::size_t>(2, 7));
}

template <class T>
void sample_batched_body() {
  const std::size_t rows = 13, cols = 3000;
  const auto data = smax_test::normal<T>(rows * (cols + 1), 2.0, 40);
  const smax::matrix_view<const T> x(data.data(), rows, cols, cols + 1);
  for (const auto& s : {make(1.0f, 40, 0.95f, 0.0f), make(0.9f, 0, 1.0f, 0.05f), make(1.0f, 0, 0.8f, 0.0f)}) {
    std::vector<std::size_t> one(rows), many(rows);
    d::sample(x, one.data(), s, 2024, 17);
    for (std::size_t r = 0; r < rows; ++r)
      CHECK(one[r] == d::sample(x.row(r), cols, s, smax::gumbel_row_seed(2024, r), 17));
    for (std::size_t threads : {2, 3}) {
      smax::thread_pool pool(threads);
      d::sample(x, many.data(), s, 2024, 17, &pool);
      CHECK(one == many);
    }
  }
}

TEST_CASE("sample: batched rows use gumbel_row_seed, any thread count", "[topk][sample][batched]") {
  for (const auto& isa : smax_test::isas()) {
    SECTION(isa) {
      smax_test::use_isa use(isa);
      sample_batched_body<float>();
      sample_batched_body<double>();
    }
  }
}

}  // namespace
