// Shared pieces of smax's libFuzzer targets: decoding sizes, parameters and
// values from the fuzz bytes (biased toward the values that break kernels),
// guarded buffers that catch any write outside [0, n), and the checks.
//
// A check that fails calls fail(), which prints the input's decoded shape and
// aborts, so libFuzzer saves the input as a crash file. Each target is built
// with -fsanitize=fuzzer,address,undefined (tools/run_fuzz.sh).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <limits>
#include <string>
#include <vector>

#include <smax/dynamic.hpp>
#include <smax/parallel.hpp>

namespace smax_fuzz {

// The largest output a normalized function may return: 1 plus the rounding
// of its last product (e * (1 / sum) is not always <= 1 for a single
// dominant entry; the documented error bounds allow it).
template <class T>
constexpr T one_plus_rounding() {
  return T(1) + 2 * std::numeric_limits<T>::epsilon();
}

// What the current input decoded to (set by the targets), printed by fail().
inline std::string& context() {
  static std::string c;
  return c;
}

template <class T>
void describe(const char* name, const std::vector<T>& v) {
  std::string& c = context();
  c += std::string(name) + "[" + std::to_string(v.size()) + "] =";
  char buf[48];
  for (std::size_t i = 0; i < v.size() && i < 48; ++i) {
    std::snprintf(buf, sizeof buf, " %a", static_cast<double>(v[i]));
    c += buf;
  }
  if (v.size() > 48) c += " ...";
  c += "\n";
}

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "smax fuzz check failed: %s (isa %s)\n%s", what.c_str(), smax::dynamic::active_isa(),
               context().c_str());
  std::abort();
}

// Reads the fuzz bytes front to back; past the end it yields zeros.
class stream {
 public:
  stream(const std::uint8_t* data, std::size_t size) : p_(data), end_(data + size) {}
  std::uint8_t byte() { return p_ < end_ ? *p_++ : 0; }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | byte();
    return v;
  }
  std::uint64_t u64() { return (static_cast<std::uint64_t>(u32()) << 32) | u32(); }
  bool empty() const { return p_ >= end_; }
  std::size_t left() const { return static_cast<std::size_t>(end_ - p_); }

  // A size in [0, max], small sizes (around the vector widths) most often.
  std::size_t size(std::size_t max) {
    const std::uint8_t kind = byte();
    std::size_t n;
    if (kind < 160)
      n = kind % 70;  // 0 .. 69: every tail of every ISA's unroll
    else
      n = (static_cast<std::size_t>(byte()) << 8 | byte());
    return std::min(n, max);
  }

  // An element value: mostly ordinary logits, often a special value.
  template <class T>
  T value(T previous) {
    constexpr T inf = std::numeric_limits<T>::infinity();
    const std::uint8_t kind = byte();
    switch (kind % 32) {
      case 0: return std::numeric_limits<T>::quiet_NaN();
      case 1: return inf;
      case 2: return -inf;
      case 3: return std::numeric_limits<T>::max();
      case 4: return -std::numeric_limits<T>::max();
      case 5: return std::numeric_limits<T>::denorm_min();
      case 6: return -std::numeric_limits<T>::denorm_min();
      case 7: return T(-0.0);
      case 8: return previous;  // a tie
      case 9: return static_cast<T>(static_cast<std::int16_t>(u32() & 0xFFFF)) * T(64);  // big, |x| <= 2^21
      case 10: {  // raw bits: anything at all
        if (sizeof(T) == 4) {
          const std::uint32_t b = u32();
          float f;
          std::memcpy(&f, &b, 4);
          return static_cast<T>(f);
        }
        const std::uint64_t b = u64();
        double d;
        std::memcpy(&d, &b, 8);
        return static_cast<T>(d);
      }
      case 11: return previous + T(1e-3);  // near-tie
      default:  // logits in [-32, 32) with 16 bits of resolution
        return static_cast<T>(static_cast<std::int16_t>((kind << 8) | byte())) * T(1.0 / 1024);
    }
  }

  template <class T>
  std::vector<T> values(std::size_t n) {
    std::vector<T> v(n);
    T prev = T(0);
    for (auto& e : v) prev = e = value<T>(prev);
    return v;
  }

  // Routes smax::dynamic to one of the ISAs this CPU has.
  void pick_isa() {
    const char* names[8];
    const std::size_t k = std::min<std::size_t>(smax::dynamic::available_isas(names, 8), 8);
    if (k == 0) fail("no ISA available");
    if (!smax::dynamic::set_isa(names[byte() % k])) fail("set_isa refused an available ISA");
  }

 private:
  const std::uint8_t* p_;
  const std::uint8_t* end_;
};

