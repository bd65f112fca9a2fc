// No subnormal arithmetic (exp.hpp): on logits whose exponentials reach
// below the smallest normal number (normal(0, 20), uniform(+-150) floats;
// uniform(+-1500) doubles; values near zero beside large ones), every kernel
// of the family, on float, double and (those logits rounded) bf16 and fp16,
//   * writes no subnormal output (each is 0 or at least the smallest normal),
//   * gives the same bits with FTZ/DAZ set as without (x86): FTZ/DAZ change
//     only operations that form or read subnormals, so equal bits on such
//     inputs mean that none of those reached the results,
//   * reads or forms no subnormal anywhere (x86's denormal-operand and
//     underflow flags; fp16 the first only: forbidden_flags), and
//   * stays within the accuracy contract (softmax against long double).
// The speed side (an Intel core takes a microcode assist per subnormal
// operation) is measured by bench/bench_subnormal.cpp.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <type_traits>
#include <utility>

#include "common.hpp"
#include "family.hpp"
#include "half_common.hpp"

#if defined(__SSE2__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif

namespace {

using smax::algorithm;

// Sets FTZ/DAZ for the scope on x86 (false elsewhere: nothing to compare).
struct fp_flush_scope {
  explicit fp_flush_scope(bool on) {
#if defined(__SSE2__)
    saved = _mm_getcsr();
    if (on) _mm_setcsr(saved | 0x8040);  // FTZ (bit 15) | DAZ (bit 6)
#else
    (void)on;
#endif
  }
  ~fp_flush_scope() {
#if defined(__SSE2__)
    _mm_setcsr(saved);
#endif
  }
  unsigned saved = 0;
};

// x86's sticky flags "denormal operand" (MXCSR bit 1: an SSE / AVX
// operation, scalar or vector, read a subnormal) and "underflow" (bit 4: a
// result fell below the normal range, subnormal or rounded to 0), each an
// assist on Intel, which FTZ/DAZ alone cannot show where the value never
// reaches an output bit. Cleared, then read after a call (a backward
// kernel's entry includes its forward call). Optimized builds only (the
// sanitized stage's -O1 included): -O0 code (unfused products, nothing
// inlined) is not what users run (its unfused products of tiny values
// would raise them).
struct subnormal_flags {
  static constexpr unsigned bits = 0x12u;
  // (trap: also unmask the two exceptions, MXCSR bits 8 and 11, so that the
  // first such operation raises SIGFPE at its instruction: run under gdb)
  // watched: the flags raised() reads (both, or denormal operand only).
  explicit subnormal_flags(bool trap, unsigned watched_flags = bits) : watched(watched_flags) {
#if defined(__SSE2__) && defined(__OPTIMIZE__)
    saved = _mm_getcsr();
    _mm_setcsr((saved & ~bits) & ~(trap ? 0x900u : 0u));
#else
    (void)trap;
#endif
  }
  ~subnormal_flags() {
#if defined(__SSE2__) && defined(__OPTIMIZE__)
    _mm_setcsr((saved & 0xFFC0u) | (_mm_getcsr() & 0x3Fu));
#endif
  }
  bool raised() const {
#if defined(__SSE2__) && defined(__OPTIMIZE__)
    return (_mm_getcsr() & watched) != 0;
#else
    return false;
#endif
  }
  unsigned watched;
  unsigned saved = 0;
};

// The flags a call on T may not raise. fp16: denormal operand only. Its
// outputs below 2^-14 are fp16 subnormals (normal floats, within the
// contract), and forming one raises underflow in the conversion itself
// (F16C's vcvtps2ph, with or without FTZ: AMD EPYC Zen 5).
template <class T>
constexpr unsigned forbidden_flags = std::is_same<T, smax::fp16>::value ? 0x02u : subnormal_flags::bits;

constexpr bool have_ftz =
#if defined(__SSE2__)
    true;
#else
    false;
#endif

template <class T>
std::vector<T> wide_logits(std::size_t n, int kind, std::uint64_t seed) {
  const double w = sizeof(T) == 4 ? 150.0 : 1500.0;
  if (kind == 0) return smax_test::normal<T>(n, sizeof(T) == 4 ? 20.0 : 200.0, seed);
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> d(-w, w);
  std::vector<T> x(n);
  if (kind == 9) {  // kind 5 beside one tiny negative logit (sa_factor's careful rows)
    x = wide_logits<T>(n, 5, seed);
    x[n / 3] = static_cast<T>(-1.5) * std::numeric_limits<T>::min();
    return x;
  }
  if (kind == 10) {  // |normal(0, 1)| 2^-120 / 2^-1000: a range below 2^-100 (h capped)
    x = smax_test::normal<T>(n, 1.0, seed);
    for (auto& v : x) {  // (no subnormal input: those below become 0)
      v = std::ldexp(std::fabs(v), sizeof(T) == 4 ? -120 : -1000);
      if (v < std::numeric_limits<T>::min()) v = T(0);
    }
    return x;
  }
  if (kind == 7) {  // normal(0, 20) / 256: a range below 1 (sa_factor's h > 1)
    x = smax_test::normal<T>(n, 20.0, seed);
    for (auto& v : x) v = std::ldexp(v, -8);
    return x;
  }
  if (kind == 8) {  // kind 2 beside one logit at max / 2
    x = wide_logits<T>(n, 2, seed);
    x[n / 3] = std::numeric_limits<T>::max() / 2;
    return x;
  }
  if (kind == 5 || kind == 6) {
    // Kind 5: kind 2's magnitudes (no negative logit: sa_softmax's lower
    // bound is 0, so g = x / max for the entries near 0). Kind 6: kind 2
    // beside one logit at -max / 2 (a range beyond 2^126 / 2^1022: 1 / range
    // is below the normal range).
    x = wide_logits<T>(n, 2, seed);
    if (kind == 5)
      for (auto& v : x) v = std::fabs(v);
    else
      x[n / 3] = -std::numeric_limits<T>::max() / 2;
    return x;
  }
  if (kind >= 2) {
    // Near zero (normal numbers down to the smallest, either sign) beside
    // large logits: terms of x near 0 scaled against a large reference
    // (softpick's K = 0 lanes). Kind 3 puts the max just below where e^x
    // is cut (e^-96 for float, e^-716 for double: the near-zero entries
    // then lie within an exp's clamp, beyond sa_softmax's kept depth);
    // kind 4 just above it (e^-80, e^-700: their terms are small but kept).
    const double top = kind == 3   ? (sizeof(T) == 4 ? 96.0 : 716.0)
                       : kind == 4 ? (sizeof(T) == 4 ? 80.0 : 700.0)
                                   : w;
    std::uniform_real_distribution<double> u(0.0, 1.0), lg(std::numeric_limits<T>::min_exponent, -20.0);
    for (auto& v : x) {
      const double r = u(g);
      v = r < 0.5   ? static_cast<T>((r < 0.25 ? -1.0 : 1.0) * std::ldexp(1.0 + u(g), static_cast<int>(lg(g))))
          : r < 0.6 ? T(0)
          : r < 0.7 ? static_cast<T>(top * (0.25 + 0.75 * u(g)))
                    : static_cast<T>(d(g) / w * 2.0);
    }
    return x;
  }
  for (auto& v : x) v = static_cast<T>(d(g));
  return x;
}

template <class T>
bool is_subnormal(T v) {
  return v != T(0) && std::fabs(v) < std::numeric_limits<T>::min();
}
// (a bf16 subnormal is a float one; an fp16 output below 2^-14 is an fp16
// subnormal, a normal float: the rule is about the float arithmetic)
bool is_subnormal(smax::bf16 v) { return is_subnormal(static_cast<float>(v)); }
bool is_subnormal(smax::fp16 v) { return is_subnormal(static_cast<float>(v)); }

template <class H>
std::vector<H> rounded(const std::vector<float>& f) {
  std::vector<H> h(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) h[i] = H(f[i]);
  return h;
}
// The logits of `kind` as T: the 16-bit types take the float logits
// rounded once (fp16: beyond 65504 they are +-inf, below 2^-24 zero).
template <class T>
std::vector<T> logits_of(std::size_t n, int kind, std::uint64_t seed) {
  if constexpr (std::is_floating_point<T>::value)
    return wide_logits<T>(n, kind, seed);
  else
    return rounded<T>(wide_logits<float>(n, kind, seed));
}
// normal(0, 1) as T (the 16-bit types: the float values rounded once)
template <class T>
std::vector<T> unit_normal(std::size_t n, std::uint64_t seed) {
  if constexpr (std::is_floating_point<T>::value)
    return smax_test::normal<T>(n, 1.0, seed);
  else
    return smax_test::logits<T>(n, 1.0, seed);
}

// Open (docs/guarantees.md): the options' product x scale is formed as given, so kind 10 (logits
// all below 2^-100 in magnitude; double 2^-1000) runs the option and
// attention-row forms at a scale of 1 only.
template <class T>
bool open_exception(const smax_test::family_call<T>& c, int kind) {
  const bool scaled = c.name.find("(options)") != std::string::npos || c.name.find("(attention rows)") != std::string::npos;
  return kind == 10 && scaled;
}

// Every function of `calls` on `kind`'s logits of length n, on every ISA.
// With dy scaled by 2^e (dy_exponent e != 0), every backward pass, linear
// in dy, must give its unscaled result times 2^e (a forward function, its
// unscaled result): within `row_rel` of the
// row's largest |dx| (room for the rounding of cancelling entries, whose
// path can change with the scale), or 64 times the smallest normal number
// (outputs that fall below the normal range may be 0). A pass that zeroes
// or drops what it cannot compute safely fails here.
template <class T>
double row_rel() {
  return std::is_same<T, double>::value ? 0x1p-40 : std::is_same<T, float>::value ? 0x1p-16 : 0x1p-6;
}
template <class T>
double as_double(T v) {
  return static_cast<double>(static_cast<typename smax::detail::option_scalar<T>::type>(v));
}
template <class T>
void check_scaled(const std::vector<T>& scaled, const std::vector<T>& unscaled, int e) {
  double largest = 0;
  for (T v : unscaled) largest = std::max(largest, std::fabs(std::ldexp(as_double(v), e)));
  const double floor = 64 * static_cast<double>(std::numeric_limits<typename smax::detail::option_scalar<T>::type>::min());
  const double tol = std::max(row_rel<T>() * largest, floor);
  std::size_t bad = 0, first = scaled.size();
  for (std::size_t i = 0; i < scaled.size(); ++i) {
    const double want = std::ldexp(as_double(unscaled[i]), e), got = as_double(scaled[i]);
    // (NaN in both, or the same infinity, agree)
    if (want != want && got != got) continue;
    if (want == got) continue;
    if (!(std::fabs(got - want) <= tol)) {
      if (bad++ == 0) first = i;
    }
  }
  const double got_first = first < scaled.size() ? as_double(scaled[first]) : 0.0;
  const double want_first = first < scaled.size() ? std::ldexp(as_double(unscaled[first]), e) : 0.0;
  const auto hex = [](double v) {
    char b[40];
    std::snprintf(b, sizeof b, "%a", v);
    return std::string(b);
  };
  CAPTURE(hex(largest), hex(tol), bad, first, hex(got_first), hex(want_first));
  CHECK(bad == 0);
}

// Where the check applies: float and bf16 on x86, whose backward passes
// sum in double lanes (exact). Double and NEON's float drop the terms below
// 2^digits times the smallest normal number from their sums (up to n times
// that, documented in docs/guarantees.md), more than the results at dy ~
// 2^-1000 (2^-110) themselves, which lie below the contract's absolute
// floor of 1e-30.
template <class T>
constexpr bool scaled_results_checked =
#if defined(__SSE2__)
    !std::is_same<T, double>::value;
#else
    false;
#endif

template <class T>
void check_rows(const smax_test::family<T>& calls, int kind, std::size_t n, int dy_exponent = 0) {
  const std::vector<T> x = logits_of<T>(n, kind, 1000 + n + kind);
  std::vector<T> dy = unit_normal<T>(n, 77 + n);
  for (std::size_t i = 0; i < n; i += 7) dy[i] = T(0);
  const std::vector<T> dy_unscaled = dy;
  if (dy_exponent != 0)
    for (T& v : dy) v = static_cast<T>(std::ldexp(static_cast<double>(static_cast<float>(v)), dy_exponent));
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa scope(isa);
    for (const auto& k : calls) {
      CAPTURE(isa, k.name, kind, n, dy_exponent);
      std::vector<T> ieee(n), flushed(n);
      {
        const subnormal_flags flag(std::getenv("SMAX_TEST_SUBNORMAL_TRAP") != nullptr, forbidden_flags<T>);
        k.run(x.data(), dy.data(), ieee.data(), n);
        if (flag.raised())
          FAIL_CHECK("reads or forms a subnormal: " << isa << " " << k.name << " kind " << kind << " n " << n);
      }
      std::size_t n_sub = 0;
      for (T v : ieee) n_sub += is_subnormal(v);
      CHECK(n_sub == 0);
      // (the sanitized build, several times slower, leaves the FTZ/DAZ
      // rerun of the larger rows to the native builds, which run all of it)
      if (have_ftz && !(smax_test::sanitized && n > 4100)) {
        {
          fp_flush_scope ftz(true);
          k.run(x.data(), dy.data(), flushed.data(), n);
        }
        std::size_t diff = 0;
        for (std::size_t i = 0; i < n; ++i) diff += std::memcmp(&ieee[i], &flushed[i], sizeof(T)) != 0;
        CHECK(diff == 0);
      }
      if (dy_exponent != 0 && scaled_results_checked<T>) {
        // (the functions that ignore dy, the forward ones and the losses'
        // backward passes with their own gradient, give the same result:
        // told apart by a run on 2 dy)
        std::vector<T> unscaled(n), doubled(n), dy2(dy_unscaled);
        for (T& v : dy2) v = static_cast<T>(2 * static_cast<typename smax::detail::option_scalar<T>::type>(v));
        k.run(x.data(), dy_unscaled.data(), unscaled.data(), n);
        k.run(x.data(), dy2.data(), doubled.data(), n);
        const bool reads_dy = std::memcmp(unscaled.data(), doubled.data(), n * sizeof(T)) != 0;
        check_scaled<T>(ieee, unscaled, reads_dy ? dy_exponent : 0);
      }
    }
  }
}

