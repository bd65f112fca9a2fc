// The seeds' other members (seeds.hpp) through smax::dynamic on every ISA the
// CPU has, float and double: sigmoid_attention, sa_softmax (both forms),
// multimax and asentmax against long-double references from their formulas,
// sizes around the vector widths, misaligned and in place, the large-n
// (two-pass) paths, vectors from the official code (tests/data), special
// values, bad arguments, every backward against finite differences, and the
// batched forms row by row.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/seeds_reference.hpp"
#include "variants_common.hpp"

namespace {

using variants_test::ld;
using variants_test::type_name;

template <class T>
struct tol;
template <>
struct tol<float> {
  static constexpr double rel = 1e-6;  // per element, outputs above 1e-30
  static constexpr double u = 0x1p-24;
  static constexpr double abs_sparse = 1e-6;
};
template <>
struct tol<double> {
  static constexpr double rel = 1e-14;
  static constexpr double u = 0x1p-53;
  static constexpr double abs_sparse = 1e-13;
};

// ---------------------------------------------------------- references --

// sigmoid of x + b rounded to T, as the kernel forms it (the rounding of
// x + b alone moves e^z by |z| ulp).
template <class T>
std::vector<ld> ref_sigmoid(const std::vector<T>& x, T b) {
  std::vector<ld> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = 1.0L / (1.0L + std::exp(-static_cast<ld>(static_cast<T>(x[i] + b))));
  return y;
}

template <class T>
std::vector<ld> ref_softmax_ld(const std::vector<ld>& z) {
  ld m = -std::numeric_limits<ld>::infinity();
  for (ld v : z) m = std::max(m, v);
  std::vector<ld> y(z.size());
  ld s = 0;
  for (std::size_t i = 0; i < z.size(); ++i) s += (y[i] = std::exp(z[i] - m));
  for (auto& v : y) v /= s;
  return y;
}

template <class T>
std::vector<ld> ref_sa(const std::vector<T>& x, bool normalized) {
  std::vector<ld> z(x.begin(), x.end());
  std::vector<ld> p = ref_softmax_ld<T>(z);
  ld lo = 0, hi = 0;
  for (ld v : z) lo = std::min(lo, v), hi = std::max(hi, v);
  for (std::size_t i = 0; i < z.size(); ++i) p[i] *= normalized ? (hi > lo ? (z[i] - lo) / (hi - lo) : 0.0L) : z[i];
  return p;
}

ld sigma_ld(ld v, const smax::multimax_params& p) {
  const auto relu = [](ld a) { return a > 0 ? a : 0.0L; };
  const ld a = relu(p.ranges[2] - v), d = relu(v - p.ranges[3]);
  return v + p.ts[0] * relu(p.ranges[0] - v) + p.ts[1] * relu(v - p.ranges[1]) + p.ts[2] * a * a + p.ts[3] * d * d;
}
template <class T>
std::vector<ld> ref_multimax(const std::vector<T>& x, const smax::multimax_params& p, ld& sig_max) {
  std::vector<ld> z(x.size());
  sig_max = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sig_max = std::max(sig_max, std::fabs(z[i] = sigma_ld(x[i], p)));
  return ref_softmax_ld<T>(z);
}

// alpha-entmax of z in long double (bisection on tau to the last bit).
std::vector<ld> ref_entmax(const std::vector<ld>& z, ld alpha) {
  ld m = -std::numeric_limits<ld>::infinity();
  for (ld v : z) m = std::max(m, v);
  const ld am1 = alpha - 1, p = 1 / am1;
  const auto mass = [&](ld t) {
    ld s = 0;
    for (ld v : z) s += (am1 * (v - m) > t) ? std::pow(am1 * (v - m) - t, p) : 0.0L;
    return s;
  };
  ld lo = -1, hi = 0;  // mass(-1) >= 1 (the max alone), mass(0) = 0
  for (int it = 0; it < 80; ++it) {  // long double: 64 bits
    const ld mid = (lo + hi) / 2;
    (mass(mid) >= 1 ? lo : hi) = mid;
  }
  std::vector<ld> y(z.size());
  ld s = 0;
  for (std::size_t i = 0; i < z.size(); ++i) s += (y[i] = am1 * (z[i] - m) > lo ? std::pow(am1 * (z[i] - m) - lo, p) : 0.0L);
  for (auto& v : y) v /= s;
  return y;
}

// The scaled input exactly as the library forms it: c in double then T,
// c x rounded to T.
template <class T>
std::vector<ld> asentmax_input(const std::vector<T>& x, T s, T b) {
  const T c = static_cast<T>(static_cast<double>(s) * std::log(static_cast<double>(x.size())) + static_cast<double>(b));
  std::vector<ld> z(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) z[i] = static_cast<T>(c * x[i]);
  return z;
}

template <class T>
double max_abs_err(const std::vector<T>& y, const std::vector<ld>& ref) {
  double w = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    double e = static_cast<double>(std::fabs(y[i] - ref[i]));
    if (e != e) e = std::numeric_limits<double>::infinity();
    w = std::max(w, e);
  }
  return w;
}

// |y - ref| / |ref| for |ref| > 1e-30 (signed outputs), else |y| <= 2e-30.
template <class T>
double signed_rel_err(const std::vector<T>& y, const std::vector<ld>& ref) {
  double w = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    double e;
    if (std::fabs(ref[i]) > 1e-30L)
      e = static_cast<double>(std::fabs((y[i] - ref[i]) / ref[i]));
    else
      e = std::fabs(y[i]) <= 2e-30 ? 0.0 : std::numeric_limits<double>::infinity();
    if (e != e) e = std::numeric_limits<double>::infinity();
    w = std::max(w, e);
  }
  return w;
}

