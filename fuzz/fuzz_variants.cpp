// libFuzzer target: stablemax, log_stablemax, softpick, ssmax, gumbel_noise,
// gumbel_softmax (soft and hard), stablemax_backward and softpick_backward,
// the seeds' family (sigmoid_attention, sa_softmax, multimax, asentmax),
// float and double, every ISA the CPU has, in place and not, misaligned,
// with guard regions. Checked against long-double references within the
// error bounds smax.hpp documents (with a margin: the unit tests pin the
// exact figures; this target hunts for garbage, crashes and broken rules),
// the special-value rules, the bad-argument rule (std::invalid_argument), and
// for gumbel_noise: bits independent of the ISA and of the split of the work.
#include "common.hpp"

#include <stdexcept>

namespace {

using ld = long double;
using smax_fuzz::fail;

template <class T>
constexpr ld eps_of() {
  return std::numeric_limits<T>::epsilon();
}

using smax_fuzz::param;

template <class T>
ld stable_s(ld v) {
  return v >= 0 ? v + 1 : 1 / (1 - v);
}

template <class T>
void fuzz_stablemax(smax_fuzz::stream& in, const std::vector<T>& x, bool in_place, std::size_t off) {
  const std::size_t n = x.size();
  const bool log = in.byte() & 1;
  const char* fn = log ? "log_stablemax" : "stablemax";
  const std::vector<T> y = smax_fuzz::run_guarded(x, in_place, off, fn, [&](const T* xp, T* yp) {
    if (log)
      smax::dynamic::log_stablemax(xp, yp, n);
    else
      smax::dynamic::stablemax(xp, yp, n);
  });
  if (smax_fuzz::check_special_softmax(x, y, log, fn)) return;
  ld S = 0;
  for (T v : x) S += stable_s<T>(v);
  const ld tol = sizeof(T) == 4 ? 2e-6L : 1e-13L;  // documented: 4e-7 float
  if (!log) {
    std::vector<ld> ref(n);
    for (std::size_t i = 0; i < n; ++i) ref[i] = stable_s<T>(x[i]) / S;
    smax_fuzz::check_relative(y, ref, [&](std::size_t) { return tol; }, fn);
    return;
  }
  // log: within a few ulp of max(|log s(x_i)|, |log S|) (documented: 2 ulp).
  // The reference needs the same care as the kernel: with one entry
  // dominating, S = s(m) (1 + R) with R below long double's epsilon would
  // round to s(m) (found: x = [-2^-149, 7 x -1.6e26] float, log S = 4.3e-26
  // lost), so log S = log s(m) + log1p(R), R = sum over the other entries of
  // s(x_j) / s(m), and y_i = (log s(x_i) - log s(m)) - log1p(R).
  const auto log_s = [](ld v) { return v >= 0 ? std::log1p(v) : -std::log1p(-v); };
  const T m = *std::max_element(x.begin(), x.end());
  ld R = 0;
  bool skipped = false;
  for (T v : x) {
    if (v == m && !skipped) {
      skipped = true;
      continue;
    }
    R += stable_s<T>(v) / stable_s<T>(m);
  }
  const ld lsm = log_s(m), l1p = std::log1p(R);
  const ld logS = lsm + l1p;
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i] == -std::numeric_limits<T>::infinity()) {
      if (y[i] != -std::numeric_limits<T>::infinity()) fail("log_stablemax: -inf entry not -inf");
      continue;
    }
    const ld ls = log_s(x[i]);
    const ld ref = (ls - lsm) - l1p;
    if (std::fabs(y[i] - ref) > 8 * eps_of<T>() * std::max(std::fabs(ls), std::fabs(logS)) + 1e-30L)
      fail("log_stablemax: error above the documented bound at " + std::to_string(i));
  }
}

// a = e^(x - M) - e^(-M) without cancellation, M = max(0, max x) >= 0.
ld softpick_a(ld x, ld M) {
  return std::fabs(x) < 1 ? std::exp(-M) * std::expm1(x) : std::exp(x - M) - std::exp(-M);
}

