// Shared helpers for smax's tests: the ISAs to run, long-double references,
// inputs, and error measures.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
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

// Worst |y - ref| / ref over entries with ref > floor.
template <class T>
double max_rel_err(const std::vector<T>& y, const std::vector<long double>& ref, long double floor = 1e-30L) {
  double worst = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    if (ref[i] > floor) worst = std::max(worst, static_cast<double>(std::fabs((y[i] - ref[i]) / ref[i])));
  return worst;
}

}  // namespace smax_test
