// Shared helpers for smax's tests: the ISAs to run, long-double references,
// inputs, and error measures.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <smax/dynamic.hpp>

namespace smax_test {

// Every ISA compiled into the test binary that this CPU can run (under QEMU:
// neon). Each test body runs once per entry, with smax::dynamic routed to it;
// the ISA that actually ran is checked against the request.
inline std::vector<std::string> isas() {
  const char* names[8];
  const std::size_t k = smax::dynamic::available_isas(names, 8);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < k && i < 8; ++i) out.emplace_back(names[i]);
  return out;
}

// Routes smax::dynamic to `isa` for the lifetime of the object.
struct use_isa {
  explicit use_isa(const std::string& isa) {
    REQUIRE(smax::dynamic::set_isa(isa.c_str()));
    REQUIRE(std::string(smax::dynamic::active_isa()) == isa);
  }
  ~use_isa() { smax::dynamic::set_isa(nullptr); }
};

// Sizes around the vector width and the 4-vector unroll of every ISA here
// (4, 8, 16 floats; 2, 4, 8 doubles), plus blocks and larger.
inline std::vector<std::size_t> sizes() {
  return {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 66, 127, 128, 129, 130,
          255, 256, 257, 1000, 1023, 1024, 1025, 4097, 65537};
}

template <class T>
std::vector<T> normal(std::size_t n, double sigma, std::uint64_t seed, double mean = 0.0) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(mean, sigma);
  std::vector<T> x(n);
  for (auto& v : x) v = static_cast<T>(d(g));
  return x;
}

// Long-double softmax of finite input.
template <class T>
std::vector<long double> ref_softmax(const std::vector<T>& x) {
  long double m = -std::numeric_limits<long double>::infinity();
  for (T v : x) m = std::max<long double>(m, v);
  long double s = 0;
  for (T v : x) s += std::exp(static_cast<long double>(v) - m);
  std::vector<long double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::exp(static_cast<long double>(x[i]) - m) / s;
  return y;
}

// Worst |y - ref| / ref over entries with ref > floor; a NaN output counts
// as an infinite error (std::max would silently drop it).
template <class T>
double max_rel_err(const std::vector<T>& y, const std::vector<long double>& ref, long double floor = 1e-30L) {
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    if (ref[i] > floor) {
      const double e = static_cast<double>(std::fabs((y[i] - ref[i]) / ref[i]));
      worst = std::max(worst, e == e ? e : std::numeric_limits<double>::infinity());
    }
  return worst;
}

// ---- general helpers (tests/test_softmax.cpp, test_exp.cpp; use freely) ----

// Built with AddressSanitizer (g++: __SANITIZE_ADDRESS__; clang:
// __has_feature): the -O0 instrumented build runs 10-50x slower, so a few
// long sweeps draw or sweep less there; the native builds run them in full.
#if defined(__SANITIZE_ADDRESS__)
#define SMAX_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SMAX_TEST_SANITIZED 1
#endif
#endif
#ifdef SMAX_TEST_SANITIZED
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif

// The largest n the size-scaled tests use: the environment variable
// SMAX_TEST_MAX_N if set, else the build's default SMAX_TEST_DEFAULT_MAX_N
// (tests/CMakeLists.txt: 16M natively, less under QEMU and sanitizers).
inline std::size_t max_n() {
#ifndef SMAX_TEST_DEFAULT_MAX_N
#define SMAX_TEST_DEFAULT_MAX_N 16777216
#endif
  if (const char* e = std::getenv("SMAX_TEST_MAX_N"))
    if (const unsigned long long v = std::strtoull(e, nullptr, 10)) return static_cast<std::size_t>(v);
  return static_cast<std::size_t>(SMAX_TEST_DEFAULT_MAX_N);
}

// sizes() without the entries above max_n().
inline std::vector<std::size_t> sizes_up_to_max() {
  std::vector<std::size_t> out;
  for (std::size_t n : sizes())
    if (n <= max_n()) out.push_back(n);
  return out;
}

inline const std::vector<smax::algorithm>& algorithms() {
  static const std::vector<smax::algorithm> all = {smax::algorithm::automatic, smax::algorithm::three_pass_recompute,
                                                   smax::algorithm::three_pass_reload, smax::algorithm::two_pass,
                                                   smax::algorithm::online};
  return all;
}

inline const char* algorithm_name(smax::algorithm a) {
  switch (a) {
    case smax::algorithm::automatic: return "automatic";
    case smax::algorithm::three_pass_recompute: return "three_pass_recompute";
    case smax::algorithm::three_pass_reload: return "three_pass_reload";
    case smax::algorithm::two_pass: return "two_pass";
    case smax::algorithm::online: return "online";
  }
  return "?";
}

template <class T>
std::vector<T> uniform(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> x(n);
  for (auto& v : x) v = static_cast<T>(d(g));
  return x;
}

// n elements with `guard` sentinel elements on each side, the first element
// `offset` elements past a 64-byte boundary (offset 1: misaligned for every
// vector width). intact() says whether the guards still hold the sentinel,
// i.e. nothing was written before data()[0] or after data()[n - 1].
template <class T>
class guarded {
 public:
  static constexpr std::size_t guard = 64;
  guarded(std::size_t n, std::size_t offset, T sentinel)
      : n_(n), offset_(offset), sentinel_(sentinel), buf_(n + 2 * guard + offset + 64 / sizeof(T)) {
    const auto addr = reinterpret_cast<std::uintptr_t>(buf_.data());
    const std::size_t skip = ((64 - addr % 64) % 64) / sizeof(T);
    first_ = skip + guard + offset_;
    for (auto& v : buf_) v = sentinel_;
  }
  T* data() { return buf_.data() + first_; }
  T& operator[](std::size_t i) { return data()[i]; }
  std::vector<T> values() const { return std::vector<T>(buf_.begin() + first_, buf_.begin() + first_ + n_); }
  void assign(const std::vector<T>& v) { std::copy(v.begin(), v.end(), data()); }
  bool intact() const {
    for (std::size_t i = first_ - guard; i < first_; ++i)
      if (!same(buf_[i], sentinel_)) return false;
    for (std::size_t i = first_ + n_; i < first_ + n_ + guard; ++i)
      if (!same(buf_[i], sentinel_)) return false;
    return true;
  }

 private:
  static bool same(T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }
  std::size_t n_, offset_, first_ = 0;
  T sentinel_;
  std::vector<T> buf_;
};

// Long-double log_softmax of input with no NaN or +inf and at least one
// finite entry (-inf entries give -inf).
template <class T>
std::vector<long double> ref_log_softmax(const std::vector<T>& x) {
  long double m = -std::numeric_limits<long double>::infinity();
  for (T v : x) m = std::max<long double>(m, v);
  long double s = 0;
  for (T v : x) s += std::exp(static_cast<long double>(v) - m);
  const long double lse = std::log(s);
  std::vector<long double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = (static_cast<long double>(x[i]) - m) - lse;
  return y;
}

// Bitwise equality of two arrays (so NaN == NaN, and -0 != +0).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

}  // namespace smax_test