template <class T>
void check_all() {
  const auto calls = smax_test::every_function<T>();
  for (int kind = 0; kind < 11; ++kind) {
    auto kept = calls;
    kept.erase(std::remove_if(kept.begin(), kept.end(), [&](const smax_test::family_call<T>& c) { return open_exception(c, kind); }),
               kept.end());
    REQUIRE(kept.size() == calls.size() - (kind == 10 ? 6 : 0));
    // (under a size cap, QEMU and ASan, 16K for the larger size)
    const std::size_t large = smax_test::max_n() < (std::size_t(1) << 20) ? 16388 : 65540;
    for (std::size_t n : {std::size_t(4100), large}) check_rows<T>(kept, kind, n);
  }
}

// The rows past the cache (32 MiB: sa_softmax's general path, which the
// in-cache reload leaves to the rows it declines; every CPU's two-pass
// threshold lies below, but SSE2 takes the reload there) on the kinds that
// reach its factor's edges.
template <class T>
void check_past_cache() {
  const std::size_t n = (std::size_t(32) << 20) / sizeof(T) + 3;
  if (smax_test::max_n() < n) {
    WARN("SKIPPED: n = " << n << " is above SMAX_TEST_MAX_N = " << smax_test::max_n());
    return;
  }
  auto calls = smax_test::every_function<T>();
  calls.erase(std::remove_if(calls.begin(), calls.end(),
                             [](const smax_test::family_call<T>& c) { return c.name.find("sa_softmax") == std::string::npos; }),
              calls.end());
  REQUIRE(calls.size() == 4);
  for (int kind : {5, 6}) check_rows<T>(calls, kind, n);
}

}  // namespace

