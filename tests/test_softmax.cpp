// softmax and log_softmax through smax::dynamic, on every ISA the CPU has
// (smax_test::isas(); under QEMU: neon), every algorithm, float and double:
// accuracy against long double, sizes around every vector width and unroll
// up to 16M, misaligned and in-place calls, guard regions, n = 0, and every
// special-value rule of the library (smax.hpp, DESIGN.md).
//
// The accuracy tests print the worst error they measured per ISA, algorithm
// and n (run `smax_tests "[accuracy]"` to see the table).
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common.hpp"

namespace {

using smax::algorithm;
using smax_test::algorithm_name;
using ld = long double;

// Per-type bounds. float: the contract (DESIGN.md "Accuracy"), tested flat,
// i.e. without the |x_i - m| * 2^-24 allowance, which the kernels do not need.
// double: the contract names no figure; 2e-14 is about 100 ulp, far above
// what the kernels reach (the measured figure is printed) yet far below any
// float-precision slip.
template <class T>
struct bound;
template <>
struct bound<float> {
  static constexpr double rel = 1e-6;
  static constexpr double sum = 1e-6;
  static constexpr ld floor = 1e-30L;  // outputs above this are checked relatively
  static constexpr double wide = 80;   // uniform [-wide, 0]: outputs down to e^-80
  static constexpr float limit = 4096;  // split_limit: two_pass/online fall back beyond
  static constexpr const char* name = "float";
};
template <>
struct bound<double> {
  static constexpr double rel = 2e-14;
  static constexpr double sum = 2e-14;
  static constexpr ld floor = 1e-300L;
  static constexpr double wide = 690;
  static constexpr double limit = 1048576;
  static constexpr const char* name = "double";
};

template <class T>
void softmax_call(const std::vector<T>& x, std::vector<T>& y, algorithm a) {
  y.assign(x.size(), T(-1));
  smax::dynamic::softmax(x.data(), y.data(), x.size(), a);
}

// Errors of a softmax output against the long-double reference: the worst
// relative error over outputs above the floor, and |sum - 1|. Outputs whose
// reference is at or below the floor must still lie in [0, ref * (1 + rel)]
// or be flushed to 0, never garbage. NaN counts as an infinite error.
struct errors {
  double rel = 0;
  double sum = 0;
  bool small_ok = true;
};

template <class T>
errors softmax_errors(const std::vector<T>& y, const std::vector<ld>& ref) {
  errors e;
  ld s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    s += y[i];
    if (ref[i] > bound<T>::floor) {
      double r = static_cast<double>(std::fabs((y[i] - ref[i]) / ref[i]));
      if (r != r) r = std::numeric_limits<double>::infinity();
      if (r > e.rel) e.rel = r;
    } else if (!(y[i] >= 0 && y[i] <= ref[i] * (1 + bound<T>::rel) + std::numeric_limits<T>::min())) {
      e.small_ok = false;
    }
  }
  e.sum = static_cast<double>(std::fabs(s - 1));
  if (e.sum != e.sum) e.sum = std::numeric_limits<double>::infinity();
  return e;
}

// Long-double softmax reference (one exp per element; -inf entries give 0).
template <class T>
std::vector<ld> reference(const std::vector<T>& x) {
  ld m = -std::numeric_limits<ld>::infinity();
  for (T v : x) m = std::max<ld>(m, v);
  std::vector<ld> y(x.size());
  ld s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += (y[i] = std::exp(static_cast<ld>(x[i]) - m));
  for (auto& v : y) v /= s;
  return y;
}

// Worst |y - ref| / max(1, |ref|) of a log_softmax output (NaN: infinite).
template <class T>
double log_error(const std::vector<T>& y, const std::vector<ld>& ref) {
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    double r = static_cast<double>(std::fabs(y[i] - ref[i]) / std::max<ld>(1, std::fabs(ref[i])));
    if (r != r) r = std::numeric_limits<double>::infinity();
    worst = std::max(worst, r);
  }
  return worst;
}

// Worst measured error per (type, isa, algorithm), with the n where it
// occurred, printed at the end of a test case.
class worst_table {
 public:
  explicit worst_table(std::string title) : title_(std::move(title)) {}
  void add(const std::string& key, double err, std::size_t n) {
    auto& w = rows_[key];
    if (err >= w.first) w = {err, n};
  }
  ~worst_table() {
    std::printf("%s\n", title_.c_str());
    for (const auto& r : rows_) std::printf("  %-44s %.3g (n = %zu)\n", r.first.c_str(), r.second.first, r.second.second);
    std::fflush(stdout);
  }

