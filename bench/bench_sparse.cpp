// The sparse family on every ISA compiled in, against the algorithms today's
// libraries run, written here:
//   sparsemax/sort, entmax15/sort   sort the row, prefix sums, find the support
//                                   (deep-spin entmax, TensorFlow Addons,
//                                   PyTorch ports: O(n log n))
//   entmax_bisect/deepspin          deep-spin's EntmaxBisect: n_iter = 50
//                                   bisection passes over the whole row, then
//                                   normalize (O(50 n))
// and the backward passes. Baselines are scalar C++ built with the bench's
// baseline flags (what a compiler makes of the library loop); their names
// carry "baseline" as ISA.
//
//   smax_bench --benchmark_filter='(sparsemax|entmax15|entmax_bisect|softmax/automatic)/f32/(avx512|baseline)/1048576$'
//              --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
#include <smax/dynamic.hpp>

#include <algorithm>
#include <functional>
#include <numeric>

#include "common.hpp"

namespace {

// ------------------------------------------------------------- baselines --

// Sparsemax by sorting (Martins & Astudillo 2016, Alg. 1).
template <class T>
void sparsemax_sort(const T* x, T* y, std::size_t n) {
  std::vector<T> z(x, x + n);
  std::sort(z.begin(), z.end(), std::greater<T>());
  double cs = 0, tau = 0;
  for (std::size_t k = 1; k <= n; ++k) {
    cs += z[k - 1];
    if (1 + static_cast<double>(k) * z[k - 1] > cs)
      tau = (cs - 1) / static_cast<double>(k);
    else
      break;
  }
  for (std::size_t i = 0; i < n; ++i) y[i] = std::max(static_cast<T>(x[i] - tau), T(0));
}

// 1.5-entmax by sorting (Peters et al. 2019, Alg. 2, as in deep-spin's
// entmax15 "exact"): on z = (x - max)/2 sorted, the running mean and mean of
// squares give tau_k = mean_k - sqrt((1 - k (ss_k - mean_k^2)) / k); the
// support is the k where tau_k <= z_k.
template <class T>
void entmax15_sort(const T* x, T* y, std::size_t n) {
  std::vector<T> z(x, x + n);
  std::sort(z.begin(), z.end(), std::greater<T>());
  const double m = z[0];
  double s1 = 0, s2 = 0, tau = -1;
  for (std::size_t k = 1; k <= n; ++k) {
    const double v = (z[k - 1] - m) / 2, kd = static_cast<double>(k);
    s1 += v;
    s2 += v * v;
    const double mean = s1 / kd, delta = (1 - (s2 - kd * mean * mean)) / kd;
    if (delta < 0) break;
    const double tk = mean - std::sqrt(delta);
    if (tk > v) break;
    tau = tk;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const double u = std::max((x[i] - m) / 2 - tau, 0.0);
    y[i] = static_cast<T>(u * u);
  }
}

// deep-spin EntmaxBisect (Blondel et al. 2020): X = (alpha-1) x, tau in
// [max X - 1, max X - n^(1-alpha)], 50 halvings, each a pass computing
// sum max(X - tau, 0)^(1/(alpha-1)), then p /= sum p. The power is a square
// for alpha = 1.5 (as torch's pow(x, 2) is), std::pow otherwise.
template <class T>
void entmax_bisect_deepspin(const T* x, T* y, std::size_t n, T alpha, int n_iter = 50) {
  const T am1 = alpha - 1;
  const double p = 1.0 / static_cast<double>(am1);
  const auto power = [p](T u) -> T { return p == 2.0 ? u * u : static_cast<T>(std::pow(u, static_cast<T>(p))); };
  T mx = x[0];
  for (std::size_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  mx *= am1;
  T tau_lo = mx - T(1);
  const T tau_hi = mx - static_cast<T>(std::pow(static_cast<double>(n), -static_cast<double>(am1)));
  T dm = tau_hi - tau_lo;
  for (int it = 0; it < n_iter; ++it) {
    dm /= 2;
    const T tau_m = tau_lo + dm;
    double f = -1;
    for (std::size_t i = 0; i < n; ++i) {
      const T u = std::max(am1 * x[i] - tau_m, T(0));
      y[i] = power(u);
      f += y[i];
    }
    if (f >= 0) tau_lo = tau_m;
  }
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += y[i];
  const T inv = static_cast<T>(1 / s);
  for (std::size_t i = 0; i < n; ++i) y[i] *= inv;
}

// ------------------------------------------------------------ registration --

template <class T>
std::vector<std::size_t> grid() {
  if (sizeof(T) == 4) return {1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24};
  return {1 << 12, 1 << 16, 1 << 20, 1 << 24};
}

template <class T>
smax_bench::check_fn<T> close_to(std::function<void(const T*, T*, std::size_t)> reference) {
  // Same function as the sort-based baseline: float rounding of the output
  // plus the baseline's own float prefix sums.
  return smax_bench::compare_check<T>(reference, sizeof(T) == 4 ? 1e-4 : 1e-10, sizeof(T) == 4 ? 1e-6 : 1e-12);
}

template <class T>
void register_type() {
  const auto ns = grid<T>();
  using smax_bench::kernel;

  // smax forward: max pass, candidate pass, output pass: 3 reads, 1 write.
  {
    kernel<T> k;
    k.name = "sparsemax";
    k.traffic = {3, 1};
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::sparsemax(x, y, n); };
    k.check = close_to<T>(sparsemax_sort<T>);
    smax_bench::register_per_isa(k, ns);
  }
  {
    kernel<T> k;
    k.name = "entmax15";
    k.traffic = {3, 1};
    k.run = [](const T* x, T* y, std::size_t n) { smax::dynamic::entmax15(x, y, n); };
    k.check = close_to<T>(entmax15_sort<T>);
    smax_bench::register_per_isa(k, ns);
  }
  for (T alpha : {T(1.5), T(1.25)}) {
    kernel<T> k;
    k.name = alpha == T(1.5) ? "entmax_bisect/1.5" : "entmax_bisect/1.25";
    k.traffic = {3, 1};
    k.run = [alpha](const T* x, T* y, std::size_t n) { smax::dynamic::entmax_bisect(x, y, n, alpha); };
    if (alpha == T(1.5))
      k.check = close_to<T>(entmax15_sort<T>);
    else
      k.check = [](const T* x, const T* y, std::size_t n) { return smax_bench::sum_check(x, y, n, 1e-5); };
    smax_bench::register_per_isa(k, ns);
  }

  // Backward: dy is the shared input, y the forward output of the first
  // slot's input (computed in the untimed first call, then reused by every
  // call of that size). Reads y and dy twice, writes dx.
  for (int which = 0; which < 2; ++which) {
    kernel<T> k;
    k.name = which == 0 ? "sparsemax_backward" : "entmax_backward/1.5";
    k.traffic = {4, 1};
    k.check = smax_bench::finite_check<T>;
    k.run = [which](const T* dy, T* dx, std::size_t n) {
      static std::map<std::pair<int, std::size_t>, std::vector<T>> outputs;
      std::vector<T>& y = outputs[{which, n}];
      if (y.empty()) {
        y.resize(n);
        if (which == 0)
          smax::dynamic::sparsemax(dy, y.data(), n);
        else
          smax::dynamic::entmax15(dy, y.data(), n);
      }
      if (which == 0)
        smax::dynamic::sparsemax_backward(y.data(), dy, dx, n);
      else
        smax::dynamic::entmax_backward(y.data(), dy, dx, n, T(1.5));
    };
    smax_bench::register_per_isa(k, ns);
  }

  // Baselines.
  {
    kernel<T> k;
    k.name = "sparsemax/sort";
    k.traffic = {3, 1};
    k.label = "baseline";
    k.run = sparsemax_sort<T>;
    k.check = [](const T* x, const T* y, std::size_t n) { return smax_bench::sum_check(x, y, n, 1e-4); };
    smax_bench::register_once(k, "baseline", ns);
  }
  {
    kernel<T> k;
    k.name = "entmax15/sort";
    k.traffic = {3, 1};
    k.label = "baseline";
    k.run = entmax15_sort<T>;
    k.check = [](const T* x, const T* y, std::size_t n) { return smax_bench::sum_check(x, y, n, 1e-4); };
    smax_bench::register_once(k, "baseline", ns);
  }
  {
    kernel<T> k;
    k.name = "entmax_bisect/1.5/deepspin";
    k.traffic = {53, 51};  // max; 50 x (read, write); sum; scale
    k.label = "baseline";
    k.run = [](const T* x, T* y, std::size_t n) { entmax_bisect_deepspin<T>(x, y, n, T(1.5)); };
    k.check = [](const T* x, const T* y, std::size_t n) { return smax_bench::sum_check(x, y, n, 1e-4); };
    smax_bench::register_once(k, "baseline", ns);
  }
}

SMAX_BENCH_REGISTER(sparse) {
  register_type<float>();
  register_type<double>();
}

}  // namespace
