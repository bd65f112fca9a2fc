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
