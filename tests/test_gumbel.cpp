// gumbel_noise and gumbel_softmax through smax::dynamic on every ISA the CPU
// has, float and double.
//
// Bits: a scalar reference written here from the published Philox4x32-10
// (checked against the Random123 known-answer vectors) and the layout and
// log of smax/detail/gumbel.hpp, with every product forced to round on its own
// (volatile), must equal the kernels' output bit for bit on every ISA, and
// both must equal golden values (hashes and a few bit patterns) that were
// produced by this reference and are checked the same way by the NEON
// build under QEMU: x86 and NEON are held to the same numbers.
// Then: any split of the work gives the same bits, seeds differ, g is
// finite, its moments are the Gumbel ones, the log is accurate against long
// double, gumbel_softmax equals softmax((x + g) / tau), hard gives the
// one-hot of the first argmax, and argmax frequencies over many seeds match
// softmax(x) by a chi-square test.
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <smax/detail/gumbel.hpp>
#include <smax/detail/log.hpp>

#include "variants_common.hpp"

namespace {

using variants_test::ld;
using variants_test::type_name;

// ----------------------------------------------------- scalar reference --

void philox4x32_10(std::uint32_t ctr[4], const std::uint32_t key_in[2]) {
  std::uint32_t k0 = key_in[0], k1 = key_in[1];
  for (int r = 0; r < 10; ++r) {
    const std::uint64_t p0 = std::uint64_t(0xD2511F53u) * ctr[0];
    const std::uint64_t p1 = std::uint64_t(0xCD9E8D57u) * ctr[2];
    const std::uint32_t hi0 = std::uint32_t(p0 >> 32), lo0 = std::uint32_t(p0);
    const std::uint32_t hi1 = std::uint32_t(p1 >> 32), lo1 = std::uint32_t(p1);
    const std::uint32_t c1 = ctr[1], c3 = ctr[3];
    ctr[0] = hi1 ^ c1 ^ k0;
    ctr[1] = lo1;
    ctr[2] = hi0 ^ c3 ^ k1;
    ctr[3] = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

// A product rounded to T on its own (never fused into an FMA).
template <class T>
T mul(T a, T b) {
  volatile T p = a * b;
  return p;
}

template <class T, class U>
T from_bits(U u) {
  T t;
  std::memcpy(&t, &u, sizeof(T));
  return t;
}
template <class T, class U>
U to_bits(T t) {
  U u = 0;
  std::memcpy(&u, &t, sizeof(T));
  return u;
}

// -log(x) as smax/detail/log.hpp computes it for gumbel_noise, one operation at a
// time: float in the fused form (std::fma is correctly rounded, like the FMA
// instructions and SSE2's exact emulation), double in the strict form.
template <class T>
void ref_reduce(T x, T& f, T& k) {
  using C = smax::detail::log_constants<T>;
  using U = typename C::uint_type;
  const U shifted = to_bits<T, U>(x) + U(C::one_bits - C::sqrt_half_bits);
  f = from_bits<T>((shifted & ((U(1) << C::mantissa_bits) - 1)) + C::sqrt_half_bits) - T(1);
  k = from_bits<T>((shifted >> C::mantissa_bits) | C::magic_bits) - (C::magic + T(C::exponent_bias));
}

float ref_neglog(float x) {
  using C = smax::detail::log_constants<float>;
  float f, k;
  ref_reduce(x, f, k);
  const float s = f / (f + 2.0f);
  const float z = mul(s, s);
  float r = 2.0f / float(2 * C::terms + 1);
  for (int j = C::terms - 1; j >= 1; --j) r = std::fma(r, z, 2.0f / float(2 * j + 1));
  const float half_f = mul(f, 0.5f);
  const float q = std::fma(r, z, mul(half_f, f));
  const float t = std::fma(s, q, mul(k, C::ln2_lo));
  const float a = std::fma(half_f, f, -t);
  return std::fma(k, -C::ln2_hi, a - f);
}

double ref_neglog(double x) {
  using C = smax::detail::log_constants<double>;
  double f, k;
  ref_reduce(x, f, k);
  const double s = f / (f + 2.0);
  const double z = mul(s, s);
  double r = 2.0 / double(2 * C::terms + 1);
  for (int j = C::terms - 1; j >= 1; --j) r = mul(r, z) + 2.0 / double(2 * j + 1);
  r = mul(r, z);
  const double hf = mul(mul(0.5, f), f);
  const double klo = mul(k, C::ln2_lo);
  const double khi = mul(k, C::ln2_hi);
  return ((hf - (mul(s, hf + r) + klo)) - f) - khi;
}

// The uniform of element j (the layout of smax/detail/gumbel.hpp).
float ref_uniform_f(std::uint64_t seed, std::uint64_t j) {
  const std::uint64_t q = j / 64, r = j % 64, c = 16 * q + r % 16;
  std::uint32_t ctr[4] = {std::uint32_t(c), std::uint32_t(c >> 32), 0, 0};
  const std::uint32_t key[2] = {std::uint32_t(seed), std::uint32_t(seed >> 32)};
  philox4x32_10(ctr, key);
  const std::uint32_t w = ctr[r / 16];
  return from_bits<float>((w >> 9) | 0x3f800000u) - 0x1.fffffep-1f;
}
double ref_uniform_d(std::uint64_t seed, std::uint64_t j) {
  const std::uint64_t q = j / 32, r = j % 32, c = 16 * q + r % 16;
  std::uint32_t ctr[4] = {std::uint32_t(c), std::uint32_t(c >> 32), 0, 0};
  const std::uint32_t key[2] = {std::uint32_t(seed), std::uint32_t(seed >> 32)};
  philox4x32_10(ctr, key);
  const std::uint64_t lo = ctr[2 * (r / 16)], hi = ctr[2 * (r / 16) + 1];
  return from_bits<double>((hi << 20) | (lo >> 12) | 0x3ff0000000000000ull) - 0x1.fffffffffffffp-1;
}

template <class T>
T ref_uniform(std::uint64_t seed, std::uint64_t j) {
  if constexpr (std::is_same<T, float>::value)
    return ref_uniform_f(seed, j);
  else
    return ref_uniform_d(seed, j);
}

template <class T>
std::vector<T> ref_noise(std::size_t n, std::uint64_t seed, std::uint64_t offset) {
  std::vector<T> g(n);
  for (std::size_t i = 0; i < n; ++i) g[i] = ref_neglog(ref_neglog(ref_uniform<T>(seed, offset + i)));
  return g;
}

template <class T>
std::vector<T> noise(std::size_t n, std::uint64_t seed, std::uint64_t offset = 0) {
  std::vector<T> g(n, T(-99));
  smax::dynamic::gumbel_noise(g.data(), n, seed, offset);
  return g;
}

// ---------------------------------------------------------------- tests --

TEST_CASE("philox4x32-10 reference matches the Random123 known answers", "[gumbel]") {
  // Random123 tests/kat_vectors, the three "philox4x32 10" lines.
  struct kat {
    std::uint32_t ctr[4], key[2], out[4];
  };
  const kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const kat& k : kats) {
    std::uint32_t c[4] = {k.ctr[0], k.ctr[1], k.ctr[2], k.ctr[3]};
    philox4x32_10(c, k.key);
    for (int i = 0; i < 4; ++i) CHECK(c[i] == k.out[i]);
  }
}

// Golden values: produced by the reference above (seed 42, offset 7,
// 1000003 elements); the NEON build checks the same numbers.
template <class T>
struct golden;
template <>
struct golden<float> {
  static constexpr std::uint64_t hash = 0xbd89ad952062e85eull;
  static constexpr float first[3] = {-0x1.a7fce4p-6f, 0x1.044ba6p-1f, -0x1.1e9788p-2f};
};
template <>
struct golden<double> {
  static constexpr std::uint64_t hash = 0x7031726b269baa07ull;
  static constexpr double first[3] = {0x1.c0879c88d6208p-4, -0x1.64bc5d65ceeb9p-1, 0x1.3c80534c3acaap-4};
};

template <class T>
void bits_everywhere() {
  const std::size_t big = 1000003;
  const std::vector<T> ref_big = ref_noise<T>(big, 42, 7);
  CHECK(variants_test::hash_bits(ref_big) == golden<T>::hash);
  for (int i = 0; i < 3; ++i) CHECK(to_bits<T, std::uint64_t>(ref_big[i]) == to_bits<T, std::uint64_t>(golden<T>::first[i]));
  const std::uint64_t offsets[] = {0, 1, 15, 63, 64, 1000, 0xFFFFFFFFull * 16 - 5, ~std::uint64_t(0) - 40};
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO(type_name<T>() << " " << isa);
    CHECK(variants_test::hash_bits(noise<T>(big, 42, 7)) == golden<T>::hash);
    for (std::size_t n : smax_test::sizes())
      for (std::uint64_t off : offsets) {
        INFO("n = " << n << " offset = " << off);
        CHECK(smax_test::same_bits(noise<T>(n, 0x0123456789abcdefull, off), ref_noise<T>(n, 0x0123456789abcdefull, off)));
      }
    // Misaligned output, guards intact.
    smax_test::guarded<T> g(1000, 1, T(-5));
    smax::dynamic::gumbel_noise(g.data(), 1000, 9, 3);
    CHECK(smax_test::same_bits(g.values(), ref_noise<T>(1000, 9, 3)));
    CHECK(g.intact());
  }
}

TEST_CASE("gumbel_noise: the same bits on every ISA, equal to the reference and the golden values", "[gumbel]") {
  bits_everywhere<float>();
  bits_everywhere<double>();
}

template <class T>
void splits_and_seeds() {
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO(type_name<T>() << " " << isa);
    const std::size_t n = 5000;
    const std::uint64_t off = 77;
    const std::vector<T> whole = noise<T>(n, 5, off);
    // Any split: pieces of irregular sizes, each with its own offset.
    std::mt19937_64 rng(3);
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<T> parts(n, T(-99));
      std::size_t i = 0;
      while (i < n) {
        const std::size_t len = std::min<std::size_t>(n - i, rng() % 150);
        smax::dynamic::gumbel_noise(parts.data() + i, len, 5, off + i);
        i += len;
      }
      CHECK(smax_test::same_bits(parts, whole));
    }
    // gumbel_noise(g + k, n - k, seed, offset + k) is the tail.
    for (std::size_t k : {1, 17, 64, 999}) {
      const std::vector<T> tail = noise<T>(n - k, 5, off + k);
      CHECK(smax_test::same_bits(tail, std::vector<T>(whole.begin() + k, whole.end())));
    }
    // Different seeds differ (a coincidence rate of about 2^-23 per pair).
    const std::vector<T> other = noise<T>(n, 6, off);
    std::size_t equal = 0;
    for (std::size_t k = 0; k < n; ++k) equal += (other[k] == whole[k]);
    CHECK(equal <= 2);
    // Seeds differing in the high word only differ as well.
    const std::vector<T> high = noise<T>(n, 5 + (std::uint64_t(1) << 32), off);
    equal = 0;
    for (std::size_t k = 0; k < n; ++k) equal += (high[k] == whole[k]);
    CHECK(equal <= 2);
  }
}