smax::multimax_params mm_params(int k) {
  smax::multimax_params p;
  if (k == 0) {
    const double r[4] = {-0.5, 0.8, -1.5, 2.0}, t[4] = {0.3, -0.2, 0.05, 0.02};
    std::copy(r, r + 4, p.ranges);
    std::copy(t, t + 4, p.ts);
  } else if (k == 1) {
    const double r[4] = {0.1, -0.3, 0.4, 1.1}, t[4] = {-0.6, 0.4, -0.01, 0.07};
    std::copy(r, r + 4, p.ranges);
    std::copy(t, t + 4, p.ts);
  }
  return p;
}

// Runs f(x, y) with x misaligned and with x == y; returns both outputs.
template <class T, class F>
void both_layouts(const std::vector<T>& x, F&& f, std::vector<T>& out, std::vector<T>& inplace) {
  variants_test::misaligned<T> a(x);
  out.assign(x.size() + 2, T(-7));
  f(a.p, out.data() + 1, x.size());
  REQUIRE(out.front() == T(-7));
  REQUIRE(out.back() == T(-7));
  out = std::vector<T>(out.begin() + 1, out.end() - 1);
  inplace = x;
  f(inplace.data(), inplace.data(), x.size());
}

template <class T>
void forward_accuracy(variants_test::worst_table& table) {
  std::vector<std::size_t> sizes = smax_test::sizes_up_to_max();
  // The two-pass path (plain sa_softmax, multimax): past 8 MiB.
  const std::size_t big = (std::size_t(3) << 20) * 4 / sizeof(T);
  if (big <= smax_test::max_n()) sizes.push_back(big);
  const T alphas[] = {T(1.5), T(1.25), T(2), T(3)};
  const T as_s = T(0.6), as_b = T(0.2);
  for (std::size_t n : sizes) {
    if (n == 0) continue;
    // The references do not depend on the ISA: computed once per n.
    const std::vector<T> x = smax_test::normal<T>(n, 3.0, 1000 + n);
    const T b = static_cast<T>(-std::log(static_cast<double>(n)));
    const std::vector<ld> ref_sig = ref_sigmoid(x, b);
    const std::vector<ld> ref_sa_plain = ref_sa(x, false), ref_sa_norm = ref_sa(x, true);
    const int n_params = n == big ? 1 : 3;
    std::vector<std::vector<ld>> ref_mm(n_params);
    std::vector<double> allow_mm(n_params);
    for (int k = 0; k < n_params; ++k) {
      ld sig_max;
      ref_mm[k] = ref_multimax(x, mm_params(k), sig_max);
      // the modulator's rounding (a few ulp of |sigma|) reaches the output
      // through the exp
      allow_mm[k] = tol<T>::rel + 4 * tol<T>::u * static_cast<double>(sig_max);
    }
    std::vector<std::vector<ld>> ref_as;
    if (n <= 4097)  // the reference bisects in long double
      for (T alpha : alphas) ref_as.push_back(ref_entmax(asentmax_input(x, as_s, as_b), alpha));

    for (const std::string& isa : smax_test::isas()) {
      smax_test::use_isa use(isa);
      const std::string key = isa + " " + type_name<T>();
      std::vector<T> y, yi;
      INFO(key << " n=" << n);
      both_layouts<T>(x, [&](const T* xp, T* yp, std::size_t k) { smax::dynamic::sigmoid_attention(xp, yp, k, b); }, y, yi);
      const double es = variants_test::rel_err(y, ref_sig);
      table.add("sigmoid_attention " + key, es);
      CHECK(es <= 4 * tol<T>::u);
      CHECK(variants_test::hash_bits(y) == variants_test::hash_bits(yi));
      for (bool norm : {false, true}) {
        both_layouts<T>(x, [&](const T* xp, T* yp, std::size_t k) { smax::dynamic::sa_softmax(xp, yp, k, norm); }, y, yi);
        const auto& ref = norm ? ref_sa_norm : ref_sa_plain;
        const double e1 = signed_rel_err(y, ref), e2 = signed_rel_err(yi, ref);
        table.add(std::string(norm ? "sa_softmax normalized " : "sa_softmax ") + key, std::max(e1, e2));
        CHECK(e1 <= tol<T>::rel);
        CHECK(e2 <= tol<T>::rel);
        CHECK(variants_test::hash_bits(y) == variants_test::hash_bits(yi));  // in place: the same bits
      }
      for (int k = 0; k < n_params; ++k) {
        const smax::multimax_params p = mm_params(k);
        both_layouts<T>(x, [&](const T* xp, T* yp, std::size_t m) { smax::dynamic::multimax(xp, yp, m, p); }, y, yi);
        const double e1 = variants_test::rel_err(y, ref_mm[k]), e2 = variants_test::rel_err(yi, ref_mm[k]);
        table.add("multimax / allowance " + key, std::max(e1, e2) / allow_mm[k]);
        CHECK(e1 <= allow_mm[k]);
        CHECK(e2 <= allow_mm[k]);
        CHECK(variants_test::hash_bits(y) == variants_test::hash_bits(yi));
      }
      for (std::size_t a = 0; a < ref_as.size(); ++a) {
        both_layouts<T>(x, [&](const T* xp, T* yp, std::size_t m) { smax::dynamic::asentmax(xp, yp, m, alphas[a], as_s, as_b); },
                        y, yi);
        const double e1 = max_abs_err(y, ref_as[a]), e2 = max_abs_err(yi, ref_as[a]);
        table.add("asentmax abs " + key, std::max(e1, e2));
        CHECK(e1 <= tol<T>::abs_sparse);
        CHECK(e2 <= tol<T>::abs_sparse);
        CHECK(variants_test::hash_bits(y) == variants_test::hash_bits(yi));
      }
    }
  }
}

}  // namespace

