// softmax_backward / log_softmax_backward: against the analytic VJP in long
// double, against central finite differences of the forward pass (double),
// in place, and with NaN, on every ISA.
#include "common.hpp"

namespace {

template <class T>
std::vector<long double> ref_softmax_vjp(const std::vector<T>& y, const std::vector<T>& dy) {
  long double dot = 0;
  for (std::size_t i = 0; i < y.size(); ++i) dot += static_cast<long double>(y[i]) * dy[i];
  std::vector<long double> dx(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) dx[i] = y[i] * (dy[i] - dot);
  return dx;
}

template <class T>
std::vector<long double> ref_log_softmax_vjp(const std::vector<T>& y, const std::vector<T>& dy) {
  long double total = 0;
  for (T v : dy) total += v;
  std::vector<long double> dx(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) dx[i] = dy[i] - std::exp(static_cast<long double>(y[i])) * total;
  return dx;
}

// Worst |dx_i - ref_i| / c_i, where c_i = |y_i| (|dy_i| + sum_j |y_j dy_j|)
// is the scale of the terms the VJP subtracts: the error a correctly rounded
// evaluation of the formula makes is a few ulp of c_i, not of |dx_i| (which
// cancels towards 0). For log_softmax, c_i = |dy_i| + e^(y_i) sum_j |dy_j|.
template <class T>
double conditioned_err(const std::vector<T>& dx, const std::vector<long double>& ref, const std::vector<long double>& c) {
  double worst = 0;
  for (std::size_t i = 0; i < dx.size(); ++i)
    if (c[i] > 0) worst = std::max(worst, static_cast<double>(std::fabs(dx[i] - ref[i]) / c[i]));
  return worst;
}

template <class T>
std::vector<long double> softmax_scale(const std::vector<T>& y, const std::vector<T>& dy) {
  long double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += std::fabs(static_cast<long double>(y[i]) * dy[i]);
  std::vector<long double> c(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) c[i] = std::fabs(static_cast<long double>(y[i])) * (std::fabs(dy[i]) + s);
  return c;
}

template <class T>
std::vector<long double> log_softmax_scale(const std::vector<T>& y, const std::vector<T>& dy) {
  long double s = 0;
  for (T v : dy) s += std::fabs(v);
  std::vector<long double> c(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) c[i] = std::fabs(dy[i]) + std::exp(static_cast<long double>(y[i])) * s;
  return c;
}

template <class T>
void check_against_reference(const std::string& isa, double tol) {
  for (std::size_t n : smax_test::sizes()) {
    const auto x = smax_test::normal<T>(n, 3.0, 7 + n);
    const auto dy = smax_test::normal<T>(n, 1.0, 11 + n);
    std::vector<T> y(n), ly(n), dx(n), ldx(n);
    smax::dynamic::softmax(x.data(), y.data(), n);
    smax::dynamic::log_softmax(x.data(), ly.data(), n);
    smax::dynamic::softmax_backward(y.data(), dy.data(), dx.data(), n);
    smax::dynamic::log_softmax_backward(ly.data(), dy.data(), ldx.data(), n);
    INFO("isa " << isa << " n " << n);
    CHECK(conditioned_err(dx, ref_softmax_vjp(y, dy), softmax_scale(y, dy)) < tol);
    CHECK(conditioned_err(ldx, ref_log_softmax_vjp(ly, dy), log_softmax_scale(ly, dy)) < tol);
  }
}

}  // namespace

TEST_CASE("softmax and log_softmax backward match the analytic VJP", "[backward]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    // 4 ulp of the conditioning scale.
    check_against_reference<float>(isa, 4 * 0x1p-24);
    check_against_reference<double>(isa, 4 * 0x1p-53);
  }
}

