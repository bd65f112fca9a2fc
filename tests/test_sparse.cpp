// The sparse family (sparsemax, entmax15, entmax_bisect and their backward)
// through smax::dynamic on every ISA the CPU has, float and double, against
// long-double references written here: sort-based for sparsemax and
// 1.5-entmax (the algorithm of today's libraries), sort + root-finding for
// alpha-entmax.
//
// Accuracy model checked per element (support entries, ref > 0):
//   |y - ref| <= R ref + 16 * 2^-53 (1 + |tau|) ref^(2 - alpha)
// R = 1e-6 (float) / 1e-13 (double). The second term is the rounding of the
// threshold tau (solved in double, |tau| the threshold in x units) times
// dy/dtau = y^(2 - alpha): no double-precision kernel can beat it for outputs
// far below |tau|, and for float outputs it is far below the first term.
#include <smax/smax.hpp>

#include <algorithm>
#include <cfloat>
#include <numeric>
#include <stdexcept>
#include <string>

#include "common.hpp"

namespace {

using ld = long double;
constexpr ld ld_inf = std::numeric_limits<ld>::infinity();

template <class T>
double rel_tol() {
  return sizeof(T) == 4 ? 1e-6 : 1e-13;
}
template <class T>
double sum_tol() {
  return sizeof(T) == 4 ? 1e-6 : 1e-12;
}

// ------------------------------------------------------------ references --

// The exact answer as its threshold: y(x) = (am1 ((x - m) - t))_+^(1/am1),
// support x > m + t.
struct reference {
  ld m = 0, t = 0;
  ld alpha = 2;
  ld tau() const { return m + t; }
  ld value(ld x) const {
    const ld e = (x - m) - t;
    if (!(e > 0)) return 0;
    if (alpha == 2) return e;
    if (alpha == 1.5L) return (e / 2) * (e / 2);
    const ld am1 = alpha - 1;
    return std::pow(am1 * e, 1 / am1);
  }
};

// The finite entries of x, descending, and their max m.
template <class T>
std::vector<ld> finite_desc(const std::vector<T>& x, ld& m) {
  std::vector<ld> z;
  for (T v : x)
    if (std::isfinite(static_cast<double>(v))) z.push_back(static_cast<ld>(v));
  std::sort(z.begin(), z.end(), [](ld a, ld b) { return a > b; });
  m = z.empty() ? -ld_inf : z[0];
  return z;
}

// Sparsemax by sorting (Held et al. 1974; Martins & Astudillo 2016, Alg. 1):
// the support is the top k for the largest k with 1 + k z_k > sum_{j<=k} z_j.
reference sparsemax_sorted(const std::vector<ld>& z, ld m) {
  ld cs = 0, tau = 0;
  for (std::size_t k = 1; k <= z.size(); ++k) {
    cs += z[k - 1] - m;
    if (1 + static_cast<ld>(k) * (z[k - 1] - m) > cs) tau = (cs - 1) / static_cast<ld>(k);
  }
  reference r;
  r.m = m;
  r.t = tau;
  r.alpha = 2;
  return r;
}

// 1.5-entmax by sorting (Peters et al. 2019, Alg. 2) on z = (x - m)/2, with
// the moments of the top k kept as Welford mean / M2 so the variance does not
// cancel: tau_k = mean_k - sqrt((1 - M2_k) / k), the support is the largest k
// with tau_k < z_k.
reference entmax15_sorted(const std::vector<ld>& z, ld m) {
  ld mean = 0, M2 = 0, tau = -1;
  for (std::size_t k = 1; k <= z.size(); ++k) {
    const ld v = (z[k - 1] - m) / 2;
    const ld delta_mean = v - mean;
    mean += delta_mean / static_cast<ld>(k);
    M2 += delta_mean * (v - mean);
    if (M2 > 1) break;
    const ld tk = mean - std::sqrt((1 - M2) / static_cast<ld>(k));
    if (tk < v) tau = tk;
  }
  reference r;
  r.m = m;
  r.t = 2 * tau;
  r.alpha = 1.5L;
  return r;
}

template <class T>
reference ref_sparsemax(const std::vector<T>& x) {
  ld m;
  const std::vector<ld> z = finite_desc(x, m);
  return sparsemax_sorted(z, m);
}

template <class T>
reference ref_entmax15(const std::vector<T>& x) {
  ld m;
  const std::vector<ld> z = finite_desc(x, m);
  return entmax15_sorted(z, m);
}

// alpha-entmax: with d sorted descending (relative to m) and
// F(t) = sum (am1 (d_i - t))_+^p, F(d_j) is non-decreasing in j and the
// support is {j : F(d_j) < 1}: found by binary search, then the threshold
// solved on it by Newton steps (bisection when a step leaves the bracket) in
// long double.
template <class T>
reference ref_entmax(const std::vector<T>& x, ld alpha) {
  ld m;
  std::vector<ld> d = finite_desc(x, m);
  for (auto& v : d) v -= m;
  const ld am1 = alpha - 1, p = 1 / am1;
  const auto F = [&](std::size_t k, ld t) {  // over the top k
    ld s = 0;
    for (std::size_t i = 0; i < k; ++i)
      if (d[i] > t) s += std::pow(am1 * (d[i] - t), p);
    return s;
  };
  std::size_t lo = 1, hi = d.size();  // F(d_0) = 0 < 1: the max is in
  while (lo < hi) {
    const std::size_t mid = (lo + hi + 1) / 2;  // is d[mid - 1] in?
    if (F(mid - 1, d[mid - 1]) < 1)
      lo = mid;
    else
      hi = mid - 1;
  }
  const std::size_t k = lo;
  // On the support G(t) = sum_{i<k} (am1 (d_i - t))^p is smooth on [a, b].
  ld a = std::max<ld>(-p, k < d.size() ? d[k] : -p), b = d[k - 1];  // G(a) >= 1 > G(b)
  ld t = a;
  for (int it = 0; it < 200; ++it) {
    ld f = 0, fp = 0;
    for (std::size_t i = 0; i < k; ++i) {
      const ld u = am1 * (d[i] - t);
      const ld phi = std::pow(u, p);
      f += phi;
      fp += phi / u;
    }
    (f >= 1 ? a : b) = t;
    ld nt = t + (f - 1) / fp;
    if (!(nt >= a && nt <= b)) nt = (a + b) / 2;
    if (std::fabs(nt - t) <= 1e-18L * std::fabs(t) || f == 1) break;
    t = nt;
  }
  reference r;
  r.m = m;
  r.t = t;
  r.alpha = alpha;
  return r;
}

// ------------------------------------------------------------- the calls --

enum class fn { sparsemax, entmax15, bisect };

const char* fn_name(fn f) {
  return f == fn::sparsemax ? "sparsemax" : f == fn::entmax15 ? "entmax15" : "entmax_bisect";
}

template <class T>
void run(fn f, const T* x, T* y, std::size_t n, T alpha = T(1.5), int n_iter = 50) {
  switch (f) {
    case fn::sparsemax: return smax::dynamic::sparsemax(x, y, n);
    case fn::entmax15: return smax::dynamic::entmax15(x, y, n);
    case fn::bisect: return smax::dynamic::entmax_bisect(x, y, n, alpha, n_iter);
  }
}

template <class T>
reference ref_of(fn f, const std::vector<T>& x, ld alpha) {
  if (f == fn::sparsemax) return ref_sparsemax(x);
  if (f == fn::entmax15) return ref_entmax15(x);
  return ref_entmax(x, alpha);
}

// ------------------------------------------------------------- verdicts --

struct verdict {
  double worst = 0;              // worst relative error on the support
  std::size_t out_of_model = 0;  // entries beyond the accuracy model
  std::size_t support = 0;       // entries where y > 0 and ref > 0 disagree
  std::size_t not_zero = 0;      // entries outside the support that are not +0
  double sum_err = 0;            // |sum y - 1|
};

template <class T>
verdict judge(const std::vector<T>& x, const std::vector<T>& y, const reference& r) {
  verdict v;
  ld s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const ld ref = r.value(static_cast<ld>(x[i]));
    s += static_cast<ld>(y[i]);
    if (ref > 0) {
      const ld err = std::fabs(static_cast<ld>(y[i]) - ref);
      const double rel = static_cast<double>(err / ref);
      v.worst = std::max(v.worst, rel == rel ? rel : std::numeric_limits<double>::infinity());
      const ld allowed = static_cast<ld>(rel_tol<T>()) * ref +
                         16 * std::ldexp(ld(1), -53) * (1 + std::fabs(r.tau())) * std::pow(ref, 2 - r.alpha);
      if (!(err <= allowed)) ++v.out_of_model;
      if (!(y[i] > 0)) ++v.support;
    } else {
      if (y[i] != 0) ++v.support;
      if (!(y[i] == 0 && !std::signbit(y[i]))) ++v.not_zero;
    }
  }
  v.sum_err = static_cast<double>(std::fabs(s - 1));
  return v;
}