TEST_CASE("no subnormal output, same bits with FTZ/DAZ on wide logits (float)", "[subnormal]") { check_all<float>(); }
TEST_CASE("no subnormal output, same bits with FTZ/DAZ on wide logits (double)", "[subnormal]") { check_all<double>(); }
// Tiny upstream gradients (dy ~ normal(0, 1) 2^-110, double 2^-1000; bf16
// as float) on wide logits: every function (the forward ones ignore dy), no
// flag, no subnormal output, the same bits with FTZ/DAZ, and each result
// the unscaled one times 2^-110 (check_scaled). Also 2^-90 (double
// 2^-940): row constants (dots, means) between 2^digits and 2^(2 digits)
// times the smallest normal number, where a fused a b - c can still be
// subnormal.
template <class T>
void check_tiny_dy() {
  const auto calls = smax_test::every_function<T>();
  const bool is_double = sizeof(T) == 8;
  for (int e : {is_double ? -1000 : -110, is_double ? -940 : -90})
    for (int kind : {0, 1, 2}) check_rows<T>(calls, kind, 4100, e);
}
TEMPLATE_TEST_CASE("no subnormal from a tiny dy", "[subnormal]", float, double, smax::bf16) {
  check_tiny_dy<TestType>();
}
// Every function on bf16 / fp16 arrays, the same logits rounded to 16 bits.
TEMPLATE_TEST_CASE("no subnormal output, same bits with FTZ/DAZ on wide logits (16-bit)", "[subnormal][half]", smax::bf16,
                   smax::fp16) {
  check_all<TestType>();
}
TEMPLATE_TEST_CASE("no subnormal output past the cache: sa_softmax", "[subnormal][large]", float, double) {
  check_past_cache<TestType>();
}

