// Hostile and unusual conditions: flush-to-zero / denormals-are-zero modes,
// many threads calling at once, n = 0 with null pointers.
#include <atomic>
#include <cstring>
#include <thread>

#include "common.hpp"

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
      if (!flush_denormals::active()) {
        WARN("could not enable flush-to-zero on this platform; only the default mode was tested");
        continue;
      }
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
    SUCCEED("no crash");
  }
}