 private:
  std::string title_;
  std::map<std::string, std::pair<double, std::size_t>> rows_;
};

template <class T>
std::string key(const std::string& isa, algorithm a) {
  return std::string(bound<T>::name) + " " + isa + " " + algorithm_name(a);
}

// Inputs of the accuracy sweep: typical logits, a wide range whose outputs
// span 35 (float) / 300 (double) decades, and offsets that make a naive
// e^x overflow (+1000) or underflow to 0/0 (-1000).
template <class T>
std::vector<std::pair<std::string, std::vector<T>>> accuracy_inputs(std::size_t n) {
  return {{"normal(0, 5)", smax_test::normal<T>(n, 5.0, n)},
          {"uniform(-wide, 0)", smax_test::uniform<T>(n, -bound<T>::wide, 0, n + 1)},
          {"normal(1000, 5)", smax_test::normal<T>(n, 5.0, n + 2, 1000.0)},
          {"normal(-1000, 5)", smax_test::normal<T>(n, 5.0, n + 3, -1000.0)}};
}

}  // namespace

TEMPLATE_TEST_CASE("softmax: accuracy against long double, every ISA, algorithm and size", "[softmax][accuracy]",
                   float, double) {
  using T = TestType;
  worst_table table(std::string("worst softmax relative error, ") + bound<T>::name + ", n <= 65537, 4 input kinds:");
  worst_table sums(std::string("worst |sum - 1|, ") + bound<T>::name + ":");
  for (std::size_t n : smax_test::sizes_up_to_max()) {
    for (const auto& input : accuracy_inputs<T>(n)) {
      const auto& x = input.second;
      const auto ref = reference(x);
      for (const auto& isa : smax_test::isas()) {
        smax_test::use_isa guard(isa);
        for (algorithm a : smax_test::algorithms()) {
          std::vector<T> y;
          softmax_call(x, y, a);
          const errors e = softmax_errors(y, ref);
          INFO(bound<T>::name << " isa " << isa << " " << algorithm_name(a) << " n " << n << " input "
                              << input.first);
          CHECK(e.rel <= bound<T>::rel);
          CHECK(e.small_ok);
          if (n > 0) CHECK(e.sum <= bound<T>::sum);
          table.add(key<T>(isa, a), e.rel, n);
          if (n > 0) sums.add(key<T>(isa, a), e.sum, n);
        }
      }
    }
  }
}

// Large n: the summation error must not grow with n. float up to 16M (the
// contract), double up to 4M; both capped by smax_test::max_n() (QEMU and
// sanitizer builds use less, see tests/CMakeLists.txt).
TEMPLATE_TEST_CASE("softmax and log_softmax: accuracy at large n", "[softmax][log_softmax][accuracy][large]", float,
                   double) {
  using T = TestType;
  worst_table table(std::string("softmax at large n, ") + bound<T>::name + ", uniform(-40, 10): worst relative error");
  worst_table sums(std::string("softmax at large n, ") + bound<T>::name + ": |sum - 1|");
  worst_table logs(std::string("log_softmax at large n, ") + bound<T>::name + ": worst |error| / max(1, |y|)");
  const std::size_t top = std::is_same<T, float>::value ? std::size_t(1) << 24 : std::size_t(1) << 22;
  std::vector<std::size_t> ns;
  for (std::size_t n : {std::size_t(1) << 18, (std::size_t(1) << 20) + 3, top + 5})
    if (n <= smax_test::max_n() + 5) ns.push_back(n);
  if (ns.empty() || ns.back() < top) WARN("large-n sizes capped at " << smax_test::max_n() << " (SMAX_TEST_MAX_N)");
  for (std::size_t n : ns) {
    const auto x = smax_test::uniform<T>(n, -40, 10, n);
    const auto ref = reference(x);
    for (const auto& isa : smax_test::isas()) {
      smax_test::use_isa guard(isa);
      std::vector<T> y;
      for (algorithm a : smax_test::algorithms()) {
        softmax_call(x, y, a);
        const errors e = softmax_errors(y, ref);
        INFO(bound<T>::name << " isa " << isa << " " << algorithm_name(a) << " n " << n);
        CHECK(e.rel <= bound<T>::rel);
        CHECK(e.small_ok);
        CHECK(e.sum <= bound<T>::sum);
        table.add(key<T>(isa, a) + " n=" + std::to_string(n), e.rel, n);
        sums.add(key<T>(isa, a) + " n=" + std::to_string(n), e.sum, n);
      }
      smax::dynamic::log_softmax(x.data(), y.data(), n);
      std::vector<ld> lref(n);
      for (std::size_t i = 0; i < n; ++i) lref[i] = std::log(ref[i]);
      const double le = log_error(y, lref);
      INFO(bound<T>::name << " isa " << isa << " log_softmax n " << n);
      CHECK(le <= bound<T>::rel);
      logs.add(std::string(bound<T>::name) + " " + isa + " n=" + std::to_string(n), le, n);
    }
  }
}