// log_softmax on a row whose max lies below 2^(mantissa bits + 2) times
// the smallest normal number, with entries closer to it than that number:
// x - m would be subnormal there (found by the sanitized build at -O1,
// logits |normal(0, 1)| 2^-120, n = 16388). No flag, the same bits with
// FTZ/DAZ, and the long-double result: within `rel` relative, or 1e-30
// absolute for the outputs below it (0 included). `call(y)` writes y.
template <class Y, class Call>
void check_tiny_log_rows(const std::vector<long double>& ref, long double rel, Call&& call) {
  const std::size_t n = ref.size();
  std::vector<Y> y(n), flushed(n);
  {
    const subnormal_flags flag(false);
    call(y.data());
    CHECK_FALSE(flag.raised());
  }
  std::size_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    long double v;
    if constexpr (std::is_floating_point<Y>::value)
      v = y[i];
    else
      v = static_cast<float>(y[i]);
    const long double err = std::fabs(v - ref[i]);
    bad += std::fabs(ref[i]) > 1e-30L ? !(err <= rel * std::fabs(ref[i])) : !(err <= 1e-30L);
  }
  CHECK(bad == 0);
  if (have_ftz) {
    {
      fp_flush_scope ftz(true);
      call(flushed.data());
    }
    CHECK(std::memcmp(y.data(), flushed.data(), n * sizeof(Y)) == 0);
  }
}