TEST_CASE("seeds: forward against long double, every ISA", "[seeds][accuracy]") {
  variants_test::worst_table table("seeds forward: worst error (multimax: / its allowance)");
  forward_accuracy<float>(table);
  forward_accuracy<double>(table);
}

namespace {

template <class T>
std::vector<T> from(const double* v, std::size_t n) {
  std::vector<T> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<T>(v[i]);
  return out;
}

template <class T>
void official_vectors() {
  namespace R = seeds_reference;
  struct row {
    const double *x, *r, *t, *mm, *sig, *sa, *san;
    double b;
    std::size_t n;
  };
  const row rows[] = {{R::x0, R::mm_ranges0, R::mm_ts0, R::multimax0, R::sigmoid0, R::sa0, R::sa_norm0, R::sig_b0, 37},
                      {R::x1, R::mm_ranges1, R::mm_ts1, R::multimax1, R::sigmoid1, R::sa1, R::sa_norm1, R::sig_b1, 19}};
  // The data are float64 results on the float64 x; float runs take x
  // rounded to float, so they get the float tolerance plus the input's
  // rounding (|x| <= 16: 16 ulp of the exponent).
  const double allow = sizeof(T) == 4 ? 2e-5 : 1e-13;
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa use(isa);
    for (const row& r : rows) {
      INFO(isa << " " << type_name<T>() << " n=" << r.n);
      const std::vector<T> x = from<T>(r.x, r.n);
      std::vector<T> y(r.n);
      const auto check = [&](const double* want) {
        for (std::size_t i = 0; i < r.n; ++i) {
          INFO("i=" << i);
          CHECK(std::fabs(static_cast<double>(y[i]) - want[i]) <= allow * std::fabs(want[i]) + 1e-300);
        }
      };
      smax::multimax_params p;
      std::copy(r.r, r.r + 4, p.ranges);
      std::copy(r.t, r.t + 4, p.ts);
      smax::dynamic::multimax(x.data(), y.data(), r.n, p);
      check(r.mm);
      smax::dynamic::sigmoid_attention(x.data(), y.data(), r.n, static_cast<T>(r.b));
      check(r.sig);
      smax::dynamic::sa_softmax(x.data(), y.data(), r.n, false);
      check(r.sa);
      smax::dynamic::sa_softmax(x.data(), y.data(), r.n, true);
      check(r.san);
    }
  }
}

}  // namespace

TEST_CASE("seeds: vectors from the official code / PyTorch (tests/data)", "[seeds]") {
  official_vectors<float>();
  official_vectors<double>();
}

