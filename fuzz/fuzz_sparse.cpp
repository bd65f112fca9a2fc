// libFuzzer target: sparsemax, entmax15, entmax_bisect (alpha, n_iter),
// sparsemax_backward and entmax_backward, float and double, every ISA the
// CPU has, in place and not, misaligned, with guard regions. Checked against
// long-double references (sort-based for sparsemax and 1.5-entmax, a
// 300-step bisection for alpha-entmax) within a margin over the bounds
// smax.hpp documents, the invariants (outputs in [0, 1] summing to 1, exact
// zeros off the support), the special-value rules and the bad-argument rule.
#include "common.hpp"

#include <functional>
#include <stdexcept>

namespace {

using ld = long double;
using smax_fuzz::fail;

// alpha-entmax of finite x in long double: y = max(z - tau, 0)^p, z =
// (alpha - 1) x, p = 1 / (alpha - 1), tau by bisection on [max z - 1,
// max z] (sum is 1 at most at the top, at least 1 at the bottom). alpha = 2
// and 1.5 use the exact sort-based tau instead. Returns tau (in z units).
ld ref_entmax(const std::vector<ld>& x, ld alpha, std::vector<ld>& y) {
  const std::size_t n = x.size();
  y.assign(n, 0);
  if (alpha == 1) {  // softmax
    ld m = -INFINITY, s = 0;
    for (ld v : x) m = std::max(m, v);
    for (ld v : x) s += std::exp(v - m);
    for (std::size_t i = 0; i < n; ++i) y[i] = std::exp(x[i] - m) / s;
    return 0;
  }
  // z relative to the max: the sums of z and z^2 of logits near 1e6 that
  // differ by 1e-3 cancel in long double too (found by fuzz_sparse: entmax15
  // at 716032 + 0.001 k, the reference 2.6e-8 off and the kernel right).
  ld mx = -INFINITY;
  for (ld v : x) mx = std::max(mx, v);
  std::vector<ld> z(n);
  for (std::size_t i = 0; i < n; ++i) z[i] = (alpha - 1) * (x[i] - mx);
  ld tau;
  if (alpha == 2 || alpha == 1.5L) {
    // Sorted descending; the support is the longest prefix whose candidate
    // tau stays below its smallest member.
    std::vector<ld> s = z;
    std::sort(s.begin(), s.end(), std::greater<ld>());
    ld S1 = 0, S2 = 0;
    tau = s[0] - 1;
    for (std::size_t k = 1; k <= n; ++k) {
      S1 += s[k - 1];
      S2 += s[k - 1] * s[k - 1];
      ld t;
      if (alpha == 2) {
        t = (S1 - 1) / k;
      } else {  // sum (z - t)^2 = 1 on k entries: the smaller root
        const ld mean = S1 / k;
        const ld var = S2 / k - mean * mean;
        const ld d = (1 / ld(k)) - var;
        if (d < 0) break;
        t = mean - std::sqrt(d);
      }
      if (t >= s[k - 1]) break;
      tau = t;
    }
  } else {
    ld lo = -INFINITY, hi;
    for (ld v : z) lo = std::max(lo, v);
    hi = lo;
    lo -= 1;
    const ld p = 1 / (alpha - 1);
    for (int it = 0; it < 300; ++it) {
      const ld mid = (lo + hi) / 2;
      ld s = 0;
      for (ld v : z) s += v > mid ? std::pow(v - mid, p) : 0;
      (s >= 1 ? lo : hi) = mid;
    }
    tau = (lo + hi) / 2;
  }
  const ld p = 1 / (alpha - 1);
  for (std::size_t i = 0; i < n; ++i) y[i] = z[i] > tau ? std::pow(z[i] - tau, p) : 0;
  return tau + (alpha - 1) * mx;  // in the units of (alpha - 1) x
}

template <class T>
void forward(smax_fuzz::stream& in, const std::vector<T>& x, bool in_place, std::size_t off) {
  const std::size_t n = x.size();
  const int which = in.byte() % 3;  // sparsemax, entmax15, entmax_bisect
  const T alphas[] = {T(1), T(1.1), T(1.25), T(1.5), T(2), T(3), T(4), T(0.5), T(-1),
                      std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity()};
  const T alpha = which == 0 ? T(2) : which == 1 ? T(1.5) : alphas[in.byte() % 11];
  const int iters[] = {50, 0, 1, 5, 100, -1};
  const int n_iter = iters[in.byte() % 6];
  const bool bad = which == 2 && (!(alpha >= 1) || !std::isfinite(alpha) || n_iter < 0);
  smax_fuzz::context() += "alpha " + std::to_string(static_cast<double>(alpha)) + " n_iter " + std::to_string(n_iter) + "\n";
  const char* fn = which == 0 ? "sparsemax" : which == 1 ? "entmax15" : "entmax_bisect";
  std::vector<T> y;
  const bool threw = smax_fuzz::throws_invalid([&] {
    y = smax_fuzz::run_guarded(x, in_place, off, fn, [&](const T* xp, T* yp) {
      if (which == 0)
        smax::dynamic::sparsemax(xp, yp, n);
      else if (which == 1)
        smax::dynamic::entmax15(xp, yp, n);
      else
        smax::dynamic::entmax_bisect(xp, yp, n, alpha, n_iter);
    });
  });
  if (threw != bad) fail(std::string(fn) + (bad ? ": bad alpha or n_iter accepted" : ": good arguments refused"));
  if (bad || n == 0) return;
  if (smax_fuzz::check_special_softmax(x, y, false, fn)) return;

  // Invariants for every finite input.
  ld sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!(y[i] >= 0 && y[i] <= smax_fuzz::one_plus_rounding<T>())) {
      smax_fuzz::describe("y", y);
      fail(std::string(fn) + ": output outside [0, 1] at " + std::to_string(i));
    }
    sum += y[i];
  }
  const ld eps = std::numeric_limits<T>::epsilon();
  const ld sum_tol = 64 * eps * (1 + std::sqrt(static_cast<ld>(n)));
  if (std::fabs(sum - 1) > sum_tol)
    fail(std::string(fn) + ": outputs do not sum to 1");

  // Values, where the long-double reference is itself reliable (|x| not so
  // large that (alpha - 1) x loses the support's spread in long double).
  ld big = 0;
  for (T v : x) big = std::max<ld>(big, std::fabs(static_cast<ld>(v)));
  if (big > 1e6L) return;
  const std::vector<ld> xl(x.begin(), x.end());
  std::vector<ld> ref;
  const ld tau = ref_entmax(xl, static_cast<ld>(alpha), ref);
  const ld p = alpha == 1 ? 1 : 1 / (static_cast<ld>(alpha) - 1);
  ld zmax = 0;
  for (ld v : xl) zmax = std::max(zmax, std::fabs((alpha == 1 ? 1 : alpha - 1) * v));
  if (alpha == 1) {
    smax_fuzz::check_softmax_values(x, y, fn);
    return;
  }
  // |y - ref| within a few ulp of the arguments' scale times the power's
  // slope p y^(1 - 1/p): at most p for p >= 1 (outputs are at most 1), but
  // unbounded as y -> 0 for p < 1 (alpha > 2): an entry just above the
  // threshold is ill-conditioned, for the long-double reference too (found:
  // alpha = 4, z - tau = 2.4e-11 of |tau| = 38, where the reference's own
  // rounding of tau moves y by 5e-8 relative).
  const ld base = 64 * eps * std::max<ld>(1, p) * (1 + std::fabs(tau) + zmax);
  for (std::size_t i = 0; i < n; ++i) {
    const ld yr = std::max(ref[i], static_cast<ld>(y[i]));
    const ld tol = p < 1 && yr > 0 ? base * std::max<ld>(1, std::pow(yr, 1 - 1 / p)) : base;
    if (std::fabs(y[i] - ref[i]) > tol) {
      char buf[160];
      std::snprintf(buf, sizeof buf, " (alpha %g): got %a, reference %La, tolerance %La, tau %La", static_cast<double>(alpha),
                    static_cast<double>(y[i]), ref[i], tol, tau);
      smax_fuzz::describe("y", y);
      fail(std::string(fn) + ": error above the bound at " + std::to_string(i) + buf);
    }
  }
}

