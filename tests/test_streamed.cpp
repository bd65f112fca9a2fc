// Outputs large enough to be written with streaming stores (loops.hpp:
// stream_min_bytes, 16 MiB), which the heavy kernels produce through a
// staging buffer a chunk at a time (stream_chunk_bytes). Every output
// element is a function of its own x and of constants from the reduction
// passes, so y's alignment, and whether y is x, must not change a single
// bit; the staging must not write outside y.
//
// three_pass_reload stores e^(x - m) in the pass that sums it: its sum keeps
// x's lanes (the values reach y through stream_writer), so it too is the
// same at every alignment. (It was not, before: the sum started at y's first
// aligned element and its last bits followed y's alignment.)
#include <functional>

#include "common.hpp"

namespace {

template <class T>
using kernel = std::function<void(const T*, T*, std::size_t)>;

template <class T>
std::vector<std::pair<std::string, kernel<T>>> streamed_kernels() {
  namespace d = smax::dynamic;
  std::vector<std::pair<std::string, kernel<T>>> k;
  for (smax::algorithm a : smax_test::algorithms())
    k.emplace_back(std::string("softmax/") + smax_test::algorithm_name(a),
                   [a](const T* x, T* y, std::size_t n) { d::softmax(x, y, n, a); });
  k.emplace_back("softmax/batched 1 row", [](const T* x, T* y, std::size_t n) {
    d::softmax(smax::matrix_view<const T>(x, 1, n), smax::matrix_view<T>(y, 1, n));
  });
  k.emplace_back("log_softmax", [](const T* x, T* y, std::size_t n) { d::log_softmax(x, y, n); });
  k.emplace_back("stablemax", [](const T* x, T* y, std::size_t n) { d::stablemax(x, y, n); });
  k.emplace_back("log_stablemax", [](const T* x, T* y, std::size_t n) { d::log_stablemax(x, y, n); });
  k.emplace_back("softpick", [](const T* x, T* y, std::size_t n) { d::softpick(x, y, n); });
  k.emplace_back("ssmax", [](const T* x, T* y, std::size_t n) { d::ssmax(x, y, n, T(0.3)); });
  k.emplace_back("entmax_bisect/1.7", [](const T* x, T* y, std::size_t n) { d::entmax_bisect(x, y, n, T(1.7)); });
  k.emplace_back("gumbel_softmax", [](const T* x, T* y, std::size_t n) { d::gumbel_softmax(x, y, n, T(0.7), 11); });
  return k;
}

// y's alignment, in place and the guards, at n elements.
template <class T>
void outputs_same_at_any_alignment(std::size_t n) {
  const T sentinel = T(-7.25);
  const auto x0 = smax_test::normal<T>(n, 3.0, 29);
  const auto ref = smax_test::ref_softmax(x0);
  const std::size_t last = 64 / sizeof(T) - 1;  // the last misalignment of a 64-byte line
  // Allocated once (n elements each): every call overwrites all of y.
  smax_test::guarded<T> a(n, 0, sentinel), y1(n, 1, sentinel), yl(n, last, sentinel), z(n, last, sentinel);
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (const auto& k : streamed_kernels<T>()) {
      INFO(isa << " " << k.first << " n " << n);
      k.second(x0.data(), a.data(), n);
      REQUIRE(a.intact());
      const auto out = a.values();
      if (k.first.rfind("softmax/", 0) == 0) CHECK(smax_test::max_rel_err(out, ref) < (sizeof(T) == 4 ? 1e-6 : 2e-14));
      for (auto* y : {&y1, &yl}) {
        INFO("y offset " << (y == &y1 ? 1 : last));
        k.second(x0.data(), y->data(), n);
        CHECK(y->intact());
        CHECK(smax_test::same_bits(y->values(), out));
      }
      // In place at the last misalignment: the same bits as out of place there.
      z.assign(x0);
      k.second(z.data(), z.data(), n);
      CHECK(z.intact());
      CHECK(smax_test::same_bits(z.values(), yl.values()));
    }
  }
}

}  // namespace

// The streamed size (16 MiB of output) needs more than a size cap
// (SMAX_TEST_MAX_N: sanitizers, QEMU) allows: there it is reported as
// skipped, and the same checks run below the streaming threshold.
TEMPLATE_TEST_CASE("streamed outputs: any alignment of y, in place, the same bits, nothing written outside y",
                   "[memory][large]", float, double) {
  using T = TestType;
  const std::size_t streamed = (std::size_t(16) << 20) / sizeof(T) + 37;
  if (smax_test::max_n() + 37 < streamed) {
    WARN("SKIPPED: n = " << streamed << " is above SMAX_TEST_MAX_N = " << smax_test::max_n());
    return;
  }
  outputs_same_at_any_alignment<T>(streamed);
}

TEMPLATE_TEST_CASE("cached outputs: any alignment of y, in place, the same bits, nothing written outside y",
                   "[memory]", float, double) {
  using T = TestType;
  outputs_same_at_any_alignment<T>(std::min<std::size_t>(std::size_t(1) << 16, smax_test::max_n()) + 37);
}