namespace {

template <class T>
void special_values() {
  constexpr T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T big = std::numeric_limits<T>::max();
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa use(isa);
    INFO(isa << " " << type_name<T>());
    for (std::size_t n : {std::size_t(5), std::size_t(37)}) {
      std::vector<T> x = smax_test::normal<T>(n, 2.0, n), y(n);
      // sigmoid: elementwise limits; very negative -> exactly 0, never subnormal.
      std::vector<T> xs = x;
      xs[0] = inf, xs[1] = -inf, xs[2] = nan, xs[3] = -big, xs[4] = T(-200);
      smax::dynamic::sigmoid_attention(xs.data(), y.data(), n, T(0));
      CHECK(y[0] == T(1));
      CHECK(y[1] == T(0));
      CHECK(y[2] != y[2]);
      CHECK(y[3] == T(0));
      CHECK(y[4] == T(sizeof(T) == 4 ? 0 : std::exp(-200.0) / (1 + std::exp(-200.0))) );
      for (T v : y) CHECK(!(v != T(0) && std::fabs(v) < std::numeric_limits<T>::min()));
      smax::dynamic::sigmoid_attention(x.data(), y.data(), n, big);  // x + b overflows: 1
      for (T v : y) CHECK(v == T(1));

      for (bool norm : {false, true}) {
        INFO("normalized=" << norm);
        std::vector<T> xv = x;
        xv[1] = nan;
        smax::dynamic::sa_softmax(xv.data(), y.data(), n, norm);
        CHECK(variants_test::all_nan(y));
        xv = x;
        xv[1] = inf, xv[3] = inf;
        smax::dynamic::sa_softmax(xv.data(), y.data(), n, norm);
        for (std::size_t i = 0; i < n; ++i)
          CHECK(y[i] == ((i == 1 || i == 3) ? (norm ? T(0.5) : inf) : T(0)));
        xv = x;
        xv[2] = -inf;
        smax::dynamic::sa_softmax(xv.data(), y.data(), n, norm);
        CHECK(y[2] == T(0));
        CHECK(variants_test::all_finite(y));
        if (norm) {  // the factor's limit is 1: softmax of the rest
          std::vector<T> p(n);
          smax::dynamic::softmax(xv.data(), p.data(), n);
          for (std::size_t i = 0; i < n; ++i) CHECK(std::fabs(y[i] - p[i]) <= 1e-6 * p[i]);
        }
        std::fill(xv.begin(), xv.end(), -inf);
        smax::dynamic::sa_softmax(xv.data(), y.data(), n, norm);
        for (T v : y) CHECK(v == T(0));
        std::fill(xv.begin(), xv.end(), T(0));  // normalized: 0/0 is 0
        smax::dynamic::sa_softmax(xv.data(), y.data(), n, norm);
        for (T v : y) CHECK(v == T(0));
        // Huge finite: no overflow, and both forms match the reference.
        xv = x;
        xv[0] = big, xv[1] = -big, xv[2] = big / 2;
        smax::dynamic::sa_softmax(xv.data(), y.data(), n, norm);
        CHECK(variants_test::all_finite(y));
        CHECK(std::fabs(y[0] - (norm ? T(1) : big)) <= 4 * tol<T>::u * (norm ? T(1) : big));
        CHECK(y[1] == T(0));
      }

      const smax::multimax_params p = mm_params(0);
      std::vector<T> xm = x;
      xm[0] = -inf;
      smax::dynamic::multimax(xm.data(), y.data(), n, p);  // masked
      CHECK(y[0] == T(0));
      CHECK(variants_test::all_finite(y));
      xm[2] = inf;
      smax::dynamic::multimax(xm.data(), y.data(), n, p);
      for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == (i == 2 ? T(1) : T(0)));
      xm[3] = nan;
      smax::dynamic::multimax(xm.data(), y.data(), n, p);
      CHECK(variants_test::all_nan(y));
      std::fill(xm.begin(), xm.end(), -inf);
      smax::dynamic::multimax(xm.data(), y.data(), n, p);
      for (T v : y) CHECK(v == T(0));

      std::vector<T> xa = x;
      xa[1] = inf;
      smax::dynamic::asentmax(xa.data(), y.data(), n, T(1.5), T(1), T(0));
      for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == (i == 1 ? T(1) : T(0)));
      xa[2] = nan;
      smax::dynamic::asentmax(xa.data(), y.data(), n, T(1.5), T(1), T(0));
      CHECK(variants_test::all_nan(y));
      xa = x;
      xa[0] = big;  // c m overflows T: the entry acts as +inf
      smax::dynamic::asentmax(xa.data(), y.data(), n, T(1.5), T(2), T(1));
      for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == (i == 0 ? T(1) : T(0)));
      smax::dynamic::asentmax(x.data(), y.data(), n, T(1.5), T(0), T(0));  // c = 0: uniform
      for (T v : y) CHECK(std::fabs(v - T(1) / T(n)) <= 4 * tol<T>::u);
    }
    // n = 1: asentmax's log n is 0, so c = b.
    T one = T(3), out = T(-1);
    smax::dynamic::asentmax(&one, &out, 1, T(1.5), T(1), T(0));
    CHECK(out == T(1));
  }
}

}  // namespace

namespace {

// sa_softmax's in-cache path (sa_softmax_reload) keeps a product only for
// |g| >= 2^-100 and x within weight_depth of the max, and hands rows with
// |max| beyond split_limit or R outside [1, 2^100] to the two-pass path.
// Rows at each of those edges, both forms, against the reference.
template <class T>
void sa_reload_edges() {
  const std::size_t n = 203;  // a tail after the vectors on every ISA
  std::vector<std::vector<T>> rows;
  std::mt19937 gen(11);
  std::normal_distribution<double> nd(0.0, 3.0);
  const auto row = [&](double shift, double spread) {
    std::vector<T> x(n);
    for (auto& v : x) v = static_cast<T>(shift + spread * nd(gen));
    return x;
  };
  rows.push_back(row(0, 1));
  for (std::size_t k : {0, 5, 17, 64, 202}) {  // tiny entries around the cut
    std::vector<T> x = row(0, 1);
    x[k] = static_cast<T>(std::ldexp(1.0, -100 + static_cast<int>(k % 3) - 1));
    x[(k + 1) % n] = -x[k];
    x[(k + 2) % n] = std::numeric_limits<T>::denorm_min();
    rows.push_back(x);
  }
  {  // a band from just above the depth to far below it
    std::vector<T> x = row(0, 1);
    x[0] = T(10);
    for (std::size_t i = 1; i < 60; ++i) x[i] = static_cast<T>(10.0 - 60.0 - 2.0 * static_cast<double>(i));
    rows.push_back(x);  // (-inf entries: special_values)
  }
  {  // one tiny entry that carries the weight: y = x near 2^-98
    std::vector<T> x(n, T(-40));
    x[9] = static_cast<T>(std::ldexp(1.0, -98));
    rows.push_back(x);
  }
  rows.push_back(row(-4000, 3));  // the max near -split_limit
  rows.push_back(row(4000, 3));
  rows.push_back(row(5000, 3));   // beyond: the general path
  {
    std::vector<T> x = row(0, 1);  // range just below 2^100, then beyond
    x[3] = static_cast<T>(-std::ldexp(1.0, 99));
    rows.push_back(x);
    x[3] = static_cast<T>(-std::ldexp(1.0, 101));
    rows.push_back(x);
  }
  rows.push_back(row(0, 1e-30));  // range below 1 (the factor's scaling)
  {  // the max at +-split_limit itself (float's; double's is 2^20)
    std::vector<T> x = row(4090, 3);
    for (auto& v : x) v = std::min(v, T(4096));
    x[7] = T(4096);
    rows.push_back(x);
    x = row(-4100, 3);
    for (auto& v : x) v = std::min(v, T(-4096));
    x[7] = T(-4096);
    rows.push_back(x);
  }
  // Short rows: ranges below 2^-100 (the factor's capped scaling leaves R
  // below 1: the general path), and a normalized g near its cut that
  // carries weight (x = {2^-20, 2^-118}: g = 2^-98, y near 2^-99).
  rows.push_back({std::numeric_limits<T>::denorm_min(), T(0)});
  {
    std::vector<T> x(1024, T(0));
    x[0] = std::numeric_limits<T>::min();
    rows.push_back(x);
  }
  rows.push_back({static_cast<T>(std::ldexp(1.0, -20)), static_cast<T>(std::ldexp(1.0, -118))});
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa use(isa);
    for (std::size_t r = 0; r < rows.size(); ++r)
      for (bool norm : {false, true}) {
        INFO(isa << " " << type_name<T>() << " row " << r << " normalized=" << norm);
        const std::vector<T>& x = rows[r];
        std::vector<T> y(x.size()), yi = x;
        smax::dynamic::sa_softmax(x.data(), y.data(), x.size(), norm);
        smax::dynamic::sa_softmax(yi.data(), yi.data(), x.size(), norm);
        CHECK(signed_rel_err(y, ref_sa(x, norm)) <= tol<T>::rel);
        CHECK(variants_test::hash_bits(y) == variants_test::hash_bits(yi));
        for (T v : y) CHECK(!(v != T(0) && std::fabs(v) < std::numeric_limits<T>::min()));
      }
  }
}

}  // namespace