TEMPLATE_TEST_CASE("log_softmax: accuracy, and consistency with log(softmax)", "[log_softmax][accuracy]", float,
                   double) {
  using T = TestType;
  worst_table table(std::string("worst log_softmax |error| / max(1, |y|), ") + bound<T>::name + ", n <= 65537:");
  for (std::size_t n : smax_test::sizes_up_to_max()) {
    for (const auto& input : accuracy_inputs<T>(n)) {
      const auto& x = input.second;
      const auto ref = smax_test::ref_log_softmax(x);
      for (const auto& isa : smax_test::isas()) {
        smax_test::use_isa guard(isa);
        std::vector<T> y(n), p(n);
        smax::dynamic::log_softmax(x.data(), y.data(), n);
        INFO(bound<T>::name << " isa " << isa << " n " << n << " input " << input.first);
        const double e = log_error(y, ref);
        CHECK(e <= bound<T>::rel);
        table.add(std::string(bound<T>::name) + " " + isa, e, n);
        // log_softmax = log(softmax) wherever softmax is not negligible: each
        // side within the bound of the exact value.
        for (algorithm a : smax_test::algorithms()) {
          smax::dynamic::softmax(x.data(), p.data(), n, a);
          double worst = 0;
          for (std::size_t i = 0; i < n; ++i)
            if (p[i] > bound<T>::floor) {
              const double d = std::fabs(static_cast<double>(y[i]) - std::log(static_cast<double>(p[i]))) /
                               std::max(1.0, std::fabs(static_cast<double>(y[i])));
              worst = std::max(worst, d == d ? d : std::numeric_limits<double>::infinity());
            }
          INFO(algorithm_name(a));
          CHECK(worst <= 2 * bound<T>::rel);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("softmax and log_softmax: misaligned, in place, nothing written outside y", "[softmax][log_softmax][memory]",
                   float, double) {
  using T = TestType;
  // x's guards are NaN: a kernel that read past x[n - 1] (or before x[0]) and
  // let the value into a sum or max would turn every output into NaN. y's
  // guards are a sentinel that must survive.
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T sentinel = T(-7.25);
  for (std::size_t n : smax_test::sizes_up_to_max()) {
    if (n > 4097) continue;
    const auto x0 = smax_test::normal<T>(n, 4.0, 1000 + n);
    const auto ref = reference(x0);
    const auto lref = smax_test::ref_log_softmax(x0);
    for (const auto& isa : smax_test::isas()) {
      smax_test::use_isa guard(isa);
      for (auto offsets : {std::pair<std::size_t, std::size_t>{0, 0}, {1, 1}, {1, 0}, {0, 1}}) {
        smax_test::guarded<T> x(n, offsets.first, nan);
        x.assign(x0);
        INFO(bound<T>::name << " isa " << isa << " n " << n << " x offset " << offsets.first << " y offset "
                            << offsets.second);
        for (algorithm a : smax_test::algorithms()) {
          INFO(algorithm_name(a));
          smax_test::guarded<T> y(n, offsets.second, sentinel);
          smax::dynamic::softmax(x.data(), y.data(), n, a);
          CHECK(y.intact());
          CHECK(x.intact());
          CHECK(x.values() == x0);
          const auto out = y.values();
          CHECK(softmax_errors(out, ref).rel <= bound<T>::rel);
          // In place (x == y): the same result, bit for bit.
          smax_test::guarded<T> z(n, offsets.first, sentinel);
          z.assign(x0);
          smax::dynamic::softmax(z.data(), z.data(), n, a);
          CHECK(z.intact());
          CHECK(smax_test::same_bits(z.values(), out));
        }
        smax_test::guarded<T> y(n, offsets.second, sentinel);
        smax::dynamic::log_softmax(x.data(), y.data(), n);
        CHECK(y.intact());
        const auto out = y.values();
        CHECK(log_error(out, lref) <= bound<T>::rel);
        smax_test::guarded<T> z(n, offsets.first, sentinel);
        z.assign(x0);
        smax::dynamic::log_softmax(z.data(), z.data(), n);
        CHECK(z.intact());
        CHECK(smax_test::same_bits(z.values(), out));
      }
    }
  }
}

TEMPLATE_TEST_CASE("softmax and log_softmax: n = 0 touches nothing, null pointers allowed", "[softmax][log_softmax]",
                   float, double) {
  using T = TestType;
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO(bound<T>::name << " isa " << isa);
    for (algorithm a : smax_test::algorithms()) {
      smax::dynamic::softmax(static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0, a);
      smax_test::guarded<T> x(0, 1, T(1)), y(0, 1, T(3));
      smax::dynamic::softmax(x.data(), y.data(), 0, a);
      CHECK(y.intact());
    }
    smax::dynamic::log_softmax(static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0);
    smax_test::guarded<T> x(0, 1, T(1)), y(0, 1, T(3));
    smax::dynamic::log_softmax(x.data(), y.data(), 0);
    CHECK(y.intact());
  }
}

namespace {

// Sizes for the special-value rules: every tail length of every ISA's vector
// and unroll, and a few blocks.
// log_softmax's two-pass form (AVX-512: from 16 KiB; AVX2: from 1 MiB;
// 4-lane ISAs: never) at tails 1 and 15 of a float vector (4097, 4111) and,
// on x86, past 1 MiB of float (262147).
const std::vector<std::size_t>& special_sizes() {
  static const std::vector<std::size_t> s = {1,  2,  3,  4,  5,  7,  8,   9,   15,  16,  17,  31,
                                             32, 33, 63, 64, 65, 127, 129, 255, 257, 1000, 4097, 4111,
#if defined(__x86_64__) || defined(__i386__)
                                             262147
#endif
  };
  return s;
}

// Positions to plant a special value: first, last, middle, and the first
// element of the tail after the unrolled body.
std::vector<std::size_t> positions(std::size_t n) {
  std::vector<std::size_t> p = {0, n - 1, n / 2, (n / 64) * 64};
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  if (p.back() >= n) p.pop_back();
  return p;
}

// Runs softmax (every algorithm) and log_softmax on x with the current ISA
// and hands each result to check(y, is_log).
template <class T, class F>
void for_each_kernel(const std::vector<T>& x, F&& check) {
  std::vector<T> y(x.size());
  for (algorithm a : smax_test::algorithms()) {
    INFO("softmax " << algorithm_name(a));
    smax::dynamic::softmax(x.data(), y.data(), x.size(), a);
    check(y, false);
  }
  INFO("log_softmax");
  smax::dynamic::log_softmax(x.data(), y.data(), x.size());
  check(y, true);
}

template <class T>
bool all_nan(const std::vector<T>& y) {
  return std::all_of(y.begin(), y.end(), [](T v) { return v != v; });
}

}  // namespace

TEMPLATE_TEST_CASE("special values: any NaN makes every output NaN", "[softmax][log_softmax][special]", float, double) {
  using T = TestType;
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : special_sizes())
      for (std::size_t p : positions(n)) {
        INFO(bound<T>::name << " isa " << isa << " n " << n << " NaN at " << p);
        auto x = smax_test::normal<T>(n, 3.0, n);
        x[p] = nan;
        for_each_kernel(x, [](const std::vector<T>& y, bool) { CHECK(all_nan(y)); });
        // NaN beside +inf, beside -inf, among all -inf, among huge values,
        // and with a max beyond the single-pass limits.
        const std::size_t q = (p + n / 3 + 1) % n;
        if (q != p) {
          auto xi = x;
          xi[q] = inf;
          for_each_kernel(xi, [](const std::vector<T>& y, bool) { CHECK(all_nan(y)); });
          xi[q] = -inf;
          for_each_kernel(xi, [](const std::vector<T>& y, bool) { CHECK(all_nan(y)); });
          xi[q] = std::numeric_limits<T>::max();
          for_each_kernel(xi, [](const std::vector<T>& y, bool) { CHECK(all_nan(y)); });
          xi[q] = T(2) * bound<T>::limit;
          for_each_kernel(xi, [](const std::vector<T>& y, bool) { CHECK(all_nan(y)); });
        }
        std::vector<T> xn(n, -inf);
        xn[p] = nan;
        for_each_kernel(xn, [](const std::vector<T>& y, bool) { CHECK(all_nan(y)); });
        std::vector<T> xall(n, nan);
        for_each_kernel(xall, [](const std::vector<T>& y, bool) { CHECK(all_nan(y)); });
      }
  }
}

TEMPLATE_TEST_CASE("special values: +inf entries share the mass equally, the rest get 0", "[softmax][log_softmax][special]",
                   float, double) {
  using T = TestType;
  const T inf = std::numeric_limits<T>::infinity();
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : special_sizes())
      for (std::size_t k = 1; k <= std::min<std::size_t>(n, 3); ++k) {
        // k entries +inf, spread over the array; some -inf and huge values
        // among the rest.
        auto x = smax_test::normal<T>(n, 3.0, n + k);
        std::vector<bool> is_inf(n, false);
        for (std::size_t j = 0; j < k; ++j) is_inf[(n - 1) - j * (n / k)] = true;
        for (std::size_t i = 0; i < n; ++i) {
          if (is_inf[i]) x[i] = inf;
          else if (i % 5 == 1) x[i] = -inf;
          else if (i % 7 == 2) x[i] = std::numeric_limits<T>::max();
        }
        INFO(bound<T>::name << " isa " << isa << " n " << n << " +inf count " << k);
        for_each_kernel(x, [&](const std::vector<T>& y, bool log) {
          const T share = log ? static_cast<T>(-std::log(static_cast<double>(k))) : static_cast<T>(1.0 / k);
          const T rest = log ? -inf : T(0);
          std::size_t bad = 0;
          for (std::size_t i = 0; i < n; ++i) bad += (y[i] != (is_inf[i] ? share : rest));
          CHECK(bad == 0);
        });
      }
    // All +inf.
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(64), std::size_t(1000)}) {
      INFO(bound<T>::name << " isa " << isa << " all +inf, n " << n);
      for_each_kernel(std::vector<T>(n, inf), [&](const std::vector<T>& y, bool log) {
        const T share = log ? static_cast<T>(-std::log(static_cast<double>(n))) : static_cast<T>(1.0 / n);
        CHECK(std::all_of(y.begin(), y.end(), [&](T v) { return v == share; }));
      });
    }
  }
}