// A scalar parameter: mostly one of `choices`, sometimes a special value
// (NaN, +-inf, -1, 0, -0) that may be out of the valid range.
template <class T>
T param(stream& in, std::initializer_list<T> choices) {
  const std::uint8_t k = in.byte();
  if (k < 16) {
    const T specials[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                          -std::numeric_limits<T>::infinity(), T(-1), T(0), T(-0.0)};
    return specials[k % 6];
  }
  return *(choices.begin() + (k % choices.size()));
}

// n elements surrounded by guard elements holding a canary; data() is offset
// by 0..3 elements from a 64-byte boundary (misaligned for every ISA).
template <class T>
class guarded {
 public:
  static constexpr std::size_t guard = 64;
  guarded(std::size_t n, std::size_t offset) : n_(n), off_(guard + offset % 4), buf_(n + 2 * guard + 4) {
    std::memset(buf_.data(), 0xA5, buf_.size() * sizeof(T));
  }
  T* data() { return n_ ? buf_.data() + off_ : nullptr; }
  const T* data() const { return n_ ? buf_.data() + off_ : nullptr; }
  T& operator[](std::size_t i) { return buf_[off_ + i]; }
  const T& operator[](std::size_t i) const { return buf_[off_ + i]; }
  std::size_t size() const { return n_; }
  void assign(const std::vector<T>& v) {
    for (std::size_t i = 0; i < n_; ++i) (*this)[i] = v[i];
  }
  std::vector<T> vec() const {
    std::vector<T> v(n_);
    for (std::size_t i = 0; i < n_; ++i) v[i] = (*this)[i];
    return v;
  }
  // Every byte outside [off, off + n) still holds the canary.
  void check_guards(const char* what) const {
    const auto* bytes = reinterpret_cast<const unsigned char*>(buf_.data());
    const std::size_t lo = off_ * sizeof(T), hi = (off_ + n_) * sizeof(T);
    for (std::size_t b = 0; b < buf_.size() * sizeof(T); ++b)
      if ((b < lo || b >= hi) && bytes[b] != 0xA5) fail(std::string(what) + ": write outside [0, n)");
  }

 private:
  std::size_t n_, off_;
  std::vector<T> buf_;
};

template <class T>
bool any_nan(const std::vector<T>& x) {
  return std::any_of(x.begin(), x.end(), [](T v) { return v != v; });
}

// The special-value rules of the family for a normalized output y of x
// (softmax-like: +inf entries share the mass, -inf masked, all -inf -> 0).
// Returns true if x was special (and the rule was checked), false if x is
// finite-max input whose values the caller should check against a reference.
template <class T>
bool check_special_softmax(const std::vector<T>& x, const std::vector<T>& y, bool log, const char* fn) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  const std::size_t n = x.size();
  if (any_nan(x)) {
    for (T v : y)
      if (v == v) fail(std::string(fn) + ": NaN input must give all-NaN output");
    return true;
  }
  const std::size_t posinf = static_cast<std::size_t>(std::count(x.begin(), x.end(), inf));
  const bool all_neginf = std::all_of(x.begin(), x.end(), [](T v) { return v == -inf; });
  if (posinf == 0 && !all_neginf) return false;
  for (std::size_t i = 0; i < n; ++i) {
    T expect;
    if (posinf) {
      const long double share = 1.0L / posinf;
      expect = x[i] == inf ? static_cast<T>(log ? std::log(share) : share) : (log ? -inf : T(0));
    } else {
      expect = log ? -inf : T(0);
    }
    if (!(y[i] == expect || std::fabs(y[i] - expect) <= 4 * std::numeric_limits<T>::epsilon() * std::fabs(expect)))
      fail(std::string(fn) + ": special-value rule broken at " + std::to_string(i));
  }
  return true;
}

// Long-double softmax (or log-softmax) of input with a finite max.
template <class T>
std::vector<long double> ref_softmax(const std::vector<T>& x, bool log) {
  long double m = -std::numeric_limits<long double>::infinity();
  for (T v : x) m = std::max<long double>(m, v);
  long double s = 0;
  for (T v : x) s += std::exp(static_cast<long double>(v) - m);
  std::vector<long double> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    r[i] = log ? (static_cast<long double>(x[i]) - m) - std::log(s) : std::exp(static_cast<long double>(x[i]) - m) / s;
  return r;
}