// The row lengths: short, in cache, and (where the cap allows) past the
// batched form's split into blocks (2^18 columns).
std::vector<std::size_t> tiny_log_lengths() {
  std::vector<std::size_t> ns{2, 3, 17, 4099, 16388};
  if (smax_test::max_n() >= 262147) ns.push_back(262147);
  return ns;
}

// (long double's log-probabilities of T's values: ref_log_softmax widens)
TEMPLATE_TEST_CASE("log_softmax of logits all below 2^-100: no subnormal difference", "[subnormal]", float, double) {
  using T = TestType;
  const T mn = std::numeric_limits<T>::min();
  const T m = T(1.5) * std::ldexp(mn, 20);
  for (std::size_t n : tiny_log_lengths()) {
    std::vector<T> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = m - static_cast<T>(i % 7) * (mn / 4);  // (exact)
    x[n - 1] = T(-200);  // n = 2: the log-sum below the smallest normal number
    if (n > 3) x[n / 2] = T(-3);
    const std::vector<long double> ref = smax_test::ref_log_softmax(x);
    for (const std::string& isa : smax_test::isas()) {
      smax_test::use_isa scope(isa);
      CAPTURE(isa, n);
      check_tiny_log_rows<T>(ref, 0x1p-22L, [&](T* y) { smax::dynamic::log_softmax(x.data(), y, n); });
      // one row of the batched form (blocks of the row beyond 2^18)
      check_tiny_log_rows<T>(ref, 0x1p-22L, [&](T* y) {
        smax::dynamic::log_softmax(smax::matrix_view<const T>(x.data(), 1, n), smax::matrix_view<T>(y, 1, n));
      });
    }
  }
}