TEST_CASE("backward matches finite differences of the forward pass (double)", "[backward]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (std::size_t n : {1, 2, 5, 17, 40}) {
      auto x = smax_test::normal<double>(n, 2.0, 3 + n);
      const auto dy = smax_test::normal<double>(n, 1.0, 5 + n);
      std::vector<double> y(n), dx(n), ldx(n), tmp(n);
      smax::dynamic::softmax(x.data(), y.data(), n);
      smax::dynamic::softmax_backward(y.data(), dy.data(), dx.data(), n);
      smax::dynamic::log_softmax(x.data(), y.data(), n);
      smax::dynamic::log_softmax_backward(y.data(), dy.data(), ldx.data(), n);
      const double h = 1e-6;
      for (std::size_t i = 0; i < n; ++i) {
        // d/dx_i of <dy, f(x)> by central differences.
        auto directional = [&](bool log) {
          const double keep = x[i];
          double lo = 0, hi = 0;
          x[i] = keep + h;
          log ? smax::dynamic::log_softmax(x.data(), tmp.data(), n) : smax::dynamic::softmax(x.data(), tmp.data(), n);
          for (std::size_t j = 0; j < n; ++j) hi += dy[j] * tmp[j];
          x[i] = keep - h;
          log ? smax::dynamic::log_softmax(x.data(), tmp.data(), n) : smax::dynamic::softmax(x.data(), tmp.data(), n);
          for (std::size_t j = 0; j < n; ++j) lo += dy[j] * tmp[j];
          x[i] = keep;
          return (hi - lo) / (2 * h);
        };
        INFO("isa " << isa << " n " << n << " i " << i);
        CHECK(std::fabs(directional(false) - dx[i]) < 1e-7);
        CHECK(std::fabs(directional(true) - ldx[i]) < 1e-7);
      }
    }
  }
}

TEST_CASE("backward in place and with special values", "[backward]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    const std::size_t n = 37;
    const auto x = smax_test::normal<float>(n, 2.0, 99);
    const auto dy = smax_test::normal<float>(n, 1.0, 98);
    std::vector<float> y(n), expect(n);
    smax::dynamic::softmax(x.data(), y.data(), n);
    smax::dynamic::softmax_backward(y.data(), dy.data(), expect.data(), n);
    auto inplace_dy = dy;
    smax::dynamic::softmax_backward(y.data(), inplace_dy.data(), inplace_dy.data(), n);
    auto inplace_y = y;
    smax::dynamic::softmax_backward(inplace_y.data(), dy.data(), inplace_y.data(), n);
    CHECK(inplace_dy == expect);
    CHECK(inplace_y == expect);

    // A NaN in dy poisons the dot product: every dx is NaN.
    auto bad = dy;
    bad[5] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> dx(n);
    smax::dynamic::softmax_backward(y.data(), bad.data(), dx.data(), n);
    for (float v : dx) CHECK(std::isnan(v));

    // An infinite dy_k: the dot product is +inf, clamped to the largest
    // float; dx_k = +inf, every other dx finite (not NaN), at every length
    // (the dot product's blocks and its tail).
    for (std::size_t m : {std::size_t(7), std::size_t(32), std::size_t(100), std::size_t(1000)}) {
      CAPTURE(isa, m);
      std::vector<float> u(m, 1.0f / static_cast<float>(m)), g(m, 0.25f), out(m);
      g[m / 2] = std::numeric_limits<float>::infinity();
      smax::dynamic::softmax_backward(u.data(), g.data(), out.data(), m);
      for (std::size_t i = 0; i < m; ++i) {
        if (i == m / 2) CHECK(out[i] == std::numeric_limits<float>::infinity());
        else CHECK(std::isfinite(out[i]));
      }
    }
    // y dy = 2^-140, below the normal range: every dx is 0, none subnormal
    // (that the dot itself is then 0, not subnormal, is what [subnormal]'s
    // flag check sees).
    {
      std::vector<float> u(40, 0.0f), g(40, 0.0f), out(40, 1.0f);
      u[0] = g[0] = 0x1p-70f;
      u[1] = 0.5f;
      smax::dynamic::softmax_backward(u.data(), g.data(), out.data(), 40);
      for (float v : out) CHECK(v == 0.0f);
    }

    // log_softmax output with masked (-inf) entries: their exp is 0, so
    // dx = dy there, and nothing is NaN.
    std::vector<float> lx(n, -std::numeric_limits<float>::infinity()), ly(n);
    lx[3] = 1.0f;
    lx[20] = 2.0f;
    smax::dynamic::log_softmax(lx.data(), ly.data(), n);
    smax::dynamic::log_softmax_backward(ly.data(), dy.data(), dx.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(std::isfinite(dx[i]));
      if (i != 3 && i != 20) CHECK(dx[i] == dy[i]);
    }
    // n = 0 touches nothing.
    smax::dynamic::softmax_backward(static_cast<const float*>(nullptr), nullptr, nullptr, 0);
    smax::dynamic::log_softmax_backward(static_cast<const float*>(nullptr), nullptr, nullptr, 0);
  }
}