namespace {

// two_pass_sum sums an input of at least two_halves_min_bytes as two halves
// merged at the end, and reads them one after the other or both at once
// depending on the CPU (loops.hpp, interleave_halves): either order must give
// the same bits. f(k) runs with the halves one after the other (k = 0), then
// at once (k = 1); the CPU's choice again afterwards.
template <class F>
void in_both_orders(F&& f) {
  using smax::detail::halves_order;
  struct forced {
    explicit forced(halves_order o) { smax::detail::halves_order_forced = o; }
    ~forced() { smax::detail::halves_order_forced = halves_order::by_cpu; }
  };
  {
    forced g(halves_order::one_after_other);
    f(0);
  }
  forced g(halves_order::interleaved);
  f(1);
}

// Whether n is above SMAX_TEST_MAX_N (reported as skipped).
bool above_max_n(std::size_t n) {
  if (n <= smax_test::max_n()) return false;
  WARN("SKIPPED: n = " << n << " is above SMAX_TEST_MAX_N = " << smax_test::max_n());
  return true;
}

}  // namespace

// ... and the merge must keep the accuracy where the halves' scales differ
// by far more than the range of one term.
TEMPLATE_TEST_CASE("two halves: the same bits read in either order; halves of very different scale",
                   "[large]", float, double) {
  using T = TestType;
  namespace d = smax::dynamic;
  const std::size_t n = smax::detail::two_halves_min_bytes / sizeof(T) + 37;
  if (above_max_n(n)) return;
  const auto x0 = smax_test::normal<T>(n, 3.0, 41);
  const std::size_t half = n / 2;
  const T inf = std::numeric_limits<T>::infinity();
  struct variant {
    const char* name;
    std::function<void(std::vector<T>&)> edit;
  };
  const std::vector<variant> variants = {
      {"normal(0, 3)", [](std::vector<T>&) {}},
      {"first half 60 lower", [&](std::vector<T>& x) { for (std::size_t i = 0; i < half; ++i) x[i] -= T(60); }},
      {"second half 60 lower", [&](std::vector<T>& x) { for (std::size_t i = half; i < n; ++i) x[i] -= T(60); }},
      {"first half 200 lower", [&](std::vector<T>& x) { for (std::size_t i = 0; i < half; ++i) x[i] -= T(200); }},
      {"second half 40 higher", [&](std::vector<T>& x) { for (std::size_t i = half; i < n; ++i) x[i] += T(40); }},
      {"NaN in the first half", [](std::vector<T>& x) { x[5] = std::numeric_limits<T>::quiet_NaN(); }},
      {"+inf in the tail", [&](std::vector<T>& x) { x[n - 3] = inf; }},
  };
  std::vector<T> y[2] = {std::vector<T>(n), std::vector<T>(n)}, ly[2] = {std::vector<T>(n), std::vector<T>(n)};
  double lse[2];
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (const auto& v : variants) {
      INFO(isa << " " << v.name << " n " << n);
      auto x = x0;
      v.edit(x);
      in_both_orders([&](int k) {
        d::softmax(x.data(), y[k].data(), n, smax::algorithm::two_pass);
        d::log_softmax(x.data(), ly[k].data(), n);
        lse[k] = d::logsumexp(x.data(), n);
      });
      CHECK(smax_test::same_bits(y[0], y[1]));
      CHECK(smax_test::same_bits(ly[0], ly[1]));
      CHECK(std::memcmp(&lse[0], &lse[1], sizeof(double)) == 0);
      if (x[5] != x[5]) {
        CHECK(y[0][0] != y[0][0]);
        CHECK(lse[0] != lse[0]);
      } else if (x[n - 3] == inf) {
        CHECK(y[0][n - 3] == T(1));
        CHECK(y[0][0] == T(0));
        CHECK(lse[0] == std::numeric_limits<double>::infinity());
      } else {
        const auto ref = smax_test::ref_softmax(x);
        CHECK(smax_test::max_rel_err(y[0], ref) < (sizeof(T) == 4 ? 1e-6 : 2e-14));
        long double m = x[0];
        for (T e : x) m = std::max<long double>(m, e);
        long double s = 0;
        for (T e : x) s += std::exp(static_cast<long double>(e) - m);
        const long double want = m + std::log(s);
        CHECK(std::fabs(static_cast<long double>(lse[0]) - want) <=
              (sizeof(T) == 4 ? 1e-6L : 1e-13L) * std::max(1.0L, std::fabs(want)));
      }
    }
  }
}

TEST_CASE("two halves: bf16 softmax, the same bits read in either order", "[large]") {
  const std::size_t n = smax::detail::two_halves_min_bytes / sizeof(smax::bf16) + 37;
  if (above_max_n(n)) return;
  const auto xf = smax_test::normal<float>(n, 3.0, 43);
  std::vector<smax::bf16> x(n), y[2] = {std::vector<smax::bf16>(n), std::vector<smax::bf16>(n)};
  for (std::size_t i = 0; i < n; ++i) x[i] = smax::bf16(xf[i] - (i < n / 2 ? 30.0f : 0.0f));
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    INFO(isa);
    in_both_orders([&](int k) { smax::dynamic::softmax(x.data(), y[k].data(), n, smax::algorithm::two_pass); });
    CHECK(std::memcmp(y[0].data(), y[1].data(), n * sizeof(smax::bf16)) == 0);
    double s = 0;
    for (auto v : y[0]) s += static_cast<double>(static_cast<float>(v));
    CHECK(std::fabs(s - 1.0) < 0.01);
  }
}