// Per-element relative error of the library's contract: 1e-6 (float) for
// outputs above 1e-30; outputs below it must lie in [0, 1e-30 + tol].
template <class T>
void check_softmax_values(const std::vector<T>& x, const std::vector<T>& y, const char* fn) {
  const double tol = sizeof(T) == 4 ? 1e-6 : 1e-13;
  const auto ref = ref_softmax(x, false);
  double sum = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!(y[i] >= 0 && y[i] <= one_plus_rounding<T>())) fail(std::string(fn) + ": output outside [0, 1] at " + std::to_string(i));
    sum += y[i];
    if (ref[i] > 1e-30L) {
      if (std::fabs((y[i] - ref[i]) / ref[i]) > tol)
        fail(std::string(fn) + ": relative error above the contract at " + std::to_string(i));
    } else if (y[i] > 1e-30 * (1 + tol) + 1e-36) {
      fail(std::string(fn) + ": tiny output too large at " + std::to_string(i));
    }
  }
  if (!y.empty() && std::fabs(sum - 1.0) > tol * 2) fail(std::string(fn) + ": outputs do not sum to 1");
}

// Calls f; true if it threw std::invalid_argument (anything else thrown is
// a finding).
template <class F>
bool throws_invalid(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
    return true;
  } catch (...) {
    fail("threw something other than std::invalid_argument");
  }
  return false;
}

// An executor chosen by one input byte: none (this thread), 2 or 3 threads.
inline smax::executor* pick_executor(std::uint8_t b) {
  static smax::thread_pool two(2), three(3);
  switch (b % 3) {
    case 0: return nullptr;
    case 1: return &two;
    default: return &three;
  }
}

// A batched output element against the vector call's: equal, or both NaN
// (NaN payloads may differ).
template <class T>
bool same_or_both_nan(T a, T b) {
  return a == b || (a != a && b != b);
}

// memcmp that accepts null pointers for zero bytes (memcmp itself does not).
inline bool same_bytes(const void* a, const void* b, std::size_t bytes) {
  return bytes == 0 || std::memcmp(a, b, bytes) == 0;
}

// Runs f(x_ptr, y_ptr) on guarded copies of x (in place when asked, with
// the buffers misaligned by `offset`), checks that nothing outside [0, n)
// was written and that an out-of-place call left x alone; returns y.
template <class T, class F>
std::vector<T> run_guarded(const std::vector<T>& x, bool in_place, std::size_t offset, const char* fn, F&& f) {
  const std::size_t n = x.size();
  guarded<T> xb(n, offset), yb(n, offset + 1);
  xb.assign(x);
  f(xb.data(), in_place ? xb.data() : yb.data());
  xb.check_guards(fn);
  yb.check_guards(fn);
  if (!in_place) {
    const std::vector<T> after = xb.vec();
    if (!same_bytes(after.data(), x.data(), n * sizeof(T))) fail(std::string(fn) + ": input modified");
  }
  return in_place ? xb.vec() : yb.vec();
}

// |y_i - ref_i| <= tol_i * |ref_i| for every output above 1e-30 (tol from
// the caller, per element), tiny outputs tiny, and y in [0, 1].
template <class T, class Tol>
void check_relative(const std::vector<T>& y, const std::vector<long double>& ref, Tol&& tol, const char* fn) {
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (!(y[i] >= 0 && y[i] <= one_plus_rounding<T>())) fail(std::string(fn) + ": output outside [0, 1] at " + std::to_string(i));
    const long double t = tol(i);
    if (ref[i] > 1e-30L) {
      if (std::fabs((y[i] - ref[i]) / ref[i]) > t)
        fail(std::string(fn) + ": relative error above the documented bound at " + std::to_string(i));
    } else if (y[i] > 1e-30L * (1 + t) + 1e-36L) {
      fail(std::string(fn) + ": tiny output too large at " + std::to_string(i));
    }
  }
}

template <class T>
void check_all_nan(const std::vector<T>& y, const char* fn) {
  for (T v : y)
    if (v == v) fail(std::string(fn) + ": NaN input must give all-NaN output");
}

template <class T>
void check_log_softmax_values(const std::vector<T>& x, const std::vector<T>& y, const char* fn) {
  const double tol = sizeof(T) == 4 ? 1e-6 : 1e-13;
  const auto ref = ref_softmax(x, true);
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (std::fabs(ref[i]) > static_cast<long double>(std::numeric_limits<T>::max())) {
      // The true value is below -max: the only representable answer is -inf
      // (or -max, when the rounding of x - m lands exactly there).
      if (!(y[i] == -std::numeric_limits<T>::infinity() || y[i] == -std::numeric_limits<T>::max()))
        fail(std::string(fn) + ": overflowing log-probability not -inf at " + std::to_string(i));
      continue;
    }
    if (!(y[i] <= 0)) {
      describe("y", y);
      fail(std::string(fn) + ": positive log-probability at " + std::to_string(i));
    }
    if (std::fabs(y[i] - ref[i]) > tol * std::max(1.0L, std::fabs(ref[i])))
      fail(std::string(fn) + ": error above the contract at " + std::to_string(i));
  }
}

}  // namespace smax_fuzz