TEST_CASE("seeds: sa_softmax in cache at its edges, every ISA", "[seeds]") {
  sa_reload_edges<float>();
  sa_reload_edges<double>();
}

TEST_CASE("seeds: special values", "[seeds]") {
  special_values<float>();
  special_values<double>();
}

TEST_CASE("seeds: bad arguments throw before writing", "[seeds]") {
  std::vector<float> x(8, 1.0f), y(8, -7.0f), dx(8, -7.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_AS(smax::dynamic::sigmoid_attention(x.data(), y.data(), 8, nan), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::sigmoid_attention_backward(x.data(), y.data(), x.data(), dx.data(), 8, inf),
                  std::invalid_argument);
  smax::multimax_params p;
  p.ts[2] = inf;
  CHECK_THROWS_AS(smax::dynamic::multimax(x.data(), y.data(), 8, p), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::multimax_backward(x.data(), y.data(), x.data(), dx.data(), 8, p), std::invalid_argument);
  p = smax::multimax_params{};
  p.ranges[0] = nan;
  CHECK_THROWS_AS(smax::dynamic::multimax(x.data(), y.data(), 8, p), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::asentmax(x.data(), y.data(), 8, 0.9f, 1.0f), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::asentmax(x.data(), y.data(), 8, inf, 1.0f), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::asentmax(x.data(), y.data(), 8, 1.5f, nan), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::asentmax(x.data(), y.data(), 8, 1.5f, 1.0f, inf), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::asentmax(x.data(), y.data(), 8, 1.5f, 3e38f, 3e38f), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::asentmax_backward(x.data(), y.data(), x.data(), dx.data(), 8, 1.5f, 1.0f, nan),
                  std::invalid_argument);
  for (float v : y) CHECK(v == -7.0f);
  for (float v : dx) CHECK(v == -7.0f);
  const smax::matrix_view<const float> xm{x.data(), 2, 4, 4};
  const smax::matrix_view<float> ym{y.data(), 2, 4, 4};
  CHECK_THROWS_AS(smax::dynamic::sigmoid_attention(xm, ym, nan), std::invalid_argument);
  CHECK_THROWS_AS(smax::dynamic::asentmax(xm, ym, 0.5f, 1.0f), std::invalid_argument);
  for (float v : y) CHECK(v == -7.0f);
}

namespace {

// Every backward against central finite differences of its forward, in
// double, on every ISA; and the float kernels against the double ones.
void backward_checks() {
  const std::size_t sizes[] = {1, 2, 7, 9, 17, 33};
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa use(isa);
    for (std::size_t n : sizes) {
      INFO(isa << " n=" << n);
      std::vector<double> x = smax_test::normal<double>(n, 1.5, 77 + n), dy = smax_test::normal<double>(n, 1.0, 99 + n);
      std::vector<double> y(n), dx(n);
      const auto check = [&](const std::function<void(const double*, double*, std::size_t)>& f,
                             const std::function<void(const double*, const double*, const double*, double*)>& back,
                             double bound, const char* what) {
        INFO(what);
        f(x.data(), y.data(), n);
        back(x.data(), y.data(), dy.data(), dx.data());
        if (n == 1 && std::string(what).rfind("sa_", 0) != 0 && std::string(what) != "sigmoid_attention") {
          CHECK(std::fabs(dx[0]) <= 1e-15);  // a normalisation of one entry is constant
        } else {
          const std::vector<double> fd = variants_test::fd_vjp(f, x, dy);
          CHECK(variants_test::grad_err(dx, fd) <= bound);
        }
        // In place on dy gives the same bits.
        std::vector<double> d2 = dy;
        back(x.data(), y.data(), d2.data(), d2.data());
        CHECK(variants_test::hash_bits(d2) == variants_test::hash_bits(dx));
      };
      const double b = -std::log(static_cast<double>(n)) + 0.3;
      check([&](const double* a, double* o, std::size_t k) { smax::dynamic::sigmoid_attention(a, o, k, b); },
            [&](const double* a, const double* o, const double* g, double* d) {
              smax::dynamic::sigmoid_attention_backward(a, o, g, d, n, b);
            },
            1e-8, "sigmoid_attention");
      for (bool norm : {false, true})
        check([&](const double* a, double* o, std::size_t k) { smax::dynamic::sa_softmax(a, o, k, norm); },
              [&](const double* a, const double* o, const double* g, double* d) {
                smax::dynamic::sa_softmax_backward(a, o, g, d, n, norm);
              },
              1e-8, norm ? "sa_softmax normalized" : "sa_softmax");
      for (int k = 0; k < 3; ++k) {
        const smax::multimax_params p = mm_params(k);
        check([&](const double* a, double* o, std::size_t m) { smax::dynamic::multimax(a, o, m, p); },
              [&](const double* a, const double* o, const double* g, double* d) {
                smax::dynamic::multimax_backward(a, o, g, d, n, p);
              },
              1e-8, "multimax");
      }
      // c = 0.2 log n + 0.1 keeps several entries in the support.
      for (double alpha : {1.0, 1.5, 2.0, 2.5})
        check([&](const double* a, double* o, std::size_t m) { smax::dynamic::asentmax(a, o, m, alpha, 0.2, 0.1); },
              [&](const double* a, const double* o, const double* g, double* d) {
                smax::dynamic::asentmax_backward(a, o, g, d, n, alpha, 0.2, 0.1);
              },
              1e-6, "asentmax");
    }
  }
}

}  // namespace