TEMPLATE_TEST_CASE("special values: -inf entries are masked, all -inf gives 0 (log_softmax -inf)",
                   "[softmax][log_softmax][special]", float, double) {
  using T = TestType;
  const T inf = std::numeric_limits<T>::infinity();
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : special_sizes()) {
      INFO(bound<T>::name << " isa " << isa << " n " << n);
      for_each_kernel(std::vector<T>(n, -inf), [&](const std::vector<T>& y, bool log) {
        CHECK(std::all_of(y.begin(), y.end(), [&](T v) { return v == (log ? -inf : T(0)); }));
      });
      if (n < 2) continue;
      // Masked entries at several densities, the first, the last; the
      // survivors must match the softmax of the finite entries alone.
      for (std::size_t stride : {std::size_t(2), std::size_t(3), n}) {
        for (std::size_t first : {std::size_t(0), n - 1}) {
          auto x = smax_test::normal<T>(n, 3.0, n + stride);
          for (std::size_t i = first % stride; i < n; i += stride) x[i] = -inf;
          x[first] = -inf;
          if (std::all_of(x.begin(), x.end(), [&](T v) { return v == -inf; })) continue;
          const auto ref = reference(x);
          const auto lref = smax_test::ref_log_softmax(x);
          INFO("-inf every " << stride << " from " << first % stride << " and at " << first);
          for_each_kernel(x, [&](const std::vector<T>& y, bool log) {
            std::size_t bad = 0;
            for (std::size_t i = 0; i < n; ++i)
              if (x[i] == -inf) bad += (y[i] != (log ? -inf : T(0)));
            CHECK(bad == 0);
            if (log) {
              std::vector<T> yf;
              std::vector<ld> rf;
              for (std::size_t i = 0; i < n; ++i)
                if (x[i] != -inf) {
                  yf.push_back(y[i]);
                  rf.push_back(lref[i]);
                }
              CHECK(log_error(yf, rf) <= bound<T>::rel);
            } else {
              const errors e = softmax_errors(y, ref);
              CHECK(e.rel <= bound<T>::rel);
              CHECK(e.sum <= bound<T>::sum);
            }
          });
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("special values: huge finite inputs never overflow to inf or NaN", "[softmax][log_softmax][special]",
                   float, double) {
  using T = TestType;
  const T big = std::numeric_limits<T>::max();
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : special_sizes()) {
      std::vector<std::pair<std::string, std::vector<T>>> cases;
      cases.push_back({"all max", std::vector<T>(n, big)});
      cases.push_back({"all lowest", std::vector<T>(n, -big)});
      auto spread = smax_test::uniform<T>(n, -1, 1, n);
      for (auto& v : spread) v *= big;
      cases.push_back({"uniform(-max, max)", spread});
      auto mixed = smax_test::normal<T>(n, 3.0, n);
      for (std::size_t i = 0; i < n; i += 3) mixed[i] = (i % 2) ? -big : big;
      cases.push_back({"max, lowest and normal(0, 3)", mixed});
      auto neighbours = std::vector<T>(n, big);
      for (std::size_t i = 1; i < n; i += 2) neighbours[i] = std::nextafter(big, T(0));
      cases.push_back({"max and its neighbour", neighbours});
      auto lowest_max = smax_test::normal<T>(n, 3.0, n + 1);
      lowest_max[n / 2] = -big;
      cases.push_back({"one lowest among normal(0, 3)", lowest_max});
      for (const auto& c : cases) {
        const auto& x = c.second;
        const auto ref = reference(x);
        const auto lref = smax_test::ref_log_softmax(x);
        INFO(bound<T>::name << " isa " << isa << " n " << n << " input " << c.first);
        for_each_kernel(x, [&](const std::vector<T>& y, bool log) {
          if (log) {
            // The exact value may lie below -max (e.g. x_i - m = -2 max): it
            // rounds to -inf then, and only then.
            std::size_t bad = 0;
            for (std::size_t i = 0; i < n; ++i) {
              if (lref[i] < -static_cast<ld>(big)) bad += !(y[i] == -std::numeric_limits<T>::infinity() || y[i] == -big);
              else bad += !(std::isfinite(y[i]) && std::fabs(y[i] - lref[i]) <= bound<T>::rel * std::max<ld>(1, std::fabs(lref[i])));
            }
            CHECK(bad == 0);
          } else {
            CHECK(std::all_of(y.begin(), y.end(), [](T v) { return std::isfinite(v); }));
            const errors e = softmax_errors(y, ref);
            CHECK(e.rel <= bound<T>::rel);
            CHECK(e.small_ok);
            CHECK(e.sum <= bound<T>::sum);
          }
        });
      }
    }
  }
}

TEMPLATE_TEST_CASE("softmax: offsets that break a naive exp or the single-pass range", "[softmax][log_softmax][accuracy]",
                   float, double) {
  using T = TestType;
  worst_table table(std::string("worst softmax relative error with offset inputs, ") + bound<T>::name + ":");
  const double L = bound<T>::limit;
  // +-100 and +-1000: a naive e^x overflows or underflows. Around L and -L/2:
  // two_pass and online accept the max up to L and down to -L/2 and hand
  // anything else to the three-pass kernel. Far beyond: x - m must not be
  // formed by a subtraction that loses the small differences.
  std::vector<double> means = {100, -100, 1000, -1000, 0.5 * L - 1, -0.5 * L + 1, -0.5 * L - 1, L - 20, L - 1, L + 1,
                               -L - 1, 2 * L, -2 * L, 1e6 * L, -1e6 * L, 1e30, -1e30};
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : {std::size_t(1), std::size_t(7), std::size_t(33), std::size_t(1000), std::size_t(4097)})
      for (double mean : means)
        for (double sigma : {3.0, 30.0}) {
          auto x = smax_test::normal<T>(n, sigma, n + static_cast<std::uint64_t>(sigma), mean);
          const auto ref = reference(x);
          const auto lref = smax_test::ref_log_softmax(x);
          INFO(bound<T>::name << " isa " << isa << " n " << n << " normal(" << mean << ", " << sigma << ")");
          for (algorithm a : smax_test::algorithms()) {
            std::vector<T> y;
            softmax_call(x, y, a);
            const errors e = softmax_errors(y, ref);
            INFO(algorithm_name(a));
            CHECK(e.rel <= bound<T>::rel);
            CHECK(e.small_ok);
            CHECK(e.sum <= bound<T>::sum);
            table.add(key<T>(isa, a), e.rel, n);
          }
          std::vector<T> y(n);
          smax::dynamic::log_softmax(x.data(), y.data(), n);
          CHECK(log_error(y, lref) <= bound<T>::rel);
        }
  }
}