// The accuracy model as an absolute bound for an output y near a threshold
// of size tau (two results of one function, each within it: twice).
template <class T>
double model_tol(T y, double tau, double alpha) {
  return 2 * (rel_tol<T>() * y + 16 * 0x1p-53 * (1 + std::fabs(tau)) * std::pow(static_cast<double>(y), 2 - alpha));
}

#define SMAX_CHECK_VERDICT(v, T)             \
  do {                                       \
    INFO("worst relative error " << (v).worst); \
    CHECK((v).out_of_model == 0);            \
    CHECK((v).support == 0);                 \
    CHECK((v).not_zero == 0);                \
    CHECK((v).sum_err <= sum_tol<T>());      \
  } while (0)

// Test inputs: spread logits (small support), narrow ones (large support),
// uniform, a coarse grid (many ties), and three that make Michelot-style
// iterations crawl so that the pivot steps run (mass piled up just below the
// top, just above the bottom, and sorted ascending input, which also makes
// every entry a candidate against the running max).
constexpr int n_inputs = 7;
template <class T>
std::vector<T> input(int kind, std::size_t n, std::uint64_t seed) {
  switch (kind) {
    case 0: return smax_test::normal<T>(n, 1.0, seed);
    case 1: return smax_test::normal<T>(n, 0.01, seed, 3.0);
    case 2: return smax_test::uniform<T>(n, -2.0, 2.0, seed);
    case 3: {
      auto x = smax_test::uniform<T>(n, -4.0, 4.0, seed);
      for (auto& v : x) v = std::floor(v * 4) / 4;
      return x;
    }
    case 4: {
      auto x = smax_test::uniform<T>(n, 0.0, 1.0, seed);
      for (auto& v : x) v = static_cast<T>(std::pow(static_cast<double>(v), 8.0));
      return x;
    }
    case 5: {
      auto x = smax_test::uniform<T>(n, 0.0, 1.0, seed);
      for (auto& v : x) v = static_cast<T>(1.0 - std::pow(static_cast<double>(v), 0.125));
      return x;
    }
    default: {
      auto x = smax_test::uniform<T>(n, 0.0, 1.5, seed);
      std::sort(x.begin(), x.end());
      return x;
    }
  }
}
const char* input_name(int kind) {
  static const char* names[] = {"normal(0,1)", "normal(3,0.01)", "uniform(-2,2)", "grid of 1/4",
                                "u^8",         "1-u^(1/8)",      "sorted uniform(0,1.5)"};
  return names[kind];
}