TEST_CASE("gumbel_noise: any split of the work gives the same bits; seeds differ", "[gumbel]") {
  splits_and_seeds<float>();
  splits_and_seeds<double>();
}

template <class T>
void accuracy_and_range(variants_test::worst_table& table) {
  // u strictly inside (0, 1), g finite: the extreme uniforms through the
  // kernel's transform on this TU's default ISA, and through the reference.
  using B = xsimd::batch<T, xsimd::default_arch>;
  const T eps = std::numeric_limits<T>::epsilon();
  const T lo = std::is_same<T, float>::value ? T(0x1p-24) : T(0x1p-53);
  for (T u : {lo, T(1) - lo, T(0.5), T(1) - 3 * lo}) {
    const T g = smax::detail::gumbel_of_uniform<xsimd::default_arch, T>(B(u)).get(0);
    CHECK(std::isfinite(g));
    CHECK(to_bits<T, std::uint64_t>(g) == to_bits<T, std::uint64_t>(ref_neglog(ref_neglog(u))));
  }
  // Accuracy of g = -log(-log u) against long double over 2M samples: the
  // error of -log u (relative) becomes an absolute error of g, so the
  // bound is in units of eps (1 + |g|).
  const std::size_t n = std::min<std::size_t>(smax_test::max_n(), 2000000);
  const std::vector<T> g = noise<T>(n, 1234, 0);
  double worst = 0, mean = 0, var = 0;
  T gmin = g[0], gmax = g[0];
  for (std::size_t i = 0; i < n; ++i) {
    const ld u = ref_uniform<T>(1234, i);
    const ld r = -std::log(-std::log(u));
    worst = std::max(worst, static_cast<double>(std::fabs(g[i] - r) / (eps * (1 + std::fabs(r)))));
    mean += g[i];
    gmin = std::min(gmin, g[i]);
    gmax = std::max(gmax, g[i]);
  }
  mean /= static_cast<double>(n);
  for (T v : g) var += (v - mean) * (v - mean);
  var /= static_cast<double>(n - 1);
  table.add(std::string(type_name<T>()) + " |g - ref| / (eps (1 + |g|))", worst);
  CHECK(worst <= 2.0);
  CHECK(variants_test::all_finite(g));
  // Bounds: u in [lo, 1 - lo].
  CHECK(gmin >= -std::log(-std::log(static_cast<double>(lo))) - 1e-6);
  CHECK(gmax <= -std::log(-std::log1p(-static_cast<double>(lo))) + 1e-6);
  // Moments of the standard Gumbel: mean = Euler's gamma, variance pi^2/6,
  // within 5 standard errors (sd of g: 1.28; of the sample variance:
  // sqrt((mu4 - sigma^4) / n) = sqrt(4.4) sigma^2 / sqrt(n), excess
  // kurtosis 2.4).
  const double rn = std::sqrt(static_cast<double>(n));
  CHECK(std::fabs(mean - 0.5772156649) <= 5 * 1.2826 / rn);
  CHECK(std::fabs(var - 1.6449340668) <= 5 * 2.098 * 1.6449 / rn);
}

