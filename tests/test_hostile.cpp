// Hostile and unusual conditions: flush-to-zero / denormals-are-zero modes,
// many threads calling at once, n = 0 with null pointers.
#include <atomic>
#include <cstring>
#include <thread>

#include "common.hpp"
#include "family.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace {

// Sets FTZ and DAZ (x86 MXCSR bits 15 and 6; aarch64 FPCR.FZ, which flushes
// both inputs and outputs) for the current thread while alive.
class flush_denormals {
 public:
  flush_denormals() {
#if defined(__x86_64__) || defined(__i386__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | 0x8040u);
#elif defined(__aarch64__)
    asm volatile("mrs %0, fpcr" : "=r"(saved_));
    const std::uint64_t fz = saved_ | (std::uint64_t(1) << 24);
    asm volatile("msr fpcr, %0" : : "r"(fz));
#endif
  }
  ~flush_denormals() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(saved_);
#elif defined(__aarch64__)
    asm volatile("msr fpcr, %0" : : "r"(saved_));
#endif
  }
  // Whether the mode is really on: a denormal product flushes to zero.
  static bool active() {
    volatile float tiny = 1e-30f;
    volatile float r = tiny * 1e-10f;
    return r == 0.0f;
  }

 private:
#if defined(__x86_64__) || defined(__i386__)
  unsigned saved_ = 0;
#else
  std::uint64_t saved_ = 0;
#endif
};

template <class T>
void check_modes_body(const std::string& isa) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  for (std::size_t n : {1, 7, 64, 1000}) {
    // Values whose exponentials underflow into the denormal range, and
    // denormal inputs.
    auto x = smax_test::normal<T>(n, 40.0, n);
    x[0] = std::numeric_limits<T>::denorm_min();
    if (n > 2) x[2] = -std::numeric_limits<T>::denorm_min();
    const auto ref = smax_test::ref_softmax(x);
    for (auto a : {smax::algorithm::three_pass_recompute, smax::algorithm::three_pass_reload,
                   smax::algorithm::two_pass, smax::algorithm::online}) {
      std::vector<T> y(n);
      smax::dynamic::softmax(x.data(), y.data(), n, a);
      INFO("isa " << isa << " n " << n << " algorithm " << static_cast<int>(a));
      CHECK(smax_test::max_rel_err(y, ref) < (sizeof(T) == 4 ? 1e-6 : 1e-13));
      for (T v : y) CHECK((v >= 0 && v <= 1));
    }
    // The special-value rules hold in these modes too.
    std::vector<T> s(n, -inf), y(n);
    s[n / 2] = inf;
    smax::dynamic::softmax(s.data(), y.data(), n);
    for (std::size_t i = 0; i < n; ++i) CHECK(y[i] == (i == n / 2 ? T(1) : T(0)));
  }
}

}  // namespace

TEST_CASE("flush-to-zero and denormals-are-zero modes keep accuracy and the rules", "[hostile]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    check_modes_body<float>(isa);
    check_modes_body<double>(isa);
    {
      flush_denormals mode;
      // x86 and aarch64 (QEMU too) have the mode: not reaching it is a failure.
      REQUIRE(flush_denormals::active());
      check_modes_body<float>(isa);
      check_modes_body<double>(isa);
    }
  }
}

TEST_CASE("many threads calling every function at once get the single-thread results", "[hostile][threads]") {
  const std::size_t n = 3001;
  const auto x = smax_test::normal<float>(n, 5.0, 1);
  const auto dy = smax_test::normal<float>(n, 1.0, 2);
  // Single-threaded expectations, on the default ISA.
  std::vector<float> sm(n), lsm(n), dsm(n), dlsm(n);
  smax::dynamic::softmax(x.data(), sm.data(), n, smax::algorithm::two_pass);
  smax::dynamic::log_softmax(x.data(), lsm.data(), n);
  smax::dynamic::softmax_backward(sm.data(), dy.data(), dsm.data(), n);
  smax::dynamic::log_softmax_backward(lsm.data(), dy.data(), dlsm.data(), n);

  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      std::vector<float> a(n), b(n), c(n), d(n);
      for (int rep = 0; rep < 25; ++rep) {
        smax::dynamic::softmax(x.data(), a.data(), n, smax::algorithm::two_pass);
        smax::dynamic::log_softmax(x.data(), b.data(), n);
        smax::dynamic::softmax_backward(a.data(), dy.data(), c.data(), n);
        smax::dynamic::log_softmax_backward(b.data(), dy.data(), d.data(), n);
        if (a != sm || b != lsm || c != dsm || d != dlsm) ++mismatches;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(mismatches == 0);
}

TEST_CASE("n = 0 with null pointers touches nothing", "[hostile]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (auto a : {smax::algorithm::automatic, smax::algorithm::three_pass_recompute,
                   smax::algorithm::three_pass_reload, smax::algorithm::two_pass, smax::algorithm::online}) {
      smax::dynamic::softmax(static_cast<const float*>(nullptr), nullptr, 0, a);
      smax::dynamic::softmax(static_cast<const double*>(nullptr), nullptr, 0, a);
    }
    smax::dynamic::log_softmax(static_cast<const float*>(nullptr), nullptr, 0);
    smax::dynamic::log_softmax(static_cast<const double*>(nullptr), nullptr, 0);
    smax::dynamic::softmax_backward(static_cast<const float*>(nullptr), nullptr, nullptr, 0);
    smax::dynamic::log_softmax_backward(static_cast<const double*>(nullptr), nullptr, nullptr, 0);
    // And with real buffers: not one element of the output side is written.
    smax_test::guarded<float> x(0, 0, 2.5f), y(0, 0, -7.25f);
    for (auto a : {smax::algorithm::automatic, smax::algorithm::three_pass_recompute,
                   smax::algorithm::three_pass_reload, smax::algorithm::two_pass, smax::algorithm::online})
      smax::dynamic::softmax(x.data(), y.data(), 0, a);
    smax::dynamic::log_softmax(x.data(), y.data(), 0);
    smax::dynamic::softmax_backward(x.data(), x.data(), y.data(), 0);
    INFO("isa " << isa);
    CHECK(y.intact());
  }
}

