// Derives the polynomial coefficients used by include/smax/detail/exp.hpp.
//
// e^r is written 1 + r + r^2 q(r) so that the two leading coefficients are
// exactly 1 (rounding a fitted c0 = 0.99999998 to float alone costs 0.25 ulp).
// q(r) = (e^r - 1 - r) / r^2 on [-a, a] is interpolated at the Chebyshev nodes
// of degree d - 2 (a near-minimax fit: its error is within a small factor of
// the best uniform approximation), the interpolant is converted to monomial
// form in long double, and the coefficients are rounded to the target type. The tool then
// reports the worst relative error of the rounded polynomial, evaluated in long
// double, over a dense sweep of [-a, a]: that is the approximation error alone,
// before the rounding of the kernel's own float/double arithmetic.
//
//   g++ -O2 -std=c++17 tools/fit_exp.cpp -o fit_exp && ./fit_exp
#include <cmath>
#include <cstdio>
#include <vector>

using ld = long double;

template <class T>
static void fit(const char* name, int d, ld a) {
  const int m = d - 1;  // coefficients of q
  std::vector<ld> nodes(m), vals(m);
  const ld pi = 3.141592653589793238462643383279502884L;
  for (int i = 0; i < m; ++i) {
    nodes[i] = a * std::cos(pi * (i + 0.5L) / m);
    // g(r) = (e^r - 1 - r) / r^2, by its series near 0 to avoid cancellation.
    ld r = nodes[i], g = 0, t = 0.5L;
    for (int k = 2; k < 40; ++k) { g += t; t = t * r / (k + 1); }
    vals[i] = g;
  }
  // Newton divided differences, then expand to monomial coefficients.
  std::vector<ld> dd = vals;
  for (int j = 1; j < m; ++j)
    for (int i = m - 1; i >= j; --i) dd[i] = (dd[i] - dd[i - 1]) / (nodes[i] - nodes[i - j]);
  std::vector<ld> c(m, 0.0L);
  c[0] = dd[m - 1];
  int deg = 0;
  for (int k = m - 2; k >= 0; --k) {
    // c(x) = c(x) * (x - nodes[k]) + dd[k]
    std::vector<ld> nc(m, 0.0L);
    for (int i = 0; i <= deg; ++i) {
      nc[i + 1] += c[i];
      nc[i] -= c[i] * nodes[k];
    }
    nc[0] += dd[k];
    c = nc;
    ++deg;
  }
  std::vector<T> ct(m);
  for (int i = 0; i < m; ++i) ct[i] = static_cast<T>(c[i]);
  ld worst = 0;
  const int steps = 2000000;
  for (int s = 0; s <= steps; ++s) {
    ld r = -a + 2 * a * s / steps;
    ld q = ct[m - 1];
    for (int i = m - 2; i >= 0; --i) q = q * r + ct[i];
    ld p = 1 + r + r * r * q;
    ld e = std::fabs(p / std::exp(r) - 1);
    if (e > worst) worst = e;
  }
  std::printf("%s: degree %d on [-%.4Lf, %.4Lf], worst relative error %.3Le (%.4Lf ulp)\n",
              name, d, a, a, worst, worst / (sizeof(T) == 4 ? 1.1920928955078125e-7L : 2.220446049250313e-16L));
  for (int i = 0; i < m; ++i) std::printf("  c%-2d = %a  // %.21Lg\n", i + 2, static_cast<double>(ct[i]), c[i]);
}

int main() {
  // The kernels pick k = round((x - m) / ln2) and evaluate e^d for
  // d = (x - k ln2) - m in [-ln2/2, ln2/2] plus rounding slack: fit [-0.36, 0.36].
  // Errors below are in units of 2^-23 (float) / 2^-52 (double): ulp at 1.
  fit<float>("float", 6, 0.36L);
  fit<double>("double", 11, 0.36L);
  // The terms of outputs rounded to fp16 / bf16 (exp_accuracy).
  fit<float>("float, fp16 outputs", 4, 0.36L);
  fit<float>("float, bf16 outputs", 3, 0.36L);
}