// Largest sizes of the per-ISA sweeps: the general-alpha reference is
// O(n log n) powl calls.
constexpr std::size_t sweep_max_n_alpha = 1025;

}  // namespace

// -------------------------------------------------------------- accuracy --

TEMPLATE_TEST_CASE("sparsemax and entmax15 match the sort-based long-double reference", "[sparse]", float, double) {
  using T = TestType;
  for (fn f : {fn::sparsemax, fn::entmax15})
    for (int kind = 0; kind < n_inputs; ++kind)
      for (std::size_t n : smax_test::sizes_up_to_max()) {
        if (n == 0) continue;
        const auto x = input<T>(kind, n, 1000 + n);
        const reference r = ref_of(f, x, 0);
        for (const auto& isa : smax_test::isas()) {
          smax_test::use_isa guard(isa);
          INFO(fn_name(f) << " isa " << isa << " n " << n << " input " << input_name(kind));
          std::vector<T> y(n);
          run(f, x.data(), y.data(), n);
          SMAX_CHECK_VERDICT(judge(x, y, r), T);
          // In place the candidates go to a stack buffer, and past 2048 of
          // them to a second read of x and a heap buffer.
          std::vector<T> inplace(x);
          run(f, inplace.data(), inplace.data(), n);
          SMAX_CHECK_VERDICT(judge(x, inplace, r), T);
        }
      }
}

TEMPLATE_TEST_CASE("entmax_bisect matches the long-double reference for several alpha", "[sparse]", float, double) {
  using T = TestType;
  // Under a size cap (QEMU, sanitizers: the long-double reference is slow
  // there) four of the seven alphas; 1.5 and 2 are also checked against
  // entmax15 and sparsemax below.
  const bool capped = smax_test::max_n() < (std::size_t(1) << 20);
  for (ld alpha : {1.1L, 1.25L, 1.5L, 1.75L, 2.0L, 2.5L, 4.0L}) {
    if (capped && (alpha == 1.1L || alpha == 1.5L || alpha == 2.0L)) continue;
    for (int kind = 0; kind < n_inputs; ++kind)
      for (std::size_t n : smax_test::sizes_up_to_max()) {
        if (n == 0 || n > sweep_max_n_alpha) continue;
        const auto x = input<T>(kind, n, 2000 + n);
        const reference r = ref_entmax(x, static_cast<ld>(static_cast<T>(alpha)));  // the alpha the kernel gets
        for (const auto& isa : smax_test::isas()) {
          smax_test::use_isa guard(isa);
          INFO("alpha " << static_cast<double>(alpha) << " isa " << isa << " n " << n << " input " << input_name(kind));
          std::vector<T> y(n);
          smax::dynamic::entmax_bisect(x.data(), y.data(), n, static_cast<T>(alpha));
          SMAX_CHECK_VERDICT(judge(x, y, r), T);
        }
      }
  }
}

TEST_CASE("float sparse family stays exact up to the largest n", "[sparse][large]") {
  const std::size_t n = smax_test::max_n();
  const auto x = smax_test::normal<float>(n, 1.0, 7);
  ld m;
  const std::vector<ld> z = finite_desc(x, m);  // one sort serves both references
  const reference rs = sparsemax_sorted(z, m), re = entmax15_sorted(z, m);
  for (fn f : {fn::sparsemax, fn::entmax15, fn::bisect}) {
    const reference& r = f == fn::sparsemax ? rs : re;
    for (const auto& isa : smax_test::isas()) {
      smax_test::use_isa guard(isa);
      INFO(fn_name(f) << " isa " << isa << " n " << n);
      std::vector<float> y(n);
      run(f, x.data(), y.data(), n, 1.5f);
      SMAX_CHECK_VERDICT(judge(x, y, r), float);
    }
  }
}