TEST_CASE("gumbel_noise: accurate, finite, Gumbel-distributed", "[gumbel][accuracy]") {
  variants_test::worst_table table("gumbel_noise: worst error of -log(-log u) against long double");
  accuracy_and_range<float>(table);
  accuracy_and_range<double>(table);
}

// Long-double softmax((x + g) / tau) with z = x + g as the kernel forms it
// (in T), for finite x.
template <class T>
std::vector<ld> ref_gumbel_softmax(const std::vector<T>& x, const std::vector<T>& g, T tau) {
  std::vector<ld> z(x.size());
  ld m = -std::numeric_limits<ld>::infinity();
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, z[i] = static_cast<ld>(T(x[i] + g[i])) / tau);
  ld s = 0;
  for (auto& v : z) s += (v = std::exp(v - m));
  for (auto& v : z) v /= s;
  return z;
}

template <class T>
std::vector<T> gsoftmax(const std::vector<T>& x, T tau, std::uint64_t seed, bool hard) {
  std::vector<T> y(x.size(), T(-7));
  smax::dynamic::gumbel_softmax(x.data(), y.data(), x.size(), tau, seed, hard);
  return y;
}

template <class T>
void softmax_of_noise(variants_test::worst_table& table) {
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    std::vector<std::size_t> ns = smax_test::sizes_up_to_max();
    ns.push_back(std::min<std::size_t>(smax_test::max_n(), 1 << 20));
    for (std::size_t n : ns) {
      const std::vector<T> x = smax_test::normal<T>(n, 2.0, n + 41);
      const std::vector<T> g = noise<T>(n, n + 5);
      for (T tau : {T(0.1), T(1), T(10)}) {
        INFO(type_name<T>() << " " << isa << " n = " << n << " tau = " << tau);
        const std::vector<T> y = gsoftmax(x, tau, n + 5, false);
        const std::vector<ld> ref = ref_gumbel_softmax(x, g, tau);
        // Two roundings of the exponent (z = x + g in T is the reference's
        // own input; 1/tau and, on SSE2, z / tau): |z_i / tau| + |max| u.
        ld zmax = 0;
        for (std::size_t i = 0; i < n; ++i) zmax = std::max<ld>(zmax, std::fabs(T(x[i] + g[i]) / static_cast<ld>(tau)));
        const double u = std::is_same<T, float>::value ? 0x1p-24 : 0x1p-53;
        const double rel = std::is_same<T, float>::value ? 1e-6 : 2e-14;
        double worst = 0;
        for (std::size_t i = 0; i < n; ++i) {
          if (ref[i] <= 1e-30L) {
            CHECK((y[i] >= 0 && y[i] <= 2e-30));
            continue;
          }
          const ld zi = std::fabs(T(x[i] + g[i]) / static_cast<ld>(tau));
          const double allow = rel + static_cast<double>((zi + zmax) * 2 * u);
          worst = std::max(worst, static_cast<double>(std::fabs((y[i] - ref[i]) / ref[i])) / allow);
        }
        table.add(std::string(type_name<T>()) + " " + isa + " (in units of the bound)", worst);
        CHECK(worst <= 1.0);
        // In place and misaligned: the same bits.
        variants_test::misaligned<T> m(x);
        smax::dynamic::gumbel_softmax(m.p, m.p, n, tau, n + 5);
        CHECK(smax_test::same_bits(m.values(n), y));
      }
      // hard: the one-hot of the first argmax of z = x + g (in T).
      const std::vector<T> h = gsoftmax(x, T(0.5), n + 5, true);
      std::size_t best = 0;
      for (std::size_t i = 1; i < n; ++i)
        if (T(x[i] + g[i]) > T(x[best] + g[best])) best = i;
      for (std::size_t i = 0; i < n; ++i) CHECK(h[i] == (i == best ? T(1) : T(0)));
    }
  }
}