template <class T>
void fuzz_softpick(smax_fuzz::stream& in, const std::vector<T>& x, bool in_place, std::size_t off) {
  const std::size_t n = x.size();
  const T eps = param<T>(in, {T(1e-8), T(0), T(1e-3), T(1), T(1e6)});
  const bool bad = !(eps >= 0) || !std::isfinite(eps);
  std::vector<T> y;
  const bool threw = smax_fuzz::throws_invalid([&] {
    y = smax_fuzz::run_guarded(x, in_place, off, "softpick",
                               [&](const T* xp, T* yp) { smax::dynamic::softpick(xp, yp, n, eps); });
  });
  if (threw != bad) fail(bad ? "softpick: bad eps accepted" : "softpick: good eps refused");
  if (bad) return;
  if (smax_fuzz::any_nan(x)) return smax_fuzz::check_all_nan(y, "softpick");
  constexpr T inf = std::numeric_limits<T>::infinity();
  const std::size_t posinf = static_cast<std::size_t>(std::count(x.begin(), x.end(), inf));
  if (posinf) {
    const ld share = 1 / (static_cast<ld>(posinf) + eps);
    for (std::size_t i = 0; i < n; ++i) {
      const ld expect = x[i] == inf ? share : 0;
      if (std::fabs(y[i] - expect) > 4 * eps_of<T>() * expect) fail("softpick: +inf rule broken");
    }
    return;
  }
  ld M = 0;
  for (T v : x) M = std::max<ld>(M, v);
  ld D = 0;
  std::vector<ld> a(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = x[i] == -inf ? 0 : softpick_a(x[i], M);
    D += std::fabs(a[i]);
  }
  std::vector<ld> ref(n);
  for (std::size_t i = 0; i < n; ++i) {
    ref[i] = a[i] > 0 && D + eps > 0 ? a[i] / (D + eps) : 0;
    if (!(x[i] > 0) && y[i] != 0) fail("softpick: x <= 0 must give exactly 0");
  }
  const ld tol = sizeof(T) == 4 ? 4e-6L : 1e-12L;  // documented: 1e-6 float
  smax_fuzz::check_relative(y, ref, [&](std::size_t) { return tol; }, "softpick");
}

// Softmax of the long-double z (finite max); tol per element for an
// argument rounded in T: base + 2 eps (|z_i| + |max z|).
template <class T>
void check_softmax_of(const std::vector<ld>& z, const std::vector<T>& y, const char* fn) {
  ld m = -std::numeric_limits<ld>::infinity();
  for (ld v : z) m = std::max(m, v);
  ld s = 0;
  for (ld v : z) s += std::exp(v - m);
  std::vector<ld> ref(z.size());
  for (std::size_t i = 0; i < z.size(); ++i) ref[i] = std::exp(z[i] - m) / s;
  const ld base = sizeof(T) == 4 ? 4e-6L : 1e-12L;
  smax_fuzz::check_relative(
      y, ref, [&](std::size_t i) { return base + 2 * eps_of<T>() * (std::fabs(z[i]) + std::fabs(m)); }, fn);
  ld sum = 0;
  for (T v : y) sum += v;
  if (!y.empty() && std::fabs(sum - 1) > 1e-4L) fail(std::string(fn) + ": outputs do not sum to 1");
}