TEMPLATE_TEST_CASE("sparse family: misaligned, in place, nothing written outside", "[sparse]", float, double) {
  using T = TestType;
  const T sentinel = T(-12345.5);
  for (fn f : {fn::sparsemax, fn::entmax15, fn::bisect})
    for (std::size_t n : smax_test::sizes_up_to_max()) {
      const auto x = smax_test::normal<T>(n, 2.0, 3000 + n);
      for (const auto& isa : smax_test::isas()) {
        smax_test::use_isa guard(isa);
        INFO(fn_name(f) << " isa " << isa << " n " << n);
        std::vector<T> ref(n);
        run(f, x.data(), ref.data(), n, T(1.25));
        for (std::size_t offset : {std::size_t(1), std::size_t(3)}) {
          smax_test::guarded<T> in(n, offset, sentinel), out(n, offset + 1, sentinel);
          in.assign(x);
          run(f, in.data(), out.data(), n, T(1.25));
          CHECK(smax_test::same_bits(out.values(), ref));
          CHECK(in.intact());
          CHECK(out.intact());
          run(f, in.data(), in.data(), n, T(1.25));  // in place
          CHECK(smax_test::same_bits(in.values(), ref));
          CHECK(in.intact());
        }
      }
      if (n == 0) {  // n = 0 touches nothing, null pointers included
        run<T>(f, nullptr, nullptr, 0);
      }
    }
}

// ------------------------------------------------------------ properties --

TEMPLATE_TEST_CASE("sparse family: shift invariance and permutation equivariance", "[sparse]", float, double) {
  using T = TestType;
  for (fn f : {fn::sparsemax, fn::entmax15, fn::bisect})
    for (std::size_t n : {std::size_t(5), std::size_t(64), std::size_t(1000), std::size_t(4097)}) {
      // Logits on a grid of 1/64 so that x + 1024 is exact in float.
      auto x = smax_test::uniform<T>(n, -3.0, 3.0, 4000 + n);
      for (auto& v : x) v = std::round(v * 64) / 64;
      std::vector<T> shifted(x);
      for (auto& v : shifted) v += T(1024);
      std::vector<std::size_t> perm(n);
      std::iota(perm.begin(), perm.end(), std::size_t(0));
      std::shuffle(perm.begin(), perm.end(), std::mt19937_64(n));
      std::vector<T> permuted(n);
      for (std::size_t i = 0; i < n; ++i) permuted[i] = x[perm[i]];
      for (const auto& isa : smax_test::isas()) {
        smax_test::use_isa guard(isa);
        INFO(fn_name(f) << " isa " << isa << " n " << n);
        std::vector<T> y(n), ys(n), yp(n);
        run(f, x.data(), y.data(), n, T(1.75));
        run(f, shifted.data(), ys.data(), n, T(1.75));
        run(f, permuted.data(), yp.data(), n, T(1.75));
        const double alpha = f == fn::sparsemax ? 2.0 : f == fn::entmax15 ? 1.5 : 1.75;
        for (std::size_t i = 0; i < n; ++i) {
          CHECK((ys[i] > 0) == (y[i] > 0));
          CHECK(std::fabs(ys[i] - y[i]) <= model_tol(y[i], 1024 + 4, alpha));
          CHECK((yp[i] > 0) == (y[perm[i]] > 0));
          CHECK(std::fabs(yp[i] - y[perm[i]]) <= model_tol(y[perm[i]], 4, alpha));
        }
      }
    }
}

TEMPLATE_TEST_CASE("sparse family: ties split evenly", "[sparse]", float, double) {
  using T = TestType;
  for (fn f : {fn::sparsemax, fn::entmax15, fn::bisect})
    for (const auto& isa : smax_test::isas()) {
      smax_test::use_isa guard(isa);
      INFO(fn_name(f) << " isa " << isa);
      // Three tied maxima far above the rest: each gets exactly a third.
      std::vector<T> x = smax_test::uniform<T>(37, -10.0, -5.0, 5);
      for (std::size_t i : {3, 17, 30}) x[i] = T(4);
      std::vector<T> y(x.size());
      run(f, x.data(), y.data(), x.size(), T(3));
      for (std::size_t i = 0; i < x.size(); ++i)
        if (x[i] == T(4))
          CHECK(std::fabs(y[i] - T(1) / 3) <= 2 * rel_tol<T>());
        else
          CHECK(y[i] == T(0));
      // All equal: uniform output.
      std::vector<T> c(1000, T(0.125)), yc(1000);
      run(f, c.data(), yc.data(), c.size(), T(1.25));
      for (T v : yc) CHECK(std::fabs(v - T(0.001)) <= 2 * rel_tol<T>() * T(0.001));
      // Ties inside a larger support get bitwise equal outputs.
      std::vector<T> g = input<T>(3, 999, 11), yg(999);
      run(f, g.data(), yg.data(), g.size(), T(1.25));
      for (std::size_t i = 1; i < g.size(); ++i)
        for (std::size_t j : {std::size_t(0), i / 2})
          if (g[i] == g[j]) CHECK(yg[i] == yg[j]);
    }
}