// The 16-bit log_softmax (bf16 has float's range) on such rows: entries k
// 2^-127 apart below a max of 1.5 2^-120, bf16 outputs within half a bf16
// ulp (2^-8 relative, and the float kernel's 2^-22) and float outputs at
// the float bound.
TEST_CASE("16-bit log_softmax of logits all below 2^-100: no subnormal difference", "[subnormal][half]") {
  using smax::bf16;
  const float m = std::ldexp(1.5f, -120);
  for (std::size_t n : tiny_log_lengths()) {
    std::vector<float> xf(n);
    for (std::size_t i = 0; i < n; ++i) xf[i] = m - static_cast<float>(i % 7) * std::ldexp(1.0f, -127);
    xf[n - 1] = -200.0f;
    if (n > 3) xf[n / 2] = -3.0f;
    const std::vector<bf16> x = rounded<bf16>(xf);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(static_cast<float>(x[i]) == xf[i]);  // (exact in bf16)
    const std::vector<long double> ref = smax_test::ref_log_softmax(xf);
    for (const std::string& isa : smax_test::isas()) {
      smax_test::use_isa scope(isa);
      CAPTURE(isa, n);
      check_tiny_log_rows<bf16>(ref, 0x1p-8L + 0x1p-22L, [&](bf16* y) { smax::dynamic::log_softmax(x.data(), y, n); });
      check_tiny_log_rows<float>(ref, 0x1p-22L, [&](float* y) { smax::dynamic::log_softmax(x.data(), y, n); });
      check_tiny_log_rows<bf16>(ref, 0x1p-8L + 0x1p-22L, [&](bf16* y) {
        smax::dynamic::log_softmax(smax::matrix_view<const bf16>(x.data(), 1, n), smax::matrix_view<bf16>(y, 1, n));
      });
    }
  }
}

// The accuracy contract on such logits: outputs above 1e-30 within the
// per-element bound against long double, the rest (0 included) within 1e-30
// absolute; the sum within 1e-6.
TEMPLATE_TEST_CASE("softmax accuracy on logits reaching the subnormal band", "[subnormal][accuracy]", float) {
  using T = TestType;
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa scope(isa);
    for (int kind = 0; kind < 3; ++kind) {
      const std::size_t n = 65537;
      const std::vector<T> x = wide_logits<T>(n, kind, 5 + kind);
      const std::vector<long double> ref = smax_test::ref_softmax(x);
      const T m = *std::max_element(x.begin(), x.end());
      for (algorithm a : smax_test::algorithms()) {
        CAPTURE(isa, kind, smax_test::algorithm_name(a));
        std::vector<T> y(n);
        smax::dynamic::softmax(x.data(), y.data(), n, a);
        long double sum = 0;
        std::size_t bad = 0;
        for (std::size_t i = 0; i < n; ++i) {
          sum += y[i];
          const long double err = std::fabs(static_cast<long double>(y[i]) - ref[i]);
          if (ref[i] > 1e-30L) {
            const long double bound = (1e-6L + std::fabs(static_cast<long double>(x[i]) - m) * 0x1p-24L) * ref[i];
            bad += !(err <= bound);
          } else {
            bad += !(err <= 1e-30L);
          }
        }
        CHECK(bad == 0);
        CHECK(std::fabs(sum - 1.0L) <= 1e-6L);
      }
    }
  }
}

// stablemax_backward on rows at its edges (the plain form's row check,
// the checked and careful forms, stablemax.hpp): a row of dy near dy_floor
// whose differences dy - mean fall to an ulp beside an x of -2^30 (the
// plain products reached 2^-143, a subnormal output, until 2026-12-07), a
// mask of -2^30, one x at -2^50, near -max / 2 and +max / 2, one huge x (S
// near 2^60), every x far below 0 (m < 0), a tiny dy, a huge dy. No flag, no
// subnormal output, the same bits with FTZ/DAZ, and the long-double
// result within 2^-18 (double 2^-45) of each entry's scale s'(x) / S
// (|dy| + sum |dy_i| s_i / S), or 8 times the smallest normal number.
template <class T>
std::vector<long double> ref_stablemax_backward(const std::vector<T>& x, const std::vector<T>& dy,
                                                std::vector<long double>& scale) {
  const std::size_t n = x.size();
  std::vector<long double> s(n), out(n);
  long double S = 0, D = 0, A = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const long double v = x[i];
    s[i] = v >= 0 ? v + 1 : 1 / (1 - v);
    S += s[i];
  }
  for (std::size_t i = 0; i < n; ++i) {
    D += dy[i] * (s[i] / S);
    A += std::fabs(static_cast<long double>(dy[i])) * (s[i] / S);
  }
  scale.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const long double d = x[i] >= 0 ? 1 / S : s[i] * (s[i] / S);
    out[i] = d * (dy[i] - D);
    scale[i] = d * (std::fabs(static_cast<long double>(dy[i])) + A);
  }
  return out;
}