TEMPLATE_TEST_CASE("softmax: adversarial orderings for the rescaling algorithms", "[softmax][accuracy]", float, double) {
  using T = TestType;
  worst_table table(std::string("worst softmax relative error, sorted and ramp inputs, ") + bound<T>::name + ":");
  // 200003 natively; 65536 under QEMU and sanitizers (max_n() = 1M there).
  const std::size_t n = std::min<std::size_t>(200003, smax_test::max_n() / 16);
  std::vector<std::pair<std::string, std::vector<T>>> cases;
  auto s = smax_test::normal<T>(n, 20.0, 5);
  std::sort(s.begin(), s.end());
  cases.push_back({"normal(0, 20) ascending", s});
  std::reverse(s.begin(), s.end());
  cases.push_back({"normal(0, 20) descending", s});
  // A ramp over the whole single-pass range: online's reference moves every
  // few vectors, two_pass's exponent every 16 binades; every rescale
  // rounding would accumulate if the sums did not shrink at each move.
  std::vector<T> ramp(n);
  for (std::size_t i = 0; i < n; ++i) ramp[i] = static_cast<T>(-2000.0 + 6000.0 * static_cast<double>(i) / n);
  cases.push_back({"ramp -2000 .. 4000", ramp});
  for (std::size_t i = 0; i < n; ++i) ramp[i] = static_cast<T>(1e-3 * static_cast<double>(i));
  cases.push_back({"ramp step 1e-3", ramp});
  std::reverse(ramp.begin(), ramp.end());
  cases.push_back({"descending ramp step 1e-3", ramp});
  // Sawtooth: the max creeps up in small steps, each tooth a little higher.
  for (std::size_t i = 0; i < n; ++i) ramp[i] = static_cast<T>(0.01 * static_cast<double>(i % 1000) + 1e-4 * i);
  cases.push_back({"sawtooth", ramp});
  for (const auto& c : cases) {
    const auto ref = reference(c.second);
    for (const auto& isa : smax_test::isas()) {
      smax_test::use_isa guard(isa);
      for (algorithm a : smax_test::algorithms()) {
        std::vector<T> y;
        softmax_call(c.second, y, a);
        const errors e = softmax_errors(y, ref);
        INFO(bound<T>::name << " isa " << isa << " " << algorithm_name(a) << " input " << c.first);
        CHECK(e.rel <= bound<T>::rel);
        CHECK(e.small_ok);
        CHECK(e.sum <= bound<T>::sum);
        table.add(key<T>(isa, a), e.rel, n);
      }
    }
  }
}

TEST_CASE("dispatch: every compiled-in ISA the CPU has can be selected, unknown names are refused", "[dispatch]") {
  const auto isas = smax_test::isas();
  REQUIRE(!isas.empty());
  for (const auto& isa : isas) {
    REQUIRE(smax::dynamic::set_isa(isa.c_str()));
    CHECK(std::string(smax::dynamic::active_isa()) == isa);
  }
  const std::string before = smax::dynamic::active_isa();
  CHECK_FALSE(smax::dynamic::set_isa("no-such-isa"));
  CHECK(std::string(smax::dynamic::active_isa()) == before);
  REQUIRE(smax::dynamic::set_isa(nullptr));
  // Without SMAX_ISA the default is the best ISA the CPU has.
  if (!std::getenv("SMAX_ISA")) CHECK(std::string(smax::dynamic::active_isa()) == isas.front());
  std::printf("ISAs compiled in and supported by this CPU:");
  for (const auto& isa : isas) std::printf(" %s", isa.c_str());
  std::printf("\n");
}