TEST_CASE("seeds: backward against finite differences, every ISA", "[seeds][backward]") { backward_checks(); }

TEST_CASE("backward terms at the first extreme, wherever it lies, every ISA", "[seeds][softpick][backward]") {
  // sa_softmax_backward (normalized) adds its range terms at the first
  // minimum and maximum, softpick_backward its eps term at the first
  // argmax; both locate them with a vector search (first_index_of). Planted
  // in the first lane, inside a four-vector step, in the tail.
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa use(isa);
    for (std::size_t n : {std::size_t(67), std::size_t(300)}) {
      for (std::size_t lo_at : {std::size_t(0), std::size_t(37), n - 1}) {
        for (std::size_t hi_at : {std::size_t(1), n / 2, n - 2}) {
          INFO(isa << " n=" << n << " min at " << lo_at << " max at " << hi_at);
          std::vector<double> x = smax_test::normal<double>(n, 1.5, 5 + n + lo_at), dy = smax_test::normal<double>(n, 1.0, 7 + hi_at);
          for (auto& v : x)
            if (std::fabs(v) < 1e-2) v = 0.3;  // away from softpick's kinks at 0
          x[lo_at] = -9.0;
          x[hi_at] = 7.0;
          std::vector<double> y(n), dx(n);
          smax::dynamic::sa_softmax(x.data(), y.data(), n, true);
          smax::dynamic::sa_softmax_backward(x.data(), y.data(), dy.data(), dx.data(), n, true);
          const auto sa = [](const double* a, double* o, std::size_t k) { smax::dynamic::sa_softmax(a, o, k, true); };
          CHECK(variants_test::grad_err(dx, variants_test::fd_vjp(sa, x, dy)) <= 1e-7);
          smax::dynamic::softpick(x.data(), y.data(), n, 0.5);
          smax::dynamic::softpick_backward(x.data(), y.data(), dy.data(), dx.data(), n, 0.5);
          const auto sp = [](const double* a, double* o, std::size_t k) { smax::dynamic::softpick(a, o, k, 0.5); };
          CHECK(variants_test::grad_err(dx, variants_test::fd_vjp(sp, x, dy)) <= 1e-7);
        }
      }
    }
  }
}

namespace {

// The normalized sa_softmax's vector-Jacobian product in long double, from
// the Jacobian itself: y_k = g_k p_k, g_k = (x_k - lo) / R, lo and hi the
// first minimum (if below 0) and maximum (if above 0).
template <class T>
std::vector<long double> sa_normalized_vjp(const std::vector<T>& x, const std::vector<T>& dy) {
  const std::size_t n = x.size();
  long double lo = 0, hi = 0, m = -std::numeric_limits<long double>::infinity();
  for (T v : x) lo = std::min(lo, (long double)v), hi = std::max(hi, (long double)v), m = std::max(m, (long double)v);
  std::size_t imin = n, imax = n;
  for (std::size_t i = n; i-- > 0;) {
    if (lo < 0 && x[i] == lo) imin = i;
    if (hi > 0 && x[i] == hi) imax = i;
  }
  std::vector<long double> p(n), out(n, 0);
  long double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += p[i] = std::exp((long double)x[i] - m);
  for (auto& v : p) v /= s;
  const long double R = hi - lo;
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t k = 0; k < n; ++k) {
      const long double g = (x[k] - lo) / R, dlo = (j == imin), dhi = (j == imax);
      const long double dg = (static_cast<long double>(k == j) - dlo) / R - (x[k] - lo) * (dhi - dlo) / (R * R);
      out[j] += dy[k] * (dg * p[k] + g * p[k] * (static_cast<long double>(k == j) - p[j]));
    }
  return out;
}