namespace {

using smax_test::every_kernel;

// Largest |a - b| relative to max(|b|, floor) over the elements.
template <class T>
double max_rel_diff(const std::vector<T>& a, const std::vector<T>& b, double floor) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) / std::max(std::fabs(double(b[i])), floor));
  }
  return worst;
}

template <class T>
void every_function_in_flush_modes(const std::string& isa) {
  // Logits spread wide enough that many outputs and intermediate terms fall
  // in the denormal range, plus denormal inputs.
  const std::size_t n = 777;
  auto x = smax_test::normal<T>(n, 30.0, 5);
  x[3] = std::numeric_limits<T>::denorm_min();
  x[4] = -std::numeric_limits<T>::denorm_min();
  const auto dy = smax_test::normal<T>(n, 1.0, 6);
  // Outputs may differ only where a denormal was flushed: relative to the
  // output scale of each function (1 for probabilities and gradients of
  // unit-scale dy, |log| for the log forms), at most a few ulp.
  const double tol = sizeof(T) == 4 ? 1e-5 : 1e-13;
  for (const auto& f : every_kernel<T>()) {
    std::vector<T> normal_mode(n), flushed(n);
    f.run(x.data(), dy.data(), normal_mode.data(), n);
    {
      flush_denormals mode;
      REQUIRE(flush_denormals::active());
      f.run(x.data(), dy.data(), flushed.data(), n);
    }
    INFO("isa " << isa << " " << f.name);
    CHECK(max_rel_diff(flushed, normal_mode, 1.0) <= tol);
  }
}

}  // namespace

TEST_CASE("every function keeps its results in flush-to-zero / denormals-are-zero mode", "[hostile]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    every_function_in_flush_modes<float>(isa);
    every_function_in_flush_modes<double>(isa);
  }
}

// Eight threads, each running every function in turn (different ones at
// once), against the bits of one thread's calls.
template <class T>
void threads_get_single_thread_bits(std::size_t n) {
  const auto fns = every_kernel<T>();
  const auto x = smax_test::normal<T>(n, 4.0, 11);
  const auto dy = smax_test::normal<T>(n, 1.0, 12);
  std::vector<std::vector<T>> expect(fns.size(), std::vector<T>(n));
  for (std::size_t k = 0; k < fns.size(); ++k) fns[k].run(x.data(), dy.data(), expect[k].data(), n);
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      std::vector<T> out(n);
      for (int rep = 0; rep < 6; ++rep)
        for (std::size_t j = 0; j < fns.size(); ++j) {
          const std::size_t k = (j + t) % fns.size();  // threads in different functions at once
          fns[k].run(x.data(), dy.data(), out.data(), n);
          if (std::memcmp(out.data(), expect[k].data(), n * sizeof(T)) != 0) ++mismatches;
        }
    });
  for (auto& t : threads) t.join();
  CHECK(mismatches == 0);
}

TEST_CASE("many threads calling every function of the API at once get the single-thread bits", "[hostile][threads]") {
  threads_get_single_thread_bits<float>(2049);
  // (16-bit rows beyond a block, 2048: the kernels' per-thread workspace)
  threads_get_single_thread_bits<smax::bf16>(5001);
  threads_get_single_thread_bits<smax::fp16>(5001);
}

TEST_CASE("n = 0 with null pointers touches nothing, for every function", "[hostile]") {
  for (const auto& isa : smax_test::isas()) {
    smax_test::use_isa guard(isa);
    for (const auto& f : every_kernel<float>()) f.run(nullptr, nullptr, nullptr, 0);
    for (const auto& f : every_kernel<double>()) f.run(nullptr, nullptr, nullptr, 0);
    for (const auto& f : every_kernel<smax::bf16>()) f.run(nullptr, nullptr, nullptr, 0);
    for (const auto& f : every_kernel<smax::fp16>()) f.run(nullptr, nullptr, nullptr, 0);
    smax::dynamic::softpick_backward(static_cast<const float*>(nullptr), nullptr, nullptr, nullptr, 0);
    smax::dynamic::stablemax_backward(static_cast<const double*>(nullptr), nullptr, nullptr, 0);
    // With real buffers around n = 0: nothing written before or after
    // (the ASan and UBSan builds check the accesses of the null calls).
    smax_test::guarded<float> x(0, 0, 2.5f), dy(0, 0, 0.5f);
    for (const auto& f : every_kernel<float>()) {
      smax_test::guarded<float> out(0, 0, -7.25f);
      f.run(x.data(), dy.data(), out.data(), 0);
      INFO("isa " << isa << " " << f.name);
      CHECK(out.intact());
    }
  }
}