TEMPLATE_TEST_CASE("entmax_bisect: alpha = 2 is sparsemax, 1.5 is entmax15, 1 is softmax", "[sparse]", float, double) {
  using T = TestType;
  for (int kind = 0; kind < n_inputs; ++kind)
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(100), std::size_t(4097), std::size_t(65537)}) {
      const auto x = input<T>(kind, n, 6000 + n);
      for (const auto& isa : smax_test::isas()) {
        smax_test::use_isa guard(isa);
        INFO("isa " << isa << " n " << n << " input " << input_name(kind));
        std::vector<T> a(n), b(n);
        for (auto pair : {std::make_pair(fn::sparsemax, T(2)), std::make_pair(fn::entmax15, T(1.5))}) {
          run(pair.first, x.data(), a.data(), n);
          smax::dynamic::entmax_bisect(x.data(), b.data(), n, pair.second);
          for (std::size_t i = 0; i < n; ++i) {
            CHECK((a[i] > 0) == (b[i] > 0));
            CHECK(std::fabs(a[i] - b[i]) <= model_tol(a[i], 8, pair.second));
          }
        }
        smax::dynamic::softmax(x.data(), a.data(), n);
        smax::dynamic::entmax_bisect(x.data(), b.data(), n, T(1));
        CHECK(smax_test::same_bits(a, b));
      }
    }
}

TEMPLATE_TEST_CASE("entmax_bisect: the result does not depend on n_iter", "[sparse]", float, double) {
  using T = TestType;
  for (T alpha : {T(1.2), T(1.5), T(3)})
    for (int kind = 0; kind < n_inputs; ++kind) {
      const std::size_t n = 2049;
      const auto x = input<T>(kind, n, 7000 + kind);
      for (const auto& isa : smax_test::isas()) {
        smax_test::use_isa guard(isa);
        std::vector<T> a(n), b(n);
        smax::dynamic::entmax_bisect(x.data(), a.data(), n, alpha, 50);
        for (int n_iter : {0, 1, 2, 5, 20, 1000}) {
          INFO("isa " << isa << " alpha " << alpha << " input " << input_name(kind) << " n_iter " << n_iter);
          smax::dynamic::entmax_bisect(x.data(), b.data(), n, alpha, n_iter);
          for (std::size_t i = 0; i < n; ++i) {
            CHECK((a[i] > 0) == (b[i] > 0));
            CHECK(std::fabs(a[i] - b[i]) <= model_tol(a[i], 8, alpha));
          }
        }
      }
    }
}

TEMPLATE_TEST_CASE("sparse family: scaling the input up tends to one-hot", "[sparse]", float, double) {
  using T = TestType;
  const std::size_t n = 1000;
  const auto x = smax_test::normal<T>(n, 1.0, 8);
  const std::size_t top = static_cast<std::size_t>(std::max_element(x.begin(), x.end()) - x.begin());
  for (fn f : {fn::sparsemax, fn::entmax15, fn::bisect})
    for (const auto& isa : smax_test::isas()) {
      smax_test::use_isa guard(isa);
      INFO(fn_name(f) << " isa " << isa);
      std::size_t last_support = n + 1;
      T last_top = 0;
      for (T scale : {T(0.1), T(1), T(10), T(100), T(1e4), T(1e8)}) {
        std::vector<T> xs(x), y(n);
        for (auto& v : xs) v *= scale;
        run(f, xs.data(), y.data(), n, T(1.25));
        const std::size_t support = static_cast<std::size_t>(std::count_if(y.begin(), y.end(), [](T v) { return v > 0; }));
        CHECK(support <= last_support);
        CHECK(y[top] >= last_top);
        last_support = support;
        last_top = y[top];
      }
      CHECK(last_support == 1);
      CHECK(last_top == T(1));
    }
}

// ---------------------------------------------------------- special values --

TEMPLATE_TEST_CASE("sparse family: special values", "[sparse]", float, double) {
  using T = TestType;
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  constexpr T big = std::numeric_limits<T>::max();
  const std::vector<std::pair<fn, T>> calls = {{fn::sparsemax, T(2)}, {fn::entmax15, T(1.5)}, {fn::bisect, T(1.5)},
                                               {fn::bisect, T(1.25)}, {fn::bisect, T(3)},   {fn::bisect, T(1)}};
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (const auto& call : calls) {
      const fn f = call.first;
      const T alpha = call.second;
      INFO(fn_name(f) << " alpha " << alpha << " isa " << isa);
      for (std::size_t n : {std::size_t(1), std::size_t(5), std::size_t(33), std::size_t(1000)}) {
        INFO("n " << n);
        const auto base = smax_test::normal<T>(n, 1.0, 9000 + n);
        std::vector<T> y(n);
        for (std::size_t pos : {std::size_t(0), n / 2, n - 1}) {
          // Any NaN: every output NaN.
          auto x = base;
          x[pos] = nan;
          run(f, x.data(), y.data(), n, alpha);
          CHECK(std::all_of(y.begin(), y.end(), [](T v) { return v != v; }));
          // +inf entries share the mass; a -inf among them changes nothing.
          x = base;
          x[pos] = inf;
          x[(pos + 2) % n] = -inf;
          x[(pos + 3) % n] = inf;
          run(f, x.data(), y.data(), n, alpha);
          const T share = T(1) / static_cast<T>(std::count(x.begin(), x.end(), inf));
          for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == (x[i] == inf ? share : T(0)));
        }
        // -inf entries are masked: the rest is the function of the finite ones.
        if (n > 2) {
          auto x = base;
          for (std::size_t i = 0; i < n; i += 3) x[i] = -inf;
          run(f, x.data(), y.data(), n, alpha);
          const reference r = f == fn::sparsemax ? ref_sparsemax(x)
                              : f == fn::entmax15 ? ref_entmax15(x)
                              : alpha == T(1)     ? reference{}
                                                  : ref_entmax(x, alpha);
          if (alpha != T(1)) SMAX_CHECK_VERDICT(judge(x, y, r), T);
          for (std::size_t i = 0; i < n; i += 3) CHECK(y[i] == T(0));
        }
        // All -inf: all 0.
        std::vector<T> x(n, -inf);
        run(f, x.data(), y.data(), n, alpha);
        CHECK(std::all_of(y.begin(), y.end(), [](T v) { return v == T(0); }));
      }
      // Huge finite values never overflow: (alpha - 1) x and sums would.
      for (const std::vector<T>& x :
           {std::vector<T>{big, big, -big, T(0), big / 2}, std::vector<T>{-big, -big, -big},
            std::vector<T>{big, std::nextafter(big, T(0)), T(1e30), -big, T(-1e30)},
            std::vector<T>{T(1e30), T(1e30) - T(1e23), T(-1e30), T(3)}}) {
        std::vector<T> y(x.size());
        run(f, x.data(), y.data(), x.size(), alpha);
        double s = 0;
        for (T v : y) {
          CHECK(std::isfinite(v));
          s += v;
        }
        CHECK(std::fabs(s - 1) <= sum_tol<T>());
        if (alpha != T(1)) SMAX_CHECK_VERDICT(judge(x, y, ref_entmax(x, static_cast<ld>(alpha))), T);
      }
    }
  }
}

