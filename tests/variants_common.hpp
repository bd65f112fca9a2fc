// Helpers shared by the tests of the other variants (test_stablemax.cpp,
// test_softpick.cpp, test_ssmax.cpp, test_gumbel.cpp): error tables,
// finite-difference gradients, bit hashes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"

namespace variants_test {

using ld = long double;

template <class T>
const char* type_name() {
  return sizeof(T) == 4 ? "float" : "double";
}

// Worst measured error per key, printed when the test case ends (run
// `smax_tests "[accuracy]"` to see them).
class worst_table {
 public:
  explicit worst_table(std::string title) : title_(std::move(title)) {}
  void add(const std::string& key, double err) {
    double& w = rows_[key];
    if (err != err) err = std::numeric_limits<double>::infinity();
    if (err > w) w = err;
  }
  ~worst_table() {
    std::printf("%s\n", title_.c_str());
    for (const auto& r : rows_) std::printf("  %-40s %.3g\n", r.first.c_str(), r.second);
    std::fflush(stdout);
  }

 private:
  std::string title_;
  std::map<std::string, double> rows_;
};

// Worst |y - ref| / ref over ref > floor; NaN counts as infinite. Outputs
// whose reference is at or below the floor must be in [0, 2 floor].
template <class T>
double rel_err(const std::vector<T>& y, const std::vector<ld>& ref, ld floor = 1e-30L) {
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    double e;
    if (ref[i] > floor)
      e = static_cast<double>(std::fabs((y[i] - ref[i]) / ref[i]));
    else
      e = (y[i] >= 0 && y[i] <= 2 * floor) ? 0.0 : std::numeric_limits<double>::infinity();
    if (e != e) e = std::numeric_limits<double>::infinity();
    if (e > worst) worst = e;
  }
  return worst;
}

// Central finite-difference vector-Jacobian product of f at x, in double:
// dx_k = d/dx_k sum_i dy_i f(x)_i.
inline std::vector<double> fd_vjp(const std::function<void(const double*, double*, std::size_t)>& f,
                                  const std::vector<double>& x, const std::vector<double>& dy) {
  const std::size_t n = x.size();
  std::vector<double> xp(x), y(n), dx(n);
  const auto value = [&](const std::vector<double>& v) {
    f(v.data(), y.data(), n);
    long double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += static_cast<long double>(dy[i]) * y[i];
    return s;
  };
  for (std::size_t k = 0; k < n; ++k) {
    const double h = 1e-6 * std::max(1.0, std::fabs(x[k]));
    xp[k] = x[k] + h;
    const long double fp = value(xp);
    xp[k] = x[k] - h;
    const long double fm = value(xp);
    xp[k] = x[k];
    dx[k] = static_cast<double>((fp - fm) / (2 * static_cast<long double>(h)));
  }
  return dx;
}

// max |a - b| / max(1e-12, max |b|).
inline double grad_err(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 1e-12, worst = 0;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < a.size(); ++i) {
    double e = std::fabs(a[i] - b[i]) / scale;
    if (e != e) e = std::numeric_limits<double>::infinity();
    worst = std::max(worst, e);
  }
  return worst;
}

// FNV-1a over the bytes of the values.
template <class T>
std::uint64_t hash_bits(const std::vector<T>& v) {
  std::uint64_t h = 1469598103934665603ull;
  for (T x : v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &x, sizeof(T));
    for (unsigned char c : b) {
      h ^= c;
      h *= 1099511628211ull;
    }
  }
  return h;
}

template <class T>
bool all_nan(const std::vector<T>& y) {
  for (T v : y)
    if (v == v) return false;
  return true;
}

template <class T>
bool all_finite(const std::vector<T>& y) {
  for (T v : y)
    if (!std::isfinite(v)) return false;
  return true;
}

// x with the first element one past a 64-byte boundary (misaligned for
// every vector width), copied from v.
template <class T>
struct misaligned {
  std::vector<T> buf;
  T* p;
  explicit misaligned(const std::vector<T>& v) : buf(v.size() + 64 / sizeof(T) + 1) {
    const auto addr = reinterpret_cast<std::uintptr_t>(buf.data());
    p = buf.data() + ((64 - addr % 64) % 64) / sizeof(T) + 1;
    std::copy(v.begin(), v.end(), p);
  }
  std::vector<T> values(std::size_t n) const { return std::vector<T>(p, p + n); }
};

}  // namespace variants_test