template <class T>
void fuzz_ssmax(smax_fuzz::stream& in, const std::vector<T>& x, bool in_place, std::size_t off) {
  const std::size_t n = x.size();
  const T s = param<T>(in, {T(0.43), T(1), T(-0.3), T(0), T(1e30), T(3)});
  const T b = param<T>(in, {T(0), T(0.5), T(-2), T(1e-3)});
  const double c_d = static_cast<double>(s) * std::log(static_cast<double>(n)) + static_cast<double>(b);
  const T c = static_cast<T>(c_d);
  const bool bad = !std::isfinite(s) || !std::isfinite(b) || (n > 0 && !std::isfinite(c));
  std::vector<T> y;
  const bool threw = smax_fuzz::throws_invalid([&] {
    y = smax_fuzz::run_guarded(x, in_place, off, "ssmax",
                               [&](const T* xp, T* yp) { smax::dynamic::ssmax(xp, yp, n, s, b); });
  });
  if (threw != bad) fail(bad ? "ssmax: bad s or b accepted" : "ssmax: good s and b refused");
  if (bad || n == 0) return;
  if (smax_fuzz::any_nan(x)) return smax_fuzz::check_all_nan(y, "ssmax");
  if (n == 1) {
    if (y[0] != 1 && std::isfinite(x[0])) fail("ssmax: n = 1 must give [1]");
    return;
  }
  const bool any_inf = std::any_of(x.begin(), x.end(), [](T v) { return std::isinf(v); });
  if (c == 0) {
    if (any_inf) return smax_fuzz::check_all_nan(y, "ssmax");
    for (T v : y)
      if (std::fabs(v - ld(1) / n) > 4 * eps_of<T>() / n) fail("ssmax: c = 0 must give 1/n");
    return;
  }
  // c < 0 flips the infinities: ssmax(x) with c is ssmax(-x) with -c.
  std::vector<T> xs = x;
  if (c < 0)
    for (T& v : xs) v = -v;
  if (smax_fuzz::check_special_softmax(xs, y, false, "ssmax")) return;
  std::vector<ld> z(n);
  for (std::size_t i = 0; i < n; ++i) z[i] = static_cast<ld>(std::fabs(c)) * xs[i];
  check_softmax_of<T>(z, y, "ssmax");
}

template <class T>
void fuzz_gumbel(smax_fuzz::stream& in, const std::vector<T>& x, bool in_place, std::size_t off) {
  const std::size_t n = x.size();
  const std::uint64_t seed = in.u64();
  // gumbel_noise: finite, independent of the split and of the ISA.
  const std::uint64_t goff = in.byte() & 1 ? in.u64() : in.byte();
  smax_fuzz::guarded<T> gb(n, off);
  smax::dynamic::gumbel_noise(gb.data(), n, seed, goff);
  gb.check_guards("gumbel_noise");
  const std::vector<T> g = gb.vec();
  for (T v : g)
    if (!std::isfinite(v)) fail("gumbel_noise: non-finite noise");
  if (n > 0) {
    const std::size_t k = in.byte() % (n + 1);
    smax_fuzz::guarded<T> tail(n - k, off + 1);
    smax::dynamic::gumbel_noise(tail.data(), n - k, seed, goff + k);
    tail.check_guards("gumbel_noise");
    const std::vector<T> t = tail.vec();
    if (!smax_fuzz::same_bytes(t.data(), g.data() + k, (n - k) * sizeof(T))) fail("gumbel_noise: depends on the split");
    const char* names[8];
    const std::size_t isas = std::min<std::size_t>(smax::dynamic::available_isas(names, 8), 8);
    const std::string active = smax::dynamic::active_isa();
    const char* other = names[in.byte() % isas];
    smax::dynamic::set_isa(other);
    std::vector<T> h(n);
    smax::dynamic::gumbel_noise(h.data(), n, seed, goff);
    smax::dynamic::set_isa(active.c_str());
    if (!smax_fuzz::same_bytes(h.data(), g.data(), n * sizeof(T)))
      fail(std::string("gumbel_noise: bits differ between ") + active + " and " + other);
  }

  // gumbel_softmax.
  const T tau = param<T>(in, {T(1), T(0.5), T(0.1), T(10), T(1e-20), T(1e20)});
  const bool hard = in.byte() & 1;
  const bool bad = !(tau > 0) || !std::isfinite(tau);
  std::vector<T> y;
  const bool threw = smax_fuzz::throws_invalid([&] {
    y = smax_fuzz::run_guarded(x, in_place, off, "gumbel_softmax", [&](const T* xp, T* yp) {
      smax::dynamic::gumbel_softmax(xp, yp, n, tau, seed, hard);
    });
  });
  if (threw != bad) fail(bad ? "gumbel_softmax: bad tau accepted" : "gumbel_softmax: good tau refused");
  if (bad || n == 0) return;
  if (smax_fuzz::any_nan(x)) return smax_fuzz::check_all_nan(y, "gumbel_softmax");
  std::vector<T> noise(n);
  smax::dynamic::gumbel_noise(noise.data(), n, seed, 0);
  std::vector<T> z(n);
  for (std::size_t i = 0; i < n; ++i) z[i] = x[i] + noise[i];  // in T, as documented
  if (hard) {
    const bool all_neginf =
        std::all_of(x.begin(), x.end(), [](T v) { return v == -std::numeric_limits<T>::infinity(); });
    const std::size_t hot = static_cast<std::size_t>(std::max_element(z.begin(), z.end()) - z.begin());
    for (std::size_t i = 0; i < n; ++i) {
      const T expect = !all_neginf && i == hot ? T(1) : T(0);
      if (y[i] != expect) fail("gumbel_softmax: hard output is not the one-hot of the first argmax");
    }
    return;
  }
  if (smax_fuzz::check_special_softmax(z, y, false, "gumbel_softmax")) return;
  const T c = static_cast<T>(1 / static_cast<double>(tau));  // the scale the kernel folds in
  if (!std::isfinite(c)) return;  // (1 / tau overflows T: clamped by the kernel)
  std::vector<ld> zz(n);
  for (std::size_t i = 0; i < n; ++i) zz[i] = static_cast<ld>(c) * z[i];
  check_softmax_of<T>(zz, y, "gumbel_softmax");
}