TEST_CASE("sparse family: bad arguments throw std::invalid_argument", "[sparse]") {
  std::vector<float> x(8, 1.0f), y(8);
  std::vector<double> xd(8, 1.0), yd(8);
  const auto throws_naming = [](auto call, const std::string& what) {
    try {
      call();
      FAIL("no exception");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(what) != std::string::npos);
    }
  };
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (double alpha : {0.999, 0.5, -1.0, std::numeric_limits<double>::quiet_NaN(),
                         std::numeric_limits<double>::infinity()}) {
      INFO("isa " << isa << " alpha " << alpha);
      throws_naming([&] { smax::dynamic::entmax_bisect(x.data(), y.data(), 8, static_cast<float>(alpha)); }, "alpha");
      throws_naming([&] { smax::dynamic::entmax_bisect(xd.data(), yd.data(), 8, alpha); }, "alpha");
      throws_naming([&] { smax::dynamic::entmax_backward(y.data(), x.data(), y.data(), 8, static_cast<float>(alpha)); },
                    "alpha");
      throws_naming([&] { smax::dynamic::entmax_backward(yd.data(), xd.data(), yd.data(), 8, alpha); }, "alpha");
      // The header-only API validates the same way (even for n = 0).
      throws_naming([&] { smax::entmax_bisect(x.data(), y.data(), 0, alpha); }, "alpha");
    }
    throws_naming([&] { smax::dynamic::entmax_bisect(x.data(), y.data(), 8, 1.5f, -1); }, "n_iter");
    throws_naming([&] { smax::entmax_bisect(xd.data(), yd.data(), 8, 1.5, -5); }, "n_iter");
  }
  // Scalar parameters do not take part in deduction: a double alpha with
  // float arrays compiles.
  smax::entmax_bisect(x.data(), y.data(), 8, 1.5);
  smax::entmax_backward(y.data(), x.data(), y.data(), 8, 1.5);
}

// --------------------------------------------------------------- backward --

namespace {

// Long-double VJP from y: g = y^(2 - alpha) on the support,
// dx = g (dy - q), q = sum g dy / sum g. `allowed` is the rounding model of a
// T kernel: a few ulp of g (|dy| + |q| + sum |g dy| / sum g), the last being
// the error of q, with g's own error growing like |ln y| |2 - alpha| ulp
// (g = exp((2 - alpha) ln y)).
template <class T>
std::vector<ld> ref_backward(const std::vector<T>& y, const std::vector<T>& dy, ld alpha, std::vector<ld>& allowed) {
  ld sg = 0, sgd = 0, sagd = 0;
  std::vector<ld> g(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) {
    g[i] = y[i] > 0 ? std::pow(static_cast<ld>(y[i]), 2 - alpha) : 0;
    sg += g[i];
    sgd += g[i] * dy[i];
    sagd += std::fabs(g[i] * dy[i]);
  }
  const ld q = sgd / sg;
  const ld ulp = sizeof(T) == 4 ? std::ldexp(ld(1), -24) : std::ldexp(ld(1), -53);
  std::vector<ld> dx(y.size());
  allowed.assign(y.size(), 0);
  for (std::size_t i = 0; i < y.size(); ++i) {
    dx[i] = g[i] * (dy[i] - q);
    if (y[i] > 0) {
      const ld lg = std::fabs(std::log(static_cast<ld>(y[i])) * (2 - alpha));
      allowed[i] = 16 * ulp * g[i] * ((std::fabs(static_cast<ld>(dy[i])) + std::fabs(q)) * (1 + lg) + sagd / sg);
    }
  }
  return dx;
}

template <class T>
void backward(const std::vector<T>& y, const std::vector<T>& dy, std::vector<T>& dx, T alpha, bool sparsemax_api) {
  if (sparsemax_api)
    smax::dynamic::sparsemax_backward(y.data(), dy.data(), dx.data(), y.size());
  else
    smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), y.size(), alpha);
}

}  // namespace