template <class T>
void backward(smax_fuzz::stream& in, const std::vector<T>& x, std::size_t off) {
  const std::size_t n = x.size();
  const bool entmax = in.byte() & 1;
  const T alphas[] = {T(1), T(1.25), T(1.5), T(2), T(3), T(0.5), std::numeric_limits<T>::quiet_NaN()};
  const T alpha = entmax ? alphas[in.byte() % 7] : T(2);
  const bool bad = entmax && (!(alpha >= 1) || !std::isfinite(alpha));
  const bool from_forward = in.byte() % 4 != 0;  // else arbitrary y
  std::vector<T> y = x;
  if (from_forward && !bad) smax::dynamic::entmax_bisect(x.data(), y.data(), n, alpha);
  const std::vector<T> dy = in.values<T>(n);
  smax_fuzz::describe("dy", dy);
  smax_fuzz::context() += "alpha " + std::to_string(static_cast<double>(alpha)) + "\n";
  const bool alias = in.byte() & 1;  // dx = dy
  smax_fuzz::guarded<T> yb(n, off), dyb(n, off + 1), dxb(n, off + 2);
  yb.assign(y);
  dyb.assign(dy);
  T* dx = alias ? dyb.data() : dxb.data();
  const char* fn = entmax ? "entmax_backward" : "sparsemax_backward";
  const bool threw = smax_fuzz::throws_invalid([&] {
    if (entmax)
      smax::dynamic::entmax_backward(yb.data(), dyb.data(), dx, n, alpha);
    else
      smax::dynamic::sparsemax_backward(yb.data(), dyb.data(), dx, n);
  });
  if (threw != bad) fail(std::string(fn) + (bad ? ": bad alpha accepted" : ": good alpha refused"));
  yb.check_guards(fn);
  dyb.check_guards(fn);
  dxb.check_guards(fn);
  if (bad || !from_forward || n == 0) return;
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(y[i]) || !std::isfinite(dy[i])) return;
  const std::vector<T> got = alias ? dyb.vec() : dxb.vec();
  // g_i = y_i^(2 - alpha) on the support; dx = g dy - g (sum g dy / sum g).
  std::vector<ld> g(n);
  ld G = 0, GD = 0, GDabs = 0;
  for (std::size_t i = 0; i < n; ++i) {
    g[i] = y[i] > 0 ? std::pow(static_cast<ld>(y[i]), 2 - static_cast<ld>(alpha)) : 0;
    G += g[i];
    GD += g[i] * dy[i];
    GDabs += std::fabs(g[i] * dy[i]);
  }
  if (!(G > 0)) return;
  const ld big = std::numeric_limits<T>::max();
  const ld eps = std::numeric_limits<T>::epsilon();
  for (std::size_t i = 0; i < n; ++i) {
    const ld ref = g[i] * (dy[i] - GD / G);
    const ld scale = g[i] * (std::fabs(static_cast<ld>(dy[i])) + GDabs / G);
    if (!(scale < big / 4)) continue;
    if (y[i] == 0 && got[i] != 0) fail(std::string(fn) + ": off-support entry not exactly 0");
    if (std::fabs(got[i] - ref) > 64 * eps * scale + 4 * std::numeric_limits<T>::min())
      fail(std::string(fn) + ": error above a few ulp of the term scale at " + std::to_string(i));
  }
}

template <class T>
void run(smax_fuzz::stream& in) {
  const bool back = in.byte() % 4 == 0;
  const bool in_place = in.byte() & 1;
  const std::size_t off = in.byte();
  const std::size_t n = in.size(4096);
  const std::vector<T> x = in.values<T>(n);
  smax_fuzz::context() = std::string(sizeof(T) == 4 ? "float\n" : "double\n");
  smax_fuzz::describe("x", x);
  if (back)
    backward<T>(in, x, off);
  else
    forward<T>(in, x, in_place, off);
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