TEST_CASE("gumbel_softmax equals softmax((x + gumbel_noise) / tau); hard is its argmax", "[gumbel][accuracy]") {
  variants_test::worst_table table("gumbel_softmax: worst relative error / bound");
  softmax_of_noise<float>(table);
  softmax_of_noise<double>(table);
}

template <class T>
void special_values() {
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr T nan = std::numeric_limits<T>::quiet_NaN();
  const T mx = std::numeric_limits<T>::max();
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(64), std::size_t(100)}) {
      INFO(type_name<T>() << " " << isa << " n = " << n);
      std::vector<T> x = smax_test::normal<T>(n, 1.0, n);
      x[n - 1] = nan;
      CHECK(variants_test::all_nan(gsoftmax(x, T(1), 3, false)));
      CHECK(variants_test::all_nan(gsoftmax(x, T(1), 3, true)));
      // +inf logits share the mass (hard: the first of them).
      x = smax_test::normal<T>(n, 1.0, n);
      x[n - 1] = inf;
      if (n > 2) x[1] = inf;
      const std::size_t count = n > 2 ? 2 : 1;
      std::vector<T> y = gsoftmax(x, T(1), 3, false);
      for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == (x[i] == inf ? T(1.0 / count) : T(0)));
      y = gsoftmax(x, T(1), 3, true);
      for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == (i == (n > 2 ? 1 : n - 1) ? T(1) : T(0)));
      // -inf logits get 0 and are never sampled; all -inf: all 0.
      x = smax_test::normal<T>(n, 1.0, n);
      x[0] = -inf;
      y = gsoftmax(x, T(1), 3, false);
      CHECK(y[0] == T(0));
      for (std::uint64_t seed = 0; seed < 20; ++seed) CHECK(gsoftmax(x, T(1), seed, true)[0] == T(0));
      for (T v : gsoftmax(std::vector<T>(n, -inf), T(1), 3, false)) CHECK(v == T(0));
      for (T v : gsoftmax(std::vector<T>(n, -inf), T(1), 3, true)) CHECK(v == T(0));
      // A huge tau (1 / tau below 4096 / max): still 0 for -inf, the rest
      // all but uniform; in place the same bits.
      if (n > 1) {
        const T huge_tau = mx / T(4096) * T(1000);
        y = gsoftmax(x, huge_tau, 3, false);
        CHECK(y[0] == T(0));
        for (std::size_t i = 1; i < n; ++i) CHECK(std::fabs(y[i] * T(n - 1) - T(1)) <= T(1e-5));
        std::vector<T> in(x);
        smax::dynamic::gumbel_softmax(in.data(), in.data(), n, huge_tau, 3);
        CHECK(smax_test::same_bits(in, y));
        // z spanning more than max: c z still resolves it (y = e^-8.2 / (1
        // + e^-8.2) and its complement: c (2 max) = 8.192 at this tau).
        const std::vector<T> wide = {-mx, mx};
        const std::vector<ld> ref = ref_gumbel_softmax(wide, noise<T>(2, 3), huge_tau);
        CHECK(variants_test::rel_err(gsoftmax(wide, huge_tau, 3, false), ref) <=
              (std::is_same<T, float>::value ? 1e-5 : 1e-13));
      }
      // Huge logits and a tiny tau: no overflow.
      x = smax_test::normal<T>(n, 1.0, n);
      x[0] = mx;
      if (n > 1) x[n / 2] = -mx;
      y = gsoftmax(x, T(1e-3), 3, false);
      CHECK(variants_test::all_finite(y));
      CHECK(y[0] == T(1));
      y = gsoftmax(x, std::numeric_limits<T>::denorm_min(), 3, false);
      CHECK(variants_test::all_finite(y));
    }
    // Bad tau; n = 0.
    std::vector<T> x(4, T(1)), y(4);
    for (T bad : {T(0), T(-1), nan, inf}) {
      CHECK_THROWS_AS(smax::dynamic::gumbel_softmax(x.data(), y.data(), 4, bad, 1), std::invalid_argument);
      CHECK_THROWS_WITH(smax::dynamic::gumbel_softmax(x.data(), y.data(), 4, bad, 1, true), Catch::Contains("tau"));
    }
    smax::dynamic::gumbel_softmax(static_cast<const T*>(nullptr), static_cast<T*>(nullptr), 0, T(1), 1);
    smax::dynamic::gumbel_noise(static_cast<T*>(nullptr), 0, 1, 5);
  }
}