template <class T>
void check_stablemax_backward_edges() {
  const bool f32 = sizeof(T) == 4;
  const T big = std::numeric_limits<T>::max();
  const int k = f32 ? 1 : 10;  // (double: the exponents below times ten, about)
  const T floor_dy = static_cast<T>(f32 ? 0x1p-60 : 0x1p-500);
  const long double rel = f32 ? 0x1p-18L : 0x1p-45L;
  for (std::size_t n : {std::size_t(37), std::size_t(4100)}) {
    std::vector<std::pair<std::string, std::pair<std::vector<T>, std::vector<T>>>> rows;
    const auto x0 = smax_test::normal<T>(n, 20.0, 11 + n);
    const auto dy0 = smax_test::normal<T>(n, 1.0, 12 + n);
    {  // dy near the floor, nearly equal, beside x = -2^30 (double -2^300)
      std::vector<T> x(n, T(0)), dy(n);
      for (std::size_t i = 1; i < n; i += 2) x[i] = -std::ldexp(T(1), 30 * k);
      for (std::size_t i = 0; i < n; ++i) dy[i] = floor_dy * (T(1) + static_cast<T>(i % 5) * std::numeric_limits<T>::epsilon());
      rows.push_back({"tiny differences beside x = -2^30", {x, dy}});
    }
    {  // a mask of -2^30 (about -1e9; double -2^300) on every fifth entry:
       // the checked pass 2, and its per-vector products by mul_normal
       // beside dy near-equal at 2^-40 (double 2^-400), where |h| is tiny
      std::vector<T> x = x0, dy(n);
      for (std::size_t i = 0; i < n; i += 5) x[i] = -std::ldexp(T(1), 30 * k);
      rows.push_back({"a mask of -2^30", {x, dy0}});
      for (std::size_t i = 0; i < n; ++i)
        dy[i] = std::ldexp(T(1), -40 * k) * (T(1) + static_cast<T>(i % 5) * std::numeric_limits<T>::epsilon());
      rows.push_back({"a mask of -2^30 beside dy near-equal", {x, dy}});
    }
    {  // a dot below the normal range of double: one x at -2^83 (double
       // -2^830) holding the only nonzero dy, 2^-33 (double 2^-330; the
       // unlifted double sums were subnormal, found in review)
      std::vector<T> x = x0, dy(n, T(0));
      x[n / 3] = -std::ldexp(T(1), 83 * k);
      dy[n / 3] = std::ldexp(T(1), -33 * k);
      rows.push_back({"a lone dy beside x = -2^83", {x, dy}});
    }
    const auto with_x = [&](const char* name, T v) {
      std::vector<T> x = x0;
      x[n / 3] = v;
      rows.push_back({name, {x, dy0}});
    };
    with_x("one x at -2^50 (double -2^500)", -std::ldexp(T(1), f32 ? 50 : 500));
    with_x("one x at -max / 2", -big / 2);
    with_x("one x at +max / 2", big / 2);
    with_x("one x at 2^60 (double 2^600)", std::ldexp(T(1), 60 * k));
    {
      std::vector<T> x = x0;
      for (auto& v : x) v = -std::ldexp(T(1), 90 * k) * (T(1) + std::fabs(v) / T(64));
      rows.push_back({"every x far below 0", {x, dy0}});
    }
    {
      std::vector<T> dy = dy0;
      for (auto& v : dy) v = std::ldexp(v, -70 * k);
      rows.push_back({"a tiny dy", {x0, dy}});
      std::vector<T> x = x0;
      x[n / 2] = -std::ldexp(T(1), 40 * k);
      rows.push_back({"a tiny dy beside x = -2^40", {x, dy}});
    }
    {
      std::vector<T> dy = dy0;
      for (auto& v : dy) v = std::ldexp(v, 100 * k);
      dy[n / 4] = big / 4;
      rows.push_back({"a huge dy", {x0, dy}});
    }
    for (const auto& row : rows) {
      const std::vector<T>& x = row.second.first;
      const std::vector<T>& dy = row.second.second;
      std::vector<long double> scale;
      const std::vector<long double> ref = ref_stablemax_backward(x, dy, scale);
      for (const std::string& isa : smax_test::isas()) {
        smax_test::use_isa use(isa);
        CAPTURE(isa, row.first, n);
        std::vector<T> dx(n), flushed(n);
        {
          const subnormal_flags flag(std::getenv("SMAX_TEST_SUBNORMAL_TRAP") != nullptr);
          smax::dynamic::stablemax_backward(x.data(), dy.data(), dx.data(), n);
          CHECK_FALSE(flag.raised());
        }
        std::size_t n_sub = 0, bad = 0, first = n;
        for (std::size_t i = 0; i < n; ++i) {
          n_sub += is_subnormal(dx[i]);
          const long double err = std::fabs(static_cast<long double>(dx[i]) - ref[i]);
          if (!(err <= rel * scale[i] + 8 * static_cast<long double>(std::numeric_limits<T>::min())) && bad++ == 0) first = i;
        }
        CAPTURE(first, first < n ? static_cast<double>(dx[first]) : 0.0, first < n ? static_cast<double>(ref[first]) : 0.0);
        CHECK(n_sub == 0);
        CHECK(bad == 0);
        if (have_ftz) {
          {
            fp_flush_scope ftz(true);
            smax::dynamic::stablemax_backward(x.data(), dy.data(), flushed.data(), n);
          }
          CHECK(std::memcmp(dx.data(), flushed.data(), n * sizeof(T)) == 0);
        }
      }
    }
  }
}
TEMPLATE_TEST_CASE("stablemax_backward at its edges: no subnormal, the long-double result", "[subnormal][stablemax]",
                   float, double) {
  check_stablemax_backward_edges<TestType>();
}