template <class T>
void sa_backward_tiny_ranges(T tol) {
  // x = {0, r}, dy = {0, 4}: the exact gradient is {-1, 1} (p = 1/2 each,
  // to within r). The general form gave {-1, 0} for r from 1e-10 to 1e-30
  // in float and {-1, +inf} near 1e-38.
  for (double r : {1e-3, 1e-10, 1e-30, 2e-38, 1e-100, 1e-300}) {
    if (r < static_cast<double>(std::numeric_limits<T>::min())) continue;
    INFO("r = " << r);
    std::vector<T> x = {T(0), static_cast<T>(r)}, dy = {T(0), T(4)}, y(2), dx(2);
    smax::dynamic::sa_softmax(x.data(), y.data(), 2, true);
    smax::dynamic::sa_softmax_backward(x.data(), y.data(), dy.data(), dx.data(), 2, true);
    CHECK(std::fabs(dx[0] + 1) <= tol + r);
    CHECK(std::fabs(dx[1] - 1) <= tol + r);
  }
  std::mt19937 gen(11);
  std::uniform_real_distribution<double> u(-1, 1);
  for (double range : {0.5, 1e-3, 1e-12, 1e-30}) {
    for (std::size_t n : {std::size_t(3), std::size_t(40), std::size_t(1500)}) {
      INFO("range " << range << " n = " << n);
      std::vector<T> x(n), dy(n), y(n), dx(n);
      for (auto& v : x) v = static_cast<T>(u(gen) * range);
      for (auto& v : dy) v = static_cast<T>(u(gen));
      smax::dynamic::sa_softmax(x.data(), y.data(), n, true);
      smax::dynamic::sa_softmax_backward(x.data(), y.data(), dy.data(), dx.data(), n, true);
      const std::vector<long double> ref = sa_normalized_vjp(x, dy);
      long double scale = 0;  // (the gradient's size: the largest |dx| or |dy| p)
      for (std::size_t i = 0; i < n; ++i)
        scale = std::max({scale, std::fabs(ref[i]), std::fabs((long double)dy[i] * y[i])});
      for (std::size_t i = 0; i < n; ++i) CHECK(std::fabs(dx[i] - ref[i]) <= tol * scale);
      // In place on dy and on x: the same bits.
      std::vector<T> d2 = dy, x2 = x;
      smax::dynamic::sa_softmax_backward(x.data(), y.data(), d2.data(), d2.data(), n, true);
      smax::dynamic::sa_softmax_backward(x2.data(), y.data(), dy.data(), x2.data(), n, true);
      CHECK(d2 == dx);
      CHECK(x2 == dx);
    }
  }
}

}  // namespace

TEST_CASE("seeds: normalized sa_softmax_backward on rows of tiny range, every ISA", "[seeds][backward]") {
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa use(isa);
    INFO(isa);
    sa_backward_tiny_ranges<float>(1e-6f);
    sa_backward_tiny_ranges<double>(1e-13);
  }
}

TEST_CASE("seeds: backward special values", "[seeds][backward]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa use(isa);
    const std::size_t n = 11;
    std::vector<double> x = smax_test::normal<double>(n, 1.0, 5), dy(n, 0.5), y(n), dx(n);
    dy[3] = -1;
    for (bool norm : {false, true}) {
      std::vector<double> xv = x;
      xv[2] = inf;
      smax::dynamic::sa_softmax(xv.data(), y.data(), n, norm);
      smax::dynamic::sa_softmax_backward(xv.data(), y.data(), dy.data(), dx.data(), n, norm);
      for (double v : dx) CHECK(v == 0.0);
      xv[2] = nan;
      smax::dynamic::sa_softmax_backward(xv.data(), y.data(), dy.data(), dx.data(), n, norm);
      CHECK(variants_test::all_nan(dx));
      xv = x;
      xv[4] = -inf;
      smax::dynamic::sa_softmax(xv.data(), y.data(), n, norm);
      smax::dynamic::sa_softmax_backward(xv.data(), y.data(), dy.data(), dx.data(), n, norm);
      CHECK(dx[4] == 0.0);
      CHECK(variants_test::all_finite(dx));
    }
    const smax::multimax_params p = mm_params(1);
    std::vector<double> xm = x;
    xm[0] = -inf;
    smax::dynamic::multimax(xm.data(), y.data(), n, p);
    smax::dynamic::multimax_backward(xm.data(), y.data(), dy.data(), dx.data(), n, p);
    CHECK(dx[0] == 0.0);
    CHECK(variants_test::all_finite(dx));
    xm[1] = inf;
    smax::dynamic::multimax(xm.data(), y.data(), n, p);
    smax::dynamic::multimax_backward(xm.data(), y.data(), dy.data(), dx.data(), n, p);
    for (double v : dx) CHECK(v == 0.0);
    std::vector<double> ds = dy;
    ds[5] = nan;
    smax::dynamic::sigmoid_attention_backward(x.data(), y.data(), ds.data(), dx.data(), n, 0.0);
    for (std::size_t i = 0; i < n; ++i) CHECK((dx[i] != dx[i]) == (i == 5));
    xm = x;
    xm[0] = -1e300, xm[1] = 1e300;
    smax::dynamic::sigmoid_attention_backward(xm.data(), y.data(), dy.data(), dx.data(), n, 0.0);
    CHECK(dx[0] == 0.0);
    CHECK(dx[1] == 0.0);
  }
}