TEMPLATE_TEST_CASE("sparse backward matches the analytic formula", "[sparse][backward]", float, double) {
  using T = TestType;
  for (T alpha : {T(1), T(1.25), T(1.5), T(2), T(3)})
    for (int kind = 0; kind < n_inputs; ++kind)
      for (std::size_t n : smax_test::sizes_up_to_max()) {
        if (n == 0 || (smax_test::sanitized && n > 32768)) continue;  // (ASan: -O0, 10-50x slower)
        const auto x = input<T>(kind, n, 10000 + n);
        const auto dy = smax_test::normal<T>(n, 1.0, 11000 + n);
        for (const auto& isa : smax_test::isas()) {
          smax_test::use_isa guard(isa);
          std::vector<T> y(n), dx(n);
          smax::dynamic::entmax_bisect(x.data(), y.data(), n, alpha);
          std::vector<ld> allowed;
          const auto ref = ref_backward(y, dy, static_cast<ld>(alpha), allowed);
          for (bool sparse_api : {false, true}) {
            if (sparse_api && alpha != T(2)) continue;
            INFO("isa " << isa << " alpha " << alpha << " n " << n << " input " << input_name(kind)
                        << (sparse_api ? " sparsemax_backward" : " entmax_backward"));
            backward(y, dy, dx, alpha, sparse_api);
            std::size_t bad = 0;
            for (std::size_t i = 0; i < n; ++i) {
              if (y[i] == 0 && dx[i] != 0) ++bad;
              if (!(std::fabs(dx[i] - ref[i]) <= allowed[i])) ++bad;
            }
            CHECK(bad == 0);
            // In place (dx = dy) gives the same bits.
            std::vector<T> inplace(dy);
            if (sparse_api)
              smax::dynamic::sparsemax_backward(y.data(), inplace.data(), inplace.data(), n);
            else
              smax::dynamic::entmax_backward(y.data(), inplace.data(), inplace.data(), n, alpha);
            CHECK(smax_test::same_bits(inplace, dx));
          }
        }
      }
}

// sparsemax_backward sums dy 2^64 (sparse.hpp, support_mean); gradients
// beyond 2^64 (here 1e30) overflow that sum and take its exact path (float
// on x86: double lanes), which must give the mean all the same.
TEST_CASE("sparsemax_backward: gradients whose sum times 2^64 overflows, every ISA", "[sparse][backward]") {
  for (std::size_t n : {std::size_t(5), std::size_t(37), std::size_t(300)})
    for (const auto& isa : smax_test::isas()) {
      smax_test::use_isa guard(isa);
      INFO("isa " << isa << " n " << n);
      const std::size_t support = 2 * n / 3 + 1;
      std::vector<float> y(n, 0.0f), dy(n), dx(n);
      long double sum = 0, largest = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (i < support) y[i] = 1.0f / static_cast<float>(support);
        dy[i] = (i % 3 == 2 ? -1e30f : 1e30f) * (1.0f - static_cast<float>(i) / 1000.0f);
        if (i == 1) dy[i] = std::ldexp(1.0f, -120);  // a tiny one beside them
        if (i < support) sum += dy[i];
        largest = std::max(largest, std::fabs(static_cast<long double>(dy[i])));
      }
      const long double mean = sum / static_cast<long double>(support);
      smax::dynamic::sparsemax_backward(y.data(), dy.data(), dx.data(), n);
      const long double tol = 4 * std::numeric_limits<float>::epsilon() * largest;
      for (std::size_t i = 0; i < n; ++i) {
        const long double want = i < support ? static_cast<long double>(dy[i]) - mean : 0.0L;
        CHECK(std::fabs(static_cast<long double>(dx[i]) - want) <= tol);
      }
    }
}