template <class T>
void fuzz_backward(smax_fuzz::stream& in, const std::vector<T>& x, std::size_t off) {
  const std::size_t n = x.size();
  const std::vector<T> dy = in.values<T>(n);
  smax_fuzz::describe("dy", dy);
  const bool softpick = in.byte() & 1;
  const int alias = in.byte() % 3;  // 0: separate dx, 1: dx = x, 2: dx = dy
  const char* fn = softpick ? "softpick_backward" : "stablemax_backward";
  const T eps = softpick ? param<T>(in, {T(1e-8), T(0), T(1e-3), T(1)}) : T(0);
  const bool bad = softpick && (!(eps >= 0) || !std::isfinite(eps));
  std::vector<T> y(n);
  if (softpick && !bad) smax::dynamic::softpick(x.data(), y.data(), n, eps);
  smax_fuzz::guarded<T> xb(n, off), yb(n, off + 1), dyb(n, off + 2), dxb(n, off + 3);
  xb.assign(x);
  yb.assign(y);
  dyb.assign(dy);
  T* dx = alias == 1 ? xb.data() : alias == 2 ? dyb.data() : dxb.data();
  const bool threw = smax_fuzz::throws_invalid([&] {
    if (softpick)
      smax::dynamic::softpick_backward(xb.data(), yb.data(), dyb.data(), dx, n, eps);
    else
      smax::dynamic::stablemax_backward(xb.data(), dyb.data(), dx, n);
  });
  if (threw != bad) fail(std::string(fn) + (bad ? ": bad eps accepted" : ": good eps refused"));
  xb.check_guards(fn);
  yb.check_guards(fn);
  dyb.check_guards(fn);
  dxb.check_guards(fn);
  if (bad || n == 0) return;
  const std::vector<T> got = alias == 1 ? xb.vec() : alias == 2 ? dyb.vec() : dxb.vec();
  constexpr T inf = std::numeric_limits<T>::infinity();
  if (smax_fuzz::any_nan(x) || (!softpick && smax_fuzz::any_nan(dy))) return smax_fuzz::check_all_nan(got, fn);
  if (std::count(x.begin(), x.end(), inf)) {
    for (T v : got)
      if (v != 0) fail(std::string(fn) + ": a +inf in x must give all 0");
    return;
  }
  for (T v : dy)
    if (!std::isfinite(v)) return;  // infinite upstream gradients: inf - inf is a right answer
  const ld big = std::numeric_limits<T>::max();
  // factor[i]: what multiplies the dot product sum dy y in dx_i. That sum is
  // formed from products rounded in T (documented): each is off by up to
  // half the smallest subnormal, or, in double, dropped below 2^52 times
  // the smallest normal (dot_normal's mul_summable: no lane sum subnormal),
  // which factor[i] can amplify.
  std::vector<ld> ref(n), scale(n), factor(n, 0);
  if (!softpick) {
    ld S = 0, D = 0, Dabs = 0;
    for (std::size_t i = 0; i < n; ++i) S += stable_s<T>(x[i]);
    for (std::size_t i = 0; i < n; ++i) {
      const ld yi = stable_s<T>(x[i]) / S;
      D += dy[i] * yi;
      Dabs += std::fabs(dy[i] * yi);
    }
    for (std::size_t i = 0; i < n; ++i) {
      const ld sv = stable_s<T>(x[i]);
      const ld d = (x[i] >= 0 ? 1 : sv * sv) / S;
      ref[i] = d * (dy[i] - D);
      scale[i] = d * (std::fabs(static_cast<ld>(dy[i])) + Dabs);
      factor[i] = d;
    }
  } else {
    ld M = 0;
    for (T v : x) M = std::max<ld>(M, v);
    ld D = eps, dot = 0, dotabs = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (x[i] != -inf) D += std::fabs(softpick_a(x[i], M));
      dot += static_cast<ld>(dy[i]) * y[i];
      dotabs += std::fabs(static_cast<ld>(dy[i]) * y[i]);
    }
    if (!(D > 0)) return;
    const std::size_t first_max = static_cast<std::size_t>(std::max_element(x.begin(), x.end()) - x.begin());
    for (std::size_t i = 0; i < n; ++i) {
      if (x[i] == -inf) {
        ref[i] = 0;
        scale[i] = 0;
        continue;
      }
      const ld e = std::exp(static_cast<ld>(x[i]) - M) / D;
      const ld sign = x[i] > 0 ? 1 : x[i] < 0 ? -1 : 0;
      ref[i] = e * ((x[i] > 0 ? dy[i] : 0) - sign * dot);
      scale[i] = e * (std::fabs(static_cast<ld>(dy[i])) + dotabs);
      factor[i] = e;
      if (M > 0 && i == first_max) {
        ref[i] -= eps * dot / D;
        scale[i] += eps * dotabs / D;
        factor[i] += eps / D;
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!(scale[i] < big / 4)) continue;  // overflow is a right answer there
    const ld product_drop = sizeof(T) == 8 ? std::ldexp(static_cast<ld>(std::numeric_limits<T>::min()), 52)
                                           : static_cast<ld>(std::numeric_limits<T>::denorm_min());
    const ld product_rounding = factor[i] * static_cast<ld>(n) * product_drop;
    if (std::fabs(got[i] - ref[i]) > 64 * eps_of<T>() * scale[i] + 4 * std::numeric_limits<T>::min() + product_rounding)
    {
      char buf[200];
      std::snprintf(buf, sizeof buf, " (x %a, dy %a, got %a, ref %La, scale %La, n %zu)", double(x[i]), double(dy[i]),
                    double(got[i]), ref[i], scale[i], n);
      fail(std::string(fn) + ": error above a few ulp of the term scale at " + std::to_string(i) + buf);
    }
  }
}