TEST_CASE("seeds: float agrees with double", "[seeds]") {
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa use(isa);
    const std::size_t n = 301;
    const std::vector<float> xf = smax_test::normal<float>(n, 2.0, 3), dyf = smax_test::normal<float>(n, 1.0, 4);
    const std::vector<double> xd(xf.begin(), xf.end()), dyd(dyf.begin(), dyf.end());
    std::vector<float> yf(n), dxf(n);
    std::vector<double> yd(n), dxd(n);
    const auto close = [&](const char* what) {
      INFO(isa << " " << what);
      double scale = 0;
      for (double v : dxd) scale = std::max(scale, std::fabs(v));
      for (std::size_t i = 0; i < n; ++i) CHECK(std::fabs(dxf[i] - dxd[i]) <= 2e-5 * scale);
    };
    smax::dynamic::sa_softmax(xf.data(), yf.data(), n, true);
    smax::dynamic::sa_softmax(xd.data(), yd.data(), n, true);
    smax::dynamic::sa_softmax_backward(xf.data(), yf.data(), dyf.data(), dxf.data(), n, true);
    smax::dynamic::sa_softmax_backward(xd.data(), yd.data(), dyd.data(), dxd.data(), n, true);
    close("sa_softmax_backward");
    const smax::multimax_params p = mm_params(0);
    smax::dynamic::multimax(xf.data(), yf.data(), n, p);
    smax::dynamic::multimax(xd.data(), yd.data(), n, p);
    smax::dynamic::multimax_backward(xf.data(), yf.data(), dyf.data(), dxf.data(), n, p);
    smax::dynamic::multimax_backward(xd.data(), yd.data(), dyd.data(), dxd.data(), n, p);
    close("multimax_backward");
    smax::dynamic::sigmoid_attention_backward(xf.data(), yf.data(), dyf.data(), dxf.data(), n, -1.0f);
    smax::dynamic::sigmoid_attention_backward(xd.data(), yd.data(), dyd.data(), dxd.data(), n, -1.0);
    close("sigmoid_attention_backward");
    smax::dynamic::asentmax(xf.data(), yf.data(), n, 1.5f, 0.5f, 0.1f);
    smax::dynamic::asentmax(xd.data(), yd.data(), n, 1.5, 0.5, 0.1);
    smax::dynamic::asentmax_backward(xf.data(), yf.data(), dyf.data(), dxf.data(), n, 1.5f, 0.5f, 0.1f);
    smax::dynamic::asentmax_backward(xd.data(), yd.data(), dyd.data(), dxd.data(), n, 1.5, 0.5, 0.1);
    close("asentmax_backward");
  }
}

TEST_CASE("seeds: batched rows equal the single-vector calls", "[seeds][batched]") {
  const std::size_t rows = 5, cols = 37, stride = 41;
  std::vector<float> x(rows * stride), dy(rows * stride);
  const std::vector<float> src = smax_test::normal<float>(rows * stride, 2.0, 11), g = smax_test::normal<float>(rows * stride, 1.0, 12);
  std::copy(src.begin(), src.end(), x.begin());
  std::copy(g.begin(), g.end(), dy.begin());
  const smax::matrix_view<const float> xm{x.data(), rows, cols, stride}, dym{dy.data(), rows, cols, stride};
  std::vector<float> y(rows * stride), dx(rows * stride), r(cols), dr(cols);
  const smax::matrix_view<float> ym{y.data(), rows, cols, stride}, dxm{dx.data(), rows, cols, stride};
  const smax::matrix_view<const float> yc{y.data(), rows, cols, stride};
  const smax::multimax_params p = mm_params(0);
  smax::thread_pool pool(3);
  const auto same = [&](const std::vector<float>& out, std::size_t i, const std::vector<float>& want) {
    for (std::size_t j = 0; j < cols; ++j) CHECK(out[i * stride + j] == want[j]);
  };
  for (smax::executor* ex : {static_cast<smax::executor*>(nullptr), static_cast<smax::executor*>(&pool)}) {
    smax::dynamic::sigmoid_attention(xm, ym, -1.5f, ex);
    smax::dynamic::sigmoid_attention_backward(xm, yc, dym, dxm, -1.5f, ex);
    for (std::size_t i = 0; i < rows; ++i) {
      smax::dynamic::sigmoid_attention(&x[i * stride], r.data(), cols, -1.5f);
      smax::dynamic::sigmoid_attention_backward(&x[i * stride], r.data(), &dy[i * stride], dr.data(), cols, -1.5f);
      same(y, i, r);
      same(dx, i, dr);
    }
    smax::dynamic::sa_softmax(xm, ym, true, ex);
    smax::dynamic::sa_softmax_backward(xm, yc, dym, dxm, true, ex);
    for (std::size_t i = 0; i < rows; ++i) {
      smax::dynamic::sa_softmax(&x[i * stride], r.data(), cols, true);
      smax::dynamic::sa_softmax_backward(&x[i * stride], r.data(), &dy[i * stride], dr.data(), cols, true);
      same(y, i, r);
      same(dx, i, dr);
    }
    smax::dynamic::multimax(xm, ym, p, ex);
    smax::dynamic::multimax_backward(xm, yc, dym, dxm, p, ex);
    for (std::size_t i = 0; i < rows; ++i) {
      smax::dynamic::multimax(&x[i * stride], r.data(), cols, p);
      smax::dynamic::multimax_backward(&x[i * stride], r.data(), &dy[i * stride], dr.data(), cols, p);
      same(y, i, r);
      same(dx, i, dr);
    }
    smax::dynamic::asentmax(xm, ym, 1.5f, 0.5f, 0.25f, ex);
    smax::dynamic::asentmax_backward(xm, yc, dym, dxm, 1.5f, 0.5f, 0.25f, ex);
    for (std::size_t i = 0; i < rows; ++i) {
      smax::dynamic::asentmax(&x[i * stride], r.data(), cols, 1.5f, 0.5f, 0.25f);
      smax::dynamic::asentmax_backward(&x[i * stride], r.data(), &dy[i * stride], dr.data(), cols, 1.5f, 0.5f, 0.25f);
      same(y, i, r);
      same(dx, i, dr);
    }
  }
}