// Rows holding a nonzero |dy| below 2^-60 (double 2^-500) take the scaled
// form (dy 2^K, the products kept where normal, the result scaled back):
// every dy tiny, then a third of them tiny or 0 beside ordinary ones; each
// dx against the long-double VJP within ref_backward's rounding model (or
// two smallest normals: outputs below the normal range may be 0), no
// subnormal output, in place the same bits (the scratch path of a general
// power against the plain one), and NaN in dy still NaN on the support.
template <class T>
void entmax_tiny_dy_rows() {
  constexpr T tiny = std::numeric_limits<T>::min();
  const int deep = sizeof(T) == 4 ? -80 : -700;  // outputs above 1e-30
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (T alpha : {T(1.25), T(1.5), T(2)})
      for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(70), std::size_t(4100)}) {
        INFO(isa << " alpha " << alpha << " n " << n << (sizeof(T) == 4 ? " float" : " double"));
        const auto x = smax_test::normal<T>(n, 3.0, 23 * n);
        std::vector<T> y(n), dy = smax_test::normal<T>(n, 1.0, 29 * n);
        smax::dynamic::entmax_bisect(x.data(), y.data(), n, alpha);
        std::vector<T> deep_dy(dy), mixed(dy);
        for (T& v : deep_dy) v = std::ldexp(v, deep);
        for (std::size_t i = 0; i < n; i += 3) mixed[i] = i % 2 ? T(0) : std::ldexp(mixed[i], sizeof(T) == 4 ? -100 : -1000);
        for (const auto* d : {&deep_dy, &mixed}) {
          std::vector<ld> allowed;
          const auto ref = ref_backward(y, *d, static_cast<ld>(alpha), allowed);
          std::vector<T> dx(n, T(-7));
          smax::dynamic::entmax_backward(y.data(), d->data(), dx.data(), n, alpha);
          std::size_t bad = 0, sub = 0;
          for (std::size_t i = 0; i < n; ++i) {
            bad += !(std::fabs(static_cast<ld>(dx[i]) - ref[i]) <= allowed[i] + ld(2) * tiny);
            sub += dx[i] != T(0) && std::fabs(dx[i]) < tiny;
          }
          CHECK(bad == 0);
          CHECK(sub == 0);
          std::vector<T> inplace(*d);
          smax::dynamic::entmax_backward(y.data(), inplace.data(), inplace.data(), n, alpha);
          CHECK(smax_test::same_bits(inplace, dx));
        }
        // (at the largest y: in the support)
        deep_dy[static_cast<std::size_t>(std::max_element(y.begin(), y.end()) - y.begin())] =
            std::numeric_limits<T>::quiet_NaN();
        std::vector<T> dx(n);
        smax::dynamic::entmax_backward(y.data(), deep_dy.data(), dx.data(), n, alpha);
        for (std::size_t i = 0; i < n; ++i) CHECK((y[i] > 0 ? std::isnan(dx[i]) : dx[i] == 0));
      }
  }
}
TEST_CASE("entmax_backward on rows with a tiny dy (the scaled form)", "[sparse][backward][accuracy]") {
  entmax_tiny_dy_rows<float>();
  entmax_tiny_dy_rows<double>();
}

TEST_CASE("sparse backward matches finite differences of the forward (double)", "[sparse][backward]") {
  for (double alpha : {1.25, 1.5, 2.0, 3.0})
    for (std::size_t n : {std::size_t(2), std::size_t(17), std::size_t(40)})
      for (const auto& isa : smax_test::isas()) {
        smax_test::use_isa guard(isa);
        INFO("isa " << isa << " alpha " << alpha << " n " << n);
        const auto x = smax_test::normal<double>(n, 0.5, 12000 + n);
        const auto dy = smax_test::normal<double>(n, 1.0, 13000 + n);
        std::vector<double> y(n), dx(n), yp(n), ym(n), xp(x), xm(x);
        smax::dynamic::entmax_bisect(x.data(), y.data(), n, alpha);
        if (alpha == 2.0)
          smax::dynamic::sparsemax_backward(y.data(), dy.data(), dx.data(), n);
        else
          smax::dynamic::entmax_backward(y.data(), dy.data(), dx.data(), n, alpha);
        // dx_j = (J^T dy)_j = <dy, d y / d x_j>, by central differences.
        const double h = 1e-6;
        for (std::size_t j = 0; j < n; ++j) {
          xp = x;
          xm = x;
          xp[j] += h;
          xm[j] -= h;
          smax::dynamic::entmax_bisect(xp.data(), yp.data(), n, alpha);
          smax::dynamic::entmax_bisect(xm.data(), ym.data(), n, alpha);
          double fd = 0;
          for (std::size_t i = 0; i < n; ++i) fd += dy[i] * (yp[i] - ym[i]) / (2 * h);
          CHECK(std::fabs(fd - dx[j]) <= 1e-6 * (1 + std::fabs(dx[j])));
        }
      }
}

// Prints the worst relative errors per function, type and ISA (run with
// `smax_tests "[.report]" -s` to see them; it checks nothing new).
TEST_CASE("sparse family: worst relative error report", "[.report]") {
  const std::size_t n = std::min<std::size_t>(smax_test::max_n(), std::size_t(1) << 20);
  for (int kind = 0; kind < n_inputs; ++kind) {
    const auto xf = input<float>(kind, n, 77);
    const std::vector<double> xd(xf.begin(), xf.end());
    for (fn f : {fn::sparsemax, fn::entmax15, fn::bisect}) {
      const reference rf = f == fn::bisect ? ref_entmax15(xf) : ref_of(f, xf, 0);
      const reference rd = f == fn::bisect ? ref_entmax15(xd) : ref_of(f, xd, 0);
      for (const auto& isa : smax_test::isas()) {
        smax_test::use_isa guard(isa);
        std::vector<float> yf(n);
        std::vector<double> yd(n);
        run(f, xf.data(), yf.data(), n, 1.5f);
        run(f, xd.data(), yd.data(), n, 1.5);
        const verdict vf = judge(xf, yf, rf), vd = judge(xd, yd, rd);
        std::printf("%-14s %-15s n %zu %-7s float worst %.3g sum %.2g | double worst %.3g sum %.2g\n", fn_name(f),
                    input_name(kind), n, isa.c_str(), vf.worst, vf.sum_err, vd.worst, vd.sum_err);
      }
    }
  }
}