// The seeds' family (seeds.hpp): sigmoid_attention elementwise against long
// double (and never subnormal); sa_softmax's special values and values;
// multimax against softmax of the modulator in long double (where sigma
// cannot overflow); asentmax against entmax_bisect of c x written out
// (alpha = 1: against ssmax).
template <class T>
void fuzz_seeds(smax_fuzz::stream& in, const std::vector<T>& x, bool in_place, std::size_t off) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  constexpr ld eps = eps_of<T>();
  const ld tiny = std::numeric_limits<T>::min();
  const std::size_t n = x.size();
  const auto bad = [&](const char* fn, const char* what, std::size_t i) {
    char buf[160];
    std::snprintf(buf, sizeof buf, " at %zu (x %a)", i, i < n ? double(x[i]) : 0.0);
    fail(std::string(fn) + ": " + what + buf);
  };
  switch (in.byte() % 4) {
    case 0: {
      const T b = static_cast<T>(static_cast<std::int8_t>(in.byte()) / 8.0);
      const auto y = smax_fuzz::run_guarded(x, in_place, off, "sigmoid_attention", [&](const T* xp, T* yp) {
        smax::dynamic::sigmoid_attention(xp, yp, n, b);
      });
      for (std::size_t i = 0; i < n; ++i) {
        const T z = static_cast<T>(x[i] + b);
        if (z != z) {
          if (y[i] == y[i]) bad("sigmoid_attention", "NaN input must give NaN", i);
          continue;
        }
        const ld ref = 1 / (1 + std::exp(-static_cast<ld>(z)));
        if (y[i] != 0 && std::fabs(y[i]) < tiny) bad("sigmoid_attention", "subnormal output", i);
        if (!(std::fabs(y[i] - ref) <= 8 * eps * ref + 2 * tiny)) bad("sigmoid_attention", "error above 8 ulp", i);
      }
      return;
    }
    case 1: {
      const bool norm = in.byte() & 1;
      const auto y = smax_fuzz::run_guarded(x, in_place, off, "sa_softmax", [&](const T* xp, T* yp) {
        smax::dynamic::sa_softmax(xp, yp, n, norm);
      });
      if (smax_fuzz::any_nan(x)) return smax_fuzz::check_all_nan(y, "sa_softmax");
      const std::size_t posinf = static_cast<std::size_t>(std::count(x.begin(), x.end(), inf));
      if (posinf) {
        for (std::size_t i = 0; i < n; ++i) {
          const T expect = x[i] == inf ? (norm ? static_cast<T>(1.0L / posinf) : inf) : T(0);
          if (!(y[i] == expect || std::fabs(y[i] - expect) <= 4 * eps * expect)) bad("sa_softmax", "+inf rule broken", i);
        }
        return;
      }
      ld m = -inf, lo = 0, hi = 0, S = 0;
      for (T v : x) m = std::max<ld>(m, v), lo = std::min<ld>(lo, v), hi = std::max<ld>(hi, v);
      if (m == -inf) {
        for (std::size_t i = 0; i < n; ++i)
          if (y[i] != 0) bad("sa_softmax", "all -inf must give 0", i);
        return;
      }
      for (T v : x) S += std::exp(static_cast<ld>(v) - m);
      for (std::size_t i = 0; i < n; ++i) {
        const ld p = std::exp(static_cast<ld>(x[i]) - m) / S;
        const ld g = !norm ? (x[i] == -inf ? 0.0L : static_cast<ld>(x[i]))
                           : (lo == -inf ? (x[i] == -inf ? 0.0L : 1.0L) : (hi > lo ? (x[i] - lo) / (hi - lo) : 0.0L));
        const ld ref = g * p;
        // The accuracy contract compares outputs below 1e-30 absolutely (the
        // kernel drops products with |g| < 2^-100 rather than form subnormals).
        if (std::fabs(ref) <= 1e-30L) {
          if (!(std::fabs(y[i]) <= 2e-30L)) bad("sa_softmax", "output of a reference below 1e-30 above 2e-30", i);
        } else if (!(std::fabs(y[i] - ref) <= 16 * eps * std::fabs(ref) + 2 * tiny)) {
          bad("sa_softmax", "error above 16 ulp", i);
        }
      }
      return;
    }
    case 2: {
      smax::multimax_params p;
      for (int k = 0; k < 4; ++k) {
        p.ranges[k] = static_cast<std::int8_t>(in.byte()) / 32.0;
        p.ts[k] = static_cast<std::int8_t>(in.byte()) / 256.0;
      }
      const auto y = smax_fuzz::run_guarded(x, in_place, off, "multimax", [&](const T* xp, T* yp) {
        smax::dynamic::multimax(xp, yp, n, p);
      });
      // sigma is finite (and its T rounding small) for |x| <= 2^12.
      std::vector<T> z(n);
      for (std::size_t i = 0; i < n; ++i) {
        const ld v = x[i];
        if (v == v && std::fabs(v) < inf && std::fabs(v) > 4096) return;
        const auto relu = [](ld a) { return a > 0 ? a : 0.0L; };
        const ld a = relu(p.ranges[2] - v), d = relu(v - p.ranges[3]);
        z[i] = std::fabs(v) == inf || v != v ? x[i]
               : static_cast<T>(v + p.ts[0] * relu(p.ranges[0] - v) + p.ts[1] * relu(v - p.ranges[1]) + p.ts[2] * a * a +
                                p.ts[3] * d * d);
      }
      if (smax_fuzz::check_special_softmax(z, y, false, "multimax")) return;
      const auto ref = smax_fuzz::ref_softmax(z, false);
      ld zmax = 0;
      for (T v : z) zmax = std::max<ld>(zmax, std::fabs(v));
      // z is sigma rounded to T here; the kernel's own sigma may differ by a
      // few ulp of |sigma|, which the exp turns into relative error.
      smax_fuzz::check_relative(y, ref, [&](std::size_t) { return (sizeof(T) == 4 ? 2e-6L : 2e-13L) + 16 * eps * zmax; },
                                "multimax");
      return;
    }
    default: {
      const T alphas[] = {T(1), T(1.25), T(1.5), T(2), T(3)};
      const T alpha = alphas[in.byte() % 5];
      const T s = static_cast<T>(in.byte() / 64.0), b = static_cast<T>(static_cast<std::int8_t>(in.byte()) / 64.0);
      const auto y = smax_fuzz::run_guarded(x, in_place, off, "asentmax", [&](const T* xp, T* yp) {
        smax::dynamic::asentmax(xp, yp, n, alpha, s, b);
      });
      if (n == 0) return;
      const T c = static_cast<T>(static_cast<double>(s) * std::log(static_cast<double>(n)) + static_cast<double>(b));
      std::vector<T> z(n), want(n);
      for (std::size_t i = 0; i < n; ++i) z[i] = c * x[i];
      if (alpha == T(1))  // documented: ssmax (c in the exponent, never c x rounded)
        smax::dynamic::ssmax(x.data(), want.data(), n, s, b);
      else
        smax::dynamic::entmax_bisect(z.data(), want.data(), n, alpha);
      for (std::size_t i = 0; i < n; ++i) {
        if (want[i] != want[i]) {
          if (y[i] == y[i]) bad("asentmax", "NaN where entmax_bisect of c x gives NaN", i);
          continue;
        }
        if (!(std::fabs(y[i] - want[i]) <= 64 * eps)) bad("asentmax", "differs from entmax_bisect of c x", i);
      }
      return;
    }
  }
}

template <class T>
void run(smax_fuzz::stream& in) {
  // 200 and up: the seeds' family (added later; below 200 the corpus keeps
  // its meaning).
  const std::uint8_t pick = in.byte();
  const int which = pick >= 200 ? 5 : pick % 5;
  const bool in_place = in.byte() & 1;
  const std::size_t off = in.byte();
  const std::size_t n = in.size(4096);
  const std::vector<T> x = in.values<T>(n);
  smax_fuzz::context() = std::string(sizeof(T) == 4 ? "float\n" : "double\n");
  smax_fuzz::describe("x", x);
  switch (which) {
    case 0: return fuzz_stablemax(in, x, in_place, off);
    case 1: return fuzz_softpick(in, x, in_place, off);
    case 2: return fuzz_ssmax(in, x, in_place, off);
    case 3: return fuzz_gumbel(in, x, in_place, off);
    case 4: return fuzz_backward(in, x, off);
    default: return fuzz_seeds(in, x, in_place, off);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  smax_fuzz::stream in(data, size);
  in.pick_isa();
  if (in.byte() & 1)
    run<double>(in);
  else
    run<float>(in);
  return 0;
}