// stablemax's pass 2 at its edges: one x at 2^80 (double 2^700: a sum
// beyond 2^62, where the lanes of x >= 0 divided 1/sum by 1 - x, a
// subnormal, on AVX2 and SSE2 until 2026-12-07), at -2^120, -max / 2 and
// +max / 2 (SSE2's pass 1 took 1 / (1 - x) unlifted). No flag, no
// subnormal output, the same bits with FTZ/DAZ, each output within 2^-20
// (double 2^-48) relative of long double, or 8 times the smallest normal.
TEMPLATE_TEST_CASE("stablemax at its edges: no subnormal, the long-double result", "[subnormal][stablemax]", float,
                   double) {
  using T = TestType;
  const bool f32 = sizeof(T) == 4;
  const T big = std::numeric_limits<T>::max();
  const long double rel = f32 ? 0x1p-20L : 0x1p-48L;
  for (std::size_t n : {std::size_t(37), std::size_t(4100)}) {
    const auto x0 = smax_test::normal<T>(n, 20.0, 21 + n);
    for (T v : {std::ldexp(T(1), f32 ? 80 : 700), -std::ldexp(T(1), f32 ? 120 : 1000), -big / 2, big / 2}) {
      std::vector<T> x = x0;
      x[n / 3] = v;
      long double S = 0;
      std::vector<long double> s(n);
      for (std::size_t i = 0; i < n; ++i) {
        const long double u = x[i];
        s[i] = u >= 0 ? u + 1 : 1 / (1 - u);
        S += s[i];
      }
      for (const std::string& isa : smax_test::isas()) {
        smax_test::use_isa use(isa);
        CAPTURE(isa, static_cast<double>(v), n);
        std::vector<T> y(n), flushed(n);
        {
          const subnormal_flags flag(std::getenv("SMAX_TEST_SUBNORMAL_TRAP") != nullptr);
          smax::dynamic::stablemax(x.data(), y.data(), n);
          CHECK_FALSE(flag.raised());
        }
        std::size_t n_sub = 0, bad = 0;
        for (std::size_t i = 0; i < n; ++i) {
          n_sub += is_subnormal(y[i]);
          const long double want = s[i] / S, err = std::fabs(static_cast<long double>(y[i]) - want);
          bad += !(err <= rel * want + 8 * static_cast<long double>(std::numeric_limits<T>::min()));
        }
        CHECK(n_sub == 0);
        CHECK(bad == 0);
        if (have_ftz) {
          {
            fp_flush_scope ftz(true);
            smax::dynamic::stablemax(x.data(), flushed.data(), n);
          }
          CHECK(std::memcmp(y.data(), flushed.data(), n * sizeof(T)) == 0);
        }
      }
    }
  }
}