TEST_CASE("gumbel_softmax special values and bad tau", "[gumbel]") {
  special_values<float>();
  special_values<double>();
}

// Pearson chi-square of observed counts against probabilities.
double chi_square(const std::vector<std::size_t>& counts, const std::vector<double>& p, std::size_t draws) {
  double c2 = 0;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    const double e = p[k] * static_cast<double>(draws);
    c2 += (static_cast<double>(counts[k]) - e) * (static_cast<double>(counts[k]) - e) / e;
  }
  return c2;
}

TEST_CASE("gumbel_softmax hard: argmax frequencies match softmax(x) (chi-square)", "[gumbel]") {
  // Gumbel-max: argmax(x + g) ~ Categorical(softmax(x)). 20000 fixed seeds,
  // 6 categories (5 degrees of freedom): chi-square below 20.52 (p = 0.001).
  // The same counts against a wrong distribution (the logits shifted by a
  // little) must fail, so the test has power.
  const std::vector<double> logits = {1.0, 0.0, -1.0, 0.5, 2.0, -0.5};
  const std::size_t K = logits.size(), draws = 20000;
  std::vector<double> p(K), wrong(K);
  double s = 0, sw = 0;
  for (std::size_t k = 0; k < K; ++k) s += (p[k] = std::exp(logits[k]));
  for (std::size_t k = 0; k < K; ++k) sw += (wrong[k] = std::exp(logits[k] * (k == 4 ? 0.9 : 1.0)));
  for (std::size_t k = 0; k < K; ++k) {
    p[k] /= s;
    wrong[k] /= sw;
  }
  for (const std::string& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    std::vector<std::size_t> cf(K), cd(K);
    const std::vector<float> xf(logits.begin(), logits.end());
    std::vector<float> yf(K);
    std::vector<double> yd(K);
    for (std::size_t seed = 0; seed < draws; ++seed) {
      smax::dynamic::gumbel_softmax(xf.data(), yf.data(), K, 1.0f, seed, true);
      smax::dynamic::gumbel_softmax(logits.data(), yd.data(), K, 1.0, seed, true);
      for (std::size_t k = 0; k < K; ++k) {
        cf[k] += yf[k] == 1.0f;
        cd[k] += yd[k] == 1.0;
      }
    }
    INFO(isa);
    const double c2f = chi_square(cf, p, draws), c2d = chi_square(cd, p, draws);
    CAPTURE(c2f, c2d);
    CHECK(c2f < 20.52);
    CHECK(c2d < 20.52);
    CHECK(chi_square(cf, wrong, draws) > 20.52);
    std::size_t total = 0;
    for (std::size_t c : cf) total += c;
    CHECK(total == draws);  // exactly one 1 per draw
  }
}

}  // namespace
