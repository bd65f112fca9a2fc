// The rest of the family on bf16 / fp16 (half_family.hpp), every ISA: each
// 16-bit output is the float kernel's result on the widened inputs rounded
// once (the same bits), forward outputs within one 16-bit ulp of the double
// kernel's, backward outputs within one ulp plus 2^-16 (1 + the row's
// largest |dx|): where terms of size ~1 cancel, the float kernel's error is
// relative to them, not to dx (n = 1 gives exact zeros in double);
// in place, guards, batched rows (any executor, the same bits), rows longer
// than the kept workspace, and bad arguments that write nothing.
#include <string>

#include <smax/dynamic.hpp>
#include <smax/parallel.hpp>
#include <smax/smax.hpp>

#include "common.hpp"
#include "half_common.hpp"

namespace {

using smax::bf16;
using smax::fp16;
using smax_test::bits_of;
using smax_test::format;
using smax_test::isas;
using smax_test::logits;
using smax_test::ulp;
using smax_test::use_isa;

template <class P, class H>
std::vector<P> widen_to(const std::vector<H>& h) {
  std::vector<P> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) out[i] = static_cast<P>(static_cast<float>(h[i]));
  return out;
}

template <class H>
std::vector<H> narrow_from(const std::vector<float>& f) {
  std::vector<H> out(f.size());
  for (std::size_t i = 0; i < f.size(); ++i) out[i] = H(f[i]);
  return out;
}

template <class H>
bool same_bits(const std::vector<H>& a, const std::vector<H>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(H)) == 0);
}

// The same bits, except that any NaN matches any NaN: a NaN's sign and
// payload follow which operand of a commutative operation the compiler
// made the first (x86 passes the first operand's NaN on), which differs
// between the float kernel's tail and the 16-bit form's.
template <class H>
bool same_bits_or_nan(const std::vector<H>& a, const std::vector<H>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const float p = static_cast<float>(a[i]), q = static_cast<float>(b[i]);
    if (!(p != p && q != q) && bits_of(a[i]) != bits_of(b[i])) return false;
  }
  return true;
}

enum class kind { forward, backward };

// One function of the family: f(x, y, dy, out, n) on pointers to H, float or
// double (unused inputs ignored); y is fwd(x) for backward passes.
template <class H, class F, class Fwd>
void check_function(const char* name, kind k, F&& f, Fwd&& fwd, double sigma = 2.0) {
  const H guard = H::from_bits(0x7bcd);
  std::vector<std::size_t> ns{1, 2, 7, 16, 33, 100, 1000, 4097};
  if (smax_test::max_n() >= 20000) ns.push_back(16385);    // two blocks of an element-wise member
  if (smax_test::max_n() >= 300000) ns.push_back(270001);  // beyond the kept workspace
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : ns) {
      INFO(name << " " << isa << " " << format<H>::name() << " n=" << n);
      const std::vector<H> x = logits<H>(n, sigma, n + 5), dy = logits<H>(n, 1.0, n + 6);
      std::vector<H> y(n);
      fwd(static_cast<const H*>(x.data()), y.data(), n);
      // the 16-bit call, between guards
      std::vector<H> out(n + 2, guard);
      f(x.data(), static_cast<const H*>(y.data()), dy.data(), out.data() + 1, n);
      CHECK(bits_of(out[0]) == bits_of(guard));
      CHECK(bits_of(out[n + 1]) == bits_of(guard));
      const std::vector<H> got(out.begin() + 1, out.end() - 1);
      // the float kernel on the widened inputs, rounded once: the same bits
      const auto xf = widen_to<float>(x), yf = widen_to<float>(y), dyf = widen_to<float>(dy);
      std::vector<float> of(n);
      f(xf.data(), yf.data(), dyf.data(), of.data(), n);
      CHECK(same_bits(got, narrow_from<H>(of)));
      // the double kernel: within one 16-bit ulp (backward: plus 2^-16 (1 + max |dx|))
      const auto xd = widen_to<double>(x), yd = widen_to<double>(y), dyd = widen_to<double>(dy);
      std::vector<double> od(n);
      f(xd.data(), yd.data(), dyd.data(), od.data(), n);
      long double floor = 0;
      if (k == kind::backward) {
        for (double v : od) floor = std::max<long double>(floor, std::fabs(v));
        floor = std::ldexp(1 + floor, -16);
      }
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const long double e = od[i], g = static_cast<float>(got[i]);
        if (e != e) {
          bad += g == g;
          continue;
        }
        const long double tol = (e != 0 ? ulp<H>(e) : 0.0L) + floor + 1e-30L;
        bad += !(std::fabs(g - e) <= tol);
      }
      CHECK(bad == 0);
      // in place over x (forward) or dy (backward): the same bits
      if (k == kind::forward) {
        std::vector<H> io = x;
        f(io.data(), static_cast<const H*>(y.data()), dy.data(), io.data(), n);
        CHECK(same_bits(io, got));
      } else {
        std::vector<H> io = dy;
        f(x.data(), static_cast<const H*>(y.data()), io.data(), io.data(), n);
        CHECK(same_bits(io, got));
      }
    }
  }
}

template <class H>
struct no_forward {
  void operator()(const H*, H*, std::size_t) const {}
};

}  // namespace

TEMPLATE_TEST_CASE("16-bit family: each forward is the float kernel rounded once, within one 16-bit ulp",
                   "[half][family]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  const no_forward<H> none;
  check_function<H>("stablemax", kind::forward, [](auto x, auto, auto, auto o, std::size_t n) { d::stablemax(x, o, n); }, none);
  check_function<H>("log_stablemax", kind::forward,
                    [](auto x, auto, auto, auto o, std::size_t n) { d::log_stablemax(x, o, n); }, none);
  check_function<H>("softpick", kind::forward, [](auto x, auto, auto, auto o, std::size_t n) { d::softpick(x, o, n, 1e-6f); }, none);
  check_function<H>("ssmax", kind::forward, [](auto x, auto, auto, auto o, std::size_t n) { d::ssmax(x, o, n, 0.7f, 0.25f); }, none);
  check_function<H>("sparsemax", kind::forward, [](auto x, auto, auto, auto o, std::size_t n) { d::sparsemax(x, o, n); }, none);
  check_function<H>("entmax15", kind::forward, [](auto x, auto, auto, auto o, std::size_t n) { d::entmax15(x, o, n); }, none);
  check_function<H>("entmax_bisect", kind::forward,
                    [](auto x, auto, auto, auto o, std::size_t n) { d::entmax_bisect(x, o, n, 1.3f, 60); }, none);
  check_function<H>("sigmoid_attention", kind::forward,
                    [](auto x, auto, auto, auto o, std::size_t n) { d::sigmoid_attention(x, o, n, -0.5f); }, none);
  check_function<H>("sa_softmax", kind::forward, [](auto x, auto, auto, auto o, std::size_t n) { d::sa_softmax(x, o, n); }, none);
  check_function<H>("sa_softmax normalized", kind::forward,
                    [](auto x, auto, auto, auto o, std::size_t n) { d::sa_softmax(x, o, n, true); }, none);
  check_function<H>("multimax", kind::forward,
                    [](auto x, auto, auto, auto o, std::size_t n) { d::multimax(x, o, n, smax::multimax_params{}); }, none);
  check_function<H>("asentmax", kind::forward,
                    [](auto x, auto, auto, auto o, std::size_t n) { d::asentmax(x, o, n, 1.5f, 0.5f, 0.1f); }, none);
}

TEMPLATE_TEST_CASE("16-bit family: each backward is the float kernel rounded once", "[half][family][backward]", bf16,
                   fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  const no_forward<H> none;
  check_function<H>("stablemax_backward", kind::backward,
                    [](auto x, auto, auto dy, auto o, std::size_t n) { d::stablemax_backward(x, dy, o, n); }, none);
  check_function<H>("softpick_backward", kind::backward,
                    [](auto x, auto y, auto dy, auto o, std::size_t n) { d::softpick_backward(x, y, dy, o, n, 1e-6f); },
                    [](const H* x, H* y, std::size_t n) { d::softpick(x, y, n, 1e-6f); });
  check_function<H>("sparsemax_backward", kind::backward,
                    [](auto, auto y, auto dy, auto o, std::size_t n) { d::sparsemax_backward(y, dy, o, n); },
                    [](const H* x, H* y, std::size_t n) { d::sparsemax(x, y, n); });
  check_function<H>("entmax_backward", kind::backward,
                    [](auto, auto y, auto dy, auto o, std::size_t n) { d::entmax_backward(y, dy, o, n, 1.5f); },
                    [](const H* x, H* y, std::size_t n) { d::entmax15(x, y, n); });
  check_function<H>("sigmoid_attention_backward", kind::backward,
                    [](auto x, auto y, auto dy, auto o, std::size_t n) { d::sigmoid_attention_backward(x, y, dy, o, n, -0.5f); },
                    [](const H* x, H* y, std::size_t n) { d::sigmoid_attention(x, y, n, -0.5f); });
  check_function<H>("sa_softmax_backward", kind::backward,
                    [](auto x, auto y, auto dy, auto o, std::size_t n) { d::sa_softmax_backward(x, y, dy, o, n, true); },
                    [](const H* x, H* y, std::size_t n) { d::sa_softmax(x, y, n, true); });
  check_function<H>("multimax_backward", kind::backward,
                    [](auto x, auto y, auto dy, auto o, std::size_t n) {
                      d::multimax_backward(x, y, dy, o, n, smax::multimax_params{});
                    },
                    [](const H* x, H* y, std::size_t n) { d::multimax(x, y, n, smax::multimax_params{}); });
  check_function<H>("asentmax_backward", kind::backward,
                    [](auto x, auto y, auto dy, auto o, std::size_t n) { d::asentmax_backward(x, y, dy, o, n, 1.5f, 0.5f, 0.1f); },
                    [](const H* x, H* y, std::size_t n) { d::asentmax(x, y, n, 1.5f, 0.5f, 0.1f); });
  check_function<H>("cross_entropy_backward", kind::backward,
                    [](auto x, auto, auto, auto o, std::size_t n) { d::cross_entropy_backward(x, n, n / 2, 0.75, o, 0.1f); },
                    none);
}

TEMPLATE_TEST_CASE("16-bit family: gumbel, top-k, sampling and losses give the float kernel's results",
                   "[half][family]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : {1, 5, 100, 4097}) {
      INFO(isa << " " << format<H>::name() << " n=" << n);
      const std::vector<H> x = logits<H>(n, 3.0, n);
      const auto xf = widen_to<float>(x);
      // gumbel_noise and gumbel_softmax (soft and hard)
      std::vector<H> g(n);
      std::vector<float> gf(n);
      d::gumbel_noise(g.data(), n, 42, 7);
      d::gumbel_noise(gf.data(), n, 42, 7);
      CHECK(same_bits(g, narrow_from<H>(gf)));
      for (bool hard : {false, true}) {
        std::vector<H> y(n);
        std::vector<float> yf(n);
        d::gumbel_softmax(x.data(), y.data(), n, 0.5f, 9, hard);
        d::gumbel_softmax(xf.data(), yf.data(), n, 0.5f, 9, hard);
        CHECK(same_bits(y, narrow_from<H>(yf)));
      }
      // topk_softmax: the same indices, probs rounded once
      const std::size_t k = std::min<std::size_t>(n, 5);
      std::vector<H> p(k);
      std::vector<float> pf(k);
      std::vector<std::uint32_t> ix(k), ixf(k);
      d::topk_softmax(x.data(), n, k, p.data(), ix.data());
      d::topk_softmax(xf.data(), n, k, pf.data(), ixf.data());
      CHECK(ix == ixf);
      CHECK(same_bits(p, narrow_from<H>(pf)));
      // sample, logsumexp, cross_entropy: the float kernel's results exactly
      smax::sampling s;
      s.temperature = 0.8f;
      s.top_p = 0.9f;
      CHECK(d::sample(x.data(), n, s, 3, 1) == d::sample(xf.data(), n, s, 3, 1));
      CHECK(d::logsumexp(x.data(), n) == d::logsumexp(xf.data(), n));
      CHECK(d::cross_entropy(x.data(), n, n - 1, 0.1f) == d::cross_entropy(xf.data(), n, n - 1, 0.1f));
      const double lse = d::logsumexp(x.data(), n);
      std::vector<H> dx(n), dx2(n);
      d::cross_entropy_backward(x.data(), n, 0, 1.0, dx.data());
      d::cross_entropy_backward(x.data(), n, 0, 1.0, dx2.data(), 0.0f, lse);
      CHECK(same_bits(dx, dx2));
    }
  }
}

// topk_softmax and sample on 16-bit x read x as 16-bit (topk.hpp): the
// selection's compares, the sum and sample's blocks of 2048 widen x as they
// go. Every path of both against the float kernel on the widened x: rows
// across the block boundaries, misaligned x, k from 1 to n, each sampling
// mode (argmax, top_k, the top_p histogram, min_p alone), and the special
// rows (NaN, +inf, -inf entries, all -inf).
TEMPLATE_TEST_CASE("16-bit topk_softmax and sample read x as 16-bit: the float kernel's results on every path",
                   "[half][family][topk]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::vector<smax::sampling> modes(5);
  modes[0].temperature = 0;
  modes[1].temperature = 0.8f, modes[1].top_k = 40, modes[1].top_p = 0.95f;
  modes[2].temperature = 1.3f, modes[2].top_p = 0.9f;
  modes[3].temperature = 0.7f, modes[3].min_p = 0.05f;
  modes[4].temperature = 1.0f, modes[4].top_p = 0.5f, modes[4].min_p = 0.01f;
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : {3, 64, 2047, 2048, 2049, 6001}) {
      modes[1].top_k = std::min<std::size_t>(40, n);
      for (int row = 0; row < 6; ++row) {
        INFO(isa << " " << format<H>::name() << " n=" << n << " row kind " << row);
        std::vector<H> buf(n + 1);
        const std::vector<H> base = logits<H>(n, 3.0, 17 * n + row);
        std::copy(base.begin(), base.end(), buf.begin() + 1);
        H* x = buf.data() + 1;  // 2-byte aligned only
        if (row == 1) x[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
        if (row == 2) x[n - 1] = x[0] = H(inf);
        if (row == 3)
          for (std::size_t i = 0; i < n; i += 2) x[i] = H(-inf);
        if (row == 4)
          for (std::size_t i = 0; i < n; ++i) x[i] = H(-inf);
        if (row == 5)
          for (std::size_t i = 0; i < n; ++i) x[i] = H(static_cast<float>(i % 7));  // ties
        std::vector<float> xf(n);
        for (std::size_t i = 0; i < n; ++i) xf[i] = static_cast<float>(x[i]);
        for (std::size_t k : {std::size_t(1), std::size_t(5), std::size_t(64), n}) {
          if (k > n) continue;
          std::vector<H> p(k);
          std::vector<float> pf(k);
          std::vector<std::uint32_t> ix(k), ixf(k);
          d::topk_softmax(x, n, k, p.data(), ix.data());
          d::topk_softmax(xf.data(), n, k, pf.data(), ixf.data());
          CHECK(ix == ixf);
          CHECK(same_bits(p, narrow_from<H>(pf)));
        }
        for (std::size_t m = 0; m < modes.size(); ++m)
          for (std::uint64_t offset = 0; offset < 3; ++offset) {
            INFO("sampling mode " << m << " offset " << offset);
            CHECK(d::sample(x, n, modes[m], 11, offset) == d::sample(xf.data(), n, modes[m], 11, offset));
          }
      }
    }
  }
}

TEMPLATE_TEST_CASE("16-bit family: batched rows as single rows, any executor", "[half][family][batched]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  smax::thread_pool pool(2);
  const std::size_t rows = 5, cols = 301;
  const std::vector<H> x = logits<H>(rows * cols, 2.0, 11), dy = logits<H>(rows * cols, 1.0, 12);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    std::vector<H> y(rows * cols);
    d::entmax15(smax::matrix_view<const H>(x.data(), rows, cols), smax::matrix_view<H>(y.data(), rows, cols));
    for (smax::executor* ex : {static_cast<smax::executor*>(nullptr), static_cast<smax::executor*>(&pool)}) {
      INFO(isa << " " << format<H>::name() << (ex ? " pool" : " this thread"));
      const smax::matrix_view<const H> xv(x.data(), rows, cols), yv(y.data(), rows, cols), dyv(dy.data(), rows, cols);
      std::vector<H> a(rows * cols), b(cols);
      const smax::matrix_view<H> av(a.data(), rows, cols);
      const auto rows_match = [&](auto&& single) {
        bool ok = true;
        for (std::size_t r = 0; r < rows; ++r) {
          single(r, b.data());
          ok = ok && std::memcmp(b.data(), a.data() + r * cols, cols * sizeof(H)) == 0;
        }
        return ok;
      };
      d::ssmax(xv, av, 0.7f, 0.25f, ex);
      CHECK(rows_match([&](std::size_t r, H* o) { d::ssmax(x.data() + r * cols, o, cols, 0.7f, 0.25f); }));
      d::entmax_bisect(xv, av, 1.3f, 50, ex);
      CHECK(rows_match([&](std::size_t r, H* o) { d::entmax_bisect(x.data() + r * cols, o, cols, 1.3f); }));
      d::entmax_backward(yv, dyv, av, 1.5f, ex);
      CHECK(rows_match([&](std::size_t r, H* o) {
        d::entmax_backward(y.data() + r * cols, dy.data() + r * cols, o, cols, 1.5f);
      }));
      d::softpick_backward(xv, yv, dyv, av, 1e-6f, ex);
      CHECK(rows_match([&](std::size_t r, H* o) {
        d::softpick_backward(x.data() + r * cols, y.data() + r * cols, dy.data() + r * cols, o, cols, 1e-6f);
      }));
      d::gumbel_softmax(xv, av, 0.5f, 77, false, ex);
      CHECK(rows_match([&](std::size_t r, H* o) {
        d::gumbel_softmax(x.data() + r * cols, o, cols, 0.5f, smax::gumbel_row_seed(77, r));
      }));
      // the arch-tag and default-arch spellings: the same bits as dynamic
      // on the default ISA
    }
  }
  std::vector<H> a(rows * cols), b(rows * cols);
  smax::sparsemax(smax::matrix_view<const H>(x.data(), rows, cols), smax::matrix_view<H>(a.data(), rows, cols));
  d::set_isa(nullptr);
  for (std::size_t r = 0; r < rows; ++r) smax::sparsemax(x.data() + r * cols, b.data() + r * cols, cols);
  CHECK(same_bits(a, b));
}

TEMPLATE_TEST_CASE("16-bit family: bad arguments throw and write nothing", "[half][family][errors]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  const std::vector<H> x = logits<H>(64, 2.0, 1);
  const H guard = H::from_bits(0x7bcd);
  std::vector<H> y(64, guard);
  const auto untouched = [&] { return std::all_of(y.begin(), y.end(), [&](H h) { return h.bits == guard.bits; }); };
  CHECK_THROWS_AS(d::entmax_bisect(x.data(), y.data(), 64, 0.5f), std::invalid_argument);
  CHECK_THROWS_AS(d::softpick(x.data(), y.data(), 64, -1.0f), std::invalid_argument);
  CHECK_THROWS_AS(d::gumbel_softmax(x.data(), y.data(), 64, 0.0f, 1), std::invalid_argument);
  CHECK_THROWS_AS(d::ssmax(x.data(), y.data(), 64, std::numeric_limits<float>::infinity()), std::invalid_argument);
  {  // the checks of the 16-bit kernels (ssmax, softpick): the float forms' messages
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> xf(64), yf(64);
    const auto same_error = [&](auto&& half_call, auto&& float_call) {
      std::string want, got;
      try {
        float_call();
      } catch (const std::invalid_argument& e) {
        want = e.what();
      }
      try {
        half_call();
      } catch (const std::invalid_argument& e) {
        got = e.what();
      }
      CHECK(!want.empty());
      CHECK(got == want);
    };
    same_error([&] { d::ssmax(x.data(), y.data(), 64, 1e38f); }, [&] { d::ssmax(xf.data(), yf.data(), 64, 1e38f); });
    same_error([&] { d::ssmax(x.data(), y.data(), 64, 1.0f, nan); }, [&] { d::ssmax(xf.data(), yf.data(), 64, 1.0f, nan); });
    same_error([&] { d::ssmax(x.data(), y.data(), 64, -inf); }, [&] { d::ssmax(xf.data(), yf.data(), 64, -inf); });
    same_error([&] { d::softpick(x.data(), y.data(), 64, nan); }, [&] { d::softpick(xf.data(), yf.data(), 64, nan); });
    same_error([&] { d::softpick(x.data(), y.data(), 64, inf); }, [&] { d::softpick(xf.data(), yf.data(), 64, inf); });
  }
  CHECK_THROWS_AS(d::sigmoid_attention(x.data(), y.data(), 64, std::numeric_limits<float>::quiet_NaN()),
                  std::invalid_argument);
  {  // an element-wise member's long row runs in blocks: the first one checks
    const std::vector<H> xl = logits<H>(40000, 2.0, 2);
    std::vector<H> yl(40000, guard);
    CHECK_THROWS_AS(d::sigmoid_attention(xl.data(), yl.data(), 40000, std::numeric_limits<float>::infinity()),
                    std::invalid_argument);
    CHECK(std::all_of(yl.begin(), yl.end(), [&](H h) { return h.bits == guard.bits; }));
  }
  CHECK_THROWS_AS(d::cross_entropy_backward(x.data(), 64, 64, 1.0, y.data()), std::invalid_argument);
  CHECK_THROWS_AS(d::cross_entropy(x.data(), 64, 64), std::invalid_argument);
  std::uint32_t ix[65];
  CHECK_THROWS_AS(d::topk_softmax(x.data(), 64, 65, y.data(), ix), std::invalid_argument);
  smax::sampling s;
  s.top_p = 0;
  CHECK_THROWS_AS(d::sample(x.data(), 64, s, 1), std::invalid_argument);
  CHECK_THROWS_AS(d::entmax15(smax::matrix_view<const H>(x.data(), 2, 32), smax::matrix_view<H>(y.data(), 2, 31)),
                  std::invalid_argument);
  CHECK_THROWS_AS(smax::entmax_bisect(smax::matrix_view<const H>(x.data(), 2, 32),
                                      smax::matrix_view<H>(y.data(), 2, 32), 0.5f),
                  std::invalid_argument);
  CHECK(untouched());
  // n = 0 touches nothing
  d::sparsemax(static_cast<const H*>(nullptr), static_cast<H*>(nullptr), 0);
  smax::stablemax(static_cast<const H*>(nullptr), static_cast<H*>(nullptr), 0);
}

// logsumexp, cross_entropy and its backward read 16-bit x as it is (no
// float copy): the float kernels' results on the widened x, on rows each of
// their paths takes (the one-read sum; NaN, +-inf, all -inf and |x| beyond
// the single-pass range, which fall back to the widened row), in place,
// with and without a saved logsumexp.
TEMPLATE_TEST_CASE("16-bit losses read x as 16-bit: the float kernels' results, every path", "[half][family][losses]",
                   bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  const auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::size_t> ns{1, 3, 100, 4097};
  if (smax_test::max_n() >= 131072) ns.push_back(65536 + 4099);  // two blocks of the smoothed mean
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : ns) {
      for (int row = 0; row < 6; ++row) {
        std::vector<H> x = logits<H>(n, 3.0, n + row);
        if (row == 1) x[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
        if (row == 2) x[n / 3] = H(inf);
        if (row == 3) std::fill(x.begin(), x.end(), H(-inf));
        if (row == 4)  // every |x| beyond split_limit (float: 4096), in each type's range
          for (auto& v : x) v = H(-5000.0f - std::fabs(static_cast<float>(v)));
        if (row == 5) x[0] = H(-inf);
        const std::vector<float> xf = widen_to<float>(x);
        const std::size_t t = n / 2;
        INFO(isa << " " << format<H>::name() << " n=" << n << " row kind " << row);
        const double lse = d::logsumexp(x.data(), n);
        CHECK(same(lse, d::logsumexp(xf.data(), n)));
        for (float ls : {0.0f, 0.1f}) {
          CHECK(same(d::cross_entropy(x.data(), n, t, ls), d::cross_entropy(xf.data(), n, t, ls)));
          // (an infinite or huge dloss, and a saved lse that is not x's,
          // send NaN and inf through the 16-bit rounding of dx)
          for (double dloss : {0.75, 0.0, -2.0, double(inf), 1e300}) {
            std::vector<float> gf(n), gf_other(n);
            d::cross_entropy_backward(xf.data(), n, t, dloss, gf.data(), ls);
            d::cross_entropy_backward(xf.data(), n, t, dloss, gf_other.data(), ls, 3.0);
            const std::vector<H> want = narrow_from<H>(gf), want_other = narrow_from<H>(gf_other);
            std::vector<H> g(n), g_lse(n), g_other(n), in_place = x;
            d::cross_entropy_backward(x.data(), n, t, dloss, g.data(), ls);
            d::cross_entropy_backward(x.data(), n, t, dloss, g_lse.data(), ls, lse);
            d::cross_entropy_backward(x.data(), n, t, dloss, g_other.data(), ls, 3.0);
            d::cross_entropy_backward(in_place.data(), n, t, dloss, in_place.data(), ls, lse);
            CHECK(same_bits(g, want));
            CHECK(same_bits(g_lse, want));
            CHECK(same_bits(g_other, want_other));
            CHECK(same_bits(in_place, want));
          }
        }
      }
    }
    // From 2^20 floats (4 MiB) the float sum reads x as two halves, the
    // 16-bit one from 2^21 (the split is by bytes read): in between the
    // same terms are added in another order. Given the same lse, dx has
    // the same bits.
    if (smax_test::max_n() >= (std::size_t(1) << 21)) {
      const std::size_t n = (std::size_t(1) << 20) + 4099, t = 12345;
      const std::vector<H> x = logits<H>(n, 3.0, 4242);
      const std::vector<float> xf = widen_to<float>(x);
      const double lse = d::logsumexp(x.data(), n), lse_f = d::logsumexp(xf.data(), n);
      CHECK(std::fabs(lse - lse_f) <= 4e-16 * std::fabs(lse_f));
      const double ce = d::cross_entropy(x.data(), n, t), ce_f = d::cross_entropy(xf.data(), n, t);
      CHECK(std::fabs(ce - ce_f) <= 4e-16 * std::fabs(lse_f));
      CHECK(d::cross_entropy(x.data(), n, t, 0.1f) == d::cross_entropy(xf.data(), n, t, 0.1f));
      std::vector<float> gf(n);
      std::vector<H> g(n);
      d::cross_entropy_backward(xf.data(), n, t, 0.5, gf.data(), 0.1f, lse);
      d::cross_entropy_backward(x.data(), n, t, 0.5, g.data(), 0.1f, lse);
      CHECK(same_bits(g, narrow_from<H>(gf)));
    }
    // batched, unsmoothed, with the rows' logsumexp kept: each loss is
    // lse - x[t] (no second read), the single-row call's value
    const std::size_t rows = 3, cols = 513;
    const std::vector<H> xb = logits<H>(rows * cols, 2.0, 99);
    const std::vector<std::int64_t> targets{0, 512, 77};
    smax::loss_options none;
    none.reduce = smax::reduction::none;
    std::vector<double> loss(rows), lse(rows);
    d::cross_entropy(smax::matrix_view<const H>(xb.data(), rows, cols), targets.data(), none, loss.data(), lse.data());
    for (std::size_t r = 0; r < rows; ++r) {
      CHECK(lse[r] == d::logsumexp(xb.data() + r * cols, cols));
      CHECK(loss[r] == d::cross_entropy(xb.data() + r * cols, cols, static_cast<std::size_t>(targets[r])));
    }
  }
}

TEMPLATE_TEST_CASE("16-bit stablemax members, ssmax and softpick read x as 16-bit: the float kernels' results, every path",
                   "[half][family][stablemax]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  const float inf = std::numeric_limits<float>::infinity();
  const float big = static_cast<float>(format<H>::max_finite);
  // (log_stablemax, ssmax and softpick read 16-bit x above 8192 elements:
  // half_widened_max)
  std::vector<std::size_t> ns{1, 2, 3, 100, 4097, 8193, 12289};
  if (smax_test::max_n() >= 300000) ns.push_back(270001);  // beyond half_whole_row
  // the widened fallback's rows (NaN, +inf) allocate their float copies
  // beyond 2^20 floats of workspace
  if (smax_test::max_n() >= 600000) ns.push_back(524288 + 37);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : ns) {
      for (int row = 0; row < 12; ++row) {
        if (n > 300000 && row > 2) continue;
        std::vector<H> x = logits<H>(n, 3.0, n + row), dy = logits<H>(n, 1.0, n + row + 50);
        if (row == 1) x[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
        if (row == 2) x[n / 3] = H(inf);
        if (row == 3) std::fill(x.begin(), x.end(), H(-inf));
        if (row == 4) x[0] = H(-inf);
        if (row == 5) x[n - 1] = H(big);  // one entry dominates the sum (log_stablemax's exact form)
        if (row == 6)                     // the sum below the fast range (bf16) or tiny entries (fp16)
          for (auto& v : x) v = H(-big * (0.5f + 0.25f * std::fabs(static_cast<float>(v)) / 10.0f));
        if (row == 7)  // signed zeros, and entries in (-1, 0)
          for (std::size_t i = 0; i < n; ++i) x[i] = H(i % 3 == 0 ? -0.0f : i % 3 == 1 ? 0.0f : -0.999f);
        if (row == 8) dy[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
        // outputs at the normal range's cut-offs: a quotient that stablemax
        // writes as +0 (bf16), softpick's second write form (e^x 2^-Emax
        // with Emax beyond softpick_e_normal), and tiny entries whose
        // softpick denominator's inverse overflows (eps = 0: the scalar form)
        if (row == 9) x[n / 2] = H(-big);
        if (row == 10) {
          for (auto& v : x) v = H(1e-3f * std::fabs(static_cast<float>(v)));
          x[n - 1] = H(85.0f);
        }
        if (row == 11)
          for (auto& v : x) v = H(std::is_same<H, bf16>::value ? 1e-35f : 6e-8f);
        const std::vector<float> xf = widen_to<float>(x), dyf = widen_to<float>(dy);
        INFO(isa << " " << format<H>::name() << " n=" << n << " row kind " << row);
        std::vector<float> of(n);
        std::vector<H> got(n), io;
        d::stablemax(xf.data(), of.data(), n);
        const std::vector<H> want_s = narrow_from<H>(of);
        d::stablemax(x.data(), got.data(), n);
        CHECK(same_bits(got, want_s));
        io = x;
        d::stablemax(io.data(), io.data(), n);
        CHECK(same_bits(io, want_s));
        d::log_stablemax(xf.data(), of.data(), n);
        const std::vector<H> want_l = narrow_from<H>(of);
        d::log_stablemax(x.data(), got.data(), n);
        CHECK(same_bits(got, want_l));
        io = x;
        d::log_stablemax(io.data(), io.data(), n);
        CHECK(same_bits(io, want_l));
        d::stablemax_backward(xf.data(), dyf.data(), of.data(), n);
        const std::vector<H> want_b = narrow_from<H>(of);
        d::stablemax_backward(x.data(), dy.data(), got.data(), n);
        CHECK(same_bits(got, want_b));
        io = dy;
        d::stablemax_backward(x.data(), io.data(), io.data(), n);
        CHECK(same_bits(io, want_b));
        io = x;
        d::stablemax_backward(io.data(), dy.data(), io.data(), n);
        CHECK(same_bits(io, want_b));
        // softpick: eps = 0 makes rows without a positive entry degenerate
        // (the scalar form)
        for (float eps : {1e-8f, 0.0f, 1e-38f}) {
          d::softpick(xf.data(), of.data(), n, eps);
          const std::vector<H> want = narrow_from<H>(of);
          d::softpick(x.data(), got.data(), n, eps);
          CHECK(same_bits(got, want));
          io = x;
          d::softpick(io.data(), io.data(), n, eps);
          CHECK(same_bits(io, want));
        }
        // ssmax: c > 0, c < 0, and a scale whose |c x| leaves the two-pass range
        for (float sc : {1.0f, -0.5f, 300.0f}) {
          d::ssmax(xf.data(), of.data(), n, sc, 0.25f);
          const std::vector<H> want = narrow_from<H>(of);
          d::ssmax(x.data(), got.data(), n, sc, 0.25f);
          CHECK(same_bits(got, want));
          io = x;
          d::ssmax(io.data(), io.data(), n, sc, 0.25f);
          CHECK(same_bits(io, want));
        }
      }
    }
    // misaligned: a 16-bit row one element into its buffer, batched rows
    const std::size_t n = 1037, rows = 3;
    const std::vector<H> buf = logits<H>(n * rows + 1, 3.0, 7);
    std::vector<H> y(n * rows + 1), yr(n);
    d::stablemax(smax::matrix_view<const H>(buf.data() + 1, rows, n), smax::matrix_view<H>(y.data() + 1, rows, n));
    for (std::size_t r = 0; r < rows; ++r) {
      const std::vector<float> xf = widen_to<float>(std::vector<H>(buf.begin() + 1 + r * n, buf.begin() + 1 + (r + 1) * n));
      std::vector<float> of(n);
      d::stablemax(xf.data(), of.data(), n);
      CHECK(same_bits(std::vector<H>(y.begin() + 1 + r * n, y.begin() + 1 + (r + 1) * n), narrow_from<H>(of)));
    }
  }
  // Streamed outputs (map_half from 16 MiB of 16-bit y; the float map from
  // 16 MiB of float), on the dispatcher's level
  const std::size_t n = (std::size_t(8) << 20) + 37;
  if (smax_test::max_n() >= n) {
    const std::vector<H> x = logits<H>(n, 3.0, 11);
    const std::vector<float> xf = widen_to<float>(x);
    std::vector<float> of(n);
    std::vector<H> got(n);
    d::stablemax(xf.data(), of.data(), n);
    d::stablemax(x.data(), got.data(), n);
    CHECK(same_bits(got, narrow_from<H>(of)));
    d::ssmax(xf.data(), of.data(), n, 0.43f);
    d::ssmax(x.data(), got.data(), n, 0.43f);
    CHECK(same_bits(got, narrow_from<H>(of)));
    d::softpick(xf.data(), of.data(), n);
    d::softpick(x.data(), got.data(), n);
    CHECK(same_bits(got, narrow_from<H>(of)));
  }
}

TEMPLATE_TEST_CASE("16-bit family: special values as for float", "[half][family][special]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  const float big = static_cast<float>(format<H>::max_finite);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    INFO(isa << " " << format<H>::name());
    // the largest finite inputs never give inf or NaN
    std::vector<H> x{H(big), H(-big), H(0.0f), H(big)}, y(4);
    d::sparsemax(x.data(), y.data(), 4);
    CHECK(static_cast<float>(y[0]) == 0.5f);
    CHECK(static_cast<float>(y[3]) == 0.5f);
    d::stablemax(x.data(), y.data(), 4);
    CHECK(std::all_of(y.begin(), y.end(), [](H h) { return std::isfinite(static_cast<float>(h)); }));
    // NaN in x gives NaN
    x[2] = H(std::numeric_limits<float>::quiet_NaN());
    d::entmax15(x.data(), y.data(), 4);
    CHECK(std::all_of(y.begin(), y.end(), [](H h) { return std::isnan(static_cast<float>(h)); }));
    CHECK(std::isnan(d::logsumexp(x.data(), 4)));
  }
}

TEMPLATE_TEST_CASE("16-bit attention options: softmax, log_softmax, softmax_backward as the float forms, rounded once",
                   "[half][family][attention]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : {1, 9, 100, 4097}) {
      INFO(isa << " " << format<H>::name() << " n=" << n);
      const std::vector<H> x = logits<H>(n, 3.0, n + 1), dy = logits<H>(n, 1.0, n + 2);
      std::vector<H> mask = logits<H>(n, 1.0, n + 3);
      for (std::size_t i = 0; i < n; i += 5) mask[i] = H(-std::numeric_limits<float>::infinity());
      const auto xf = widen_to<float>(x), dyf = widen_to<float>(dy), maskf = widen_to<float>(mask);
      smax::softmax_options<H> o;
      o.scale = 0.625f;
      o.softcap = 20.0f;
      o.mask = mask.data();
      o.mask_scale = 0.5f;
      o.length = n - n / 4;
      o.sink = 0.5f;
      smax::softmax_options<float> of;
      of.scale = o.scale;
      of.softcap = o.softcap;
      of.mask = maskf.data();
      of.mask_scale = o.mask_scale;
      of.length = o.length;
      of.sink = o.sink;
      std::vector<H> y(n), ly(n), dx(n);
      std::vector<float> yf(n), lyf(n), dxf(n);
      d::softmax(x.data(), y.data(), n, o);
      d::softmax(xf.data(), yf.data(), n, of);
      CHECK(same_bits(y, narrow_from<H>(yf)));
      d::log_softmax(x.data(), ly.data(), n, o);
      d::log_softmax(xf.data(), lyf.data(), n, of);
      CHECK(same_bits(ly, narrow_from<H>(lyf)));
      const auto yw = widen_to<float>(y);
      d::softmax_backward(x.data(), y.data(), dy.data(), dx.data(), n, o);
      d::softmax_backward(xf.data(), yw.data(), dyf.data(), dxf.data(), n, of);
      CHECK(same_bits(dx, narrow_from<H>(dxf)));
      // the default-arch spelling: the default-arch float form, rounded once
      std::vector<H> y2(n);
      smax::softmax(x.data(), y2.data(), n, o);
      smax::softmax(xf.data(), yf.data(), n, of);
      CHECK(same_bits(y2, narrow_from<H>(yf)));
      // without a mask and sink: the plain options path
      smax::softmax_options<H> plain;
      plain.scale = 2.0f;
      smax::softmax_options<float> plainf;
      plainf.scale = 2.0f;
      d::softmax(x.data(), y.data(), n, plain);
      d::softmax(xf.data(), yf.data(), n, plainf);
      CHECK(same_bits(y, narrow_from<H>(yf)));
    }
    // a bad option throws and writes nothing
    const std::vector<H> x = logits<H>(8, 1.0, 3);
    const H guard = H::from_bits(0x7bcd);
    std::vector<H> y(8, guard);
    smax::softmax_options<H> bad;
    bad.scale = std::numeric_limits<float>::infinity();
    CHECK_THROWS_AS(d::softmax(x.data(), y.data(), 8, bad), std::invalid_argument);
    bad.scale = 1;
    bad.softcap = -1;
    CHECK_THROWS_AS(d::log_softmax(x.data(), y.data(), 8, bad), std::invalid_argument);
    CHECK(std::all_of(y.begin(), y.end(), [&](H h) { return h.bits == guard.bits; }));
  }
}

TEMPLATE_TEST_CASE("16-bit batched top-k, sampling and logsumexp: each row as the single-row call", "[half][family][batched]",
                   bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  smax::thread_pool pool(2);
  const std::size_t rows = 6, cols = 257, k = 4;
  const std::vector<H> x = logits<H>(rows * cols, 3.0, 21);
  const smax::matrix_view<const H> xv(x.data(), rows, cols);
  smax::sampling s;
  s.temperature = 0.9f;
  s.top_k = 40;
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (smax::executor* ex : {static_cast<smax::executor*>(nullptr), static_cast<smax::executor*>(&pool)}) {
      INFO(isa << " " << format<H>::name() << (ex ? " pool" : " this thread"));
      std::vector<H> p(rows * k), p1(k);
      std::vector<std::uint32_t> ix(rows * k), ix1(k);
      std::vector<std::size_t> drawn(rows);
      std::vector<double> lse(rows);
      d::topk_softmax(xv, k, smax::matrix_view<H>(p.data(), rows, k), smax::matrix_view<std::uint32_t>(ix.data(), rows, k), ex);
      d::sample(xv, drawn.data(), s, 5, 2, ex);
      d::logsumexp(xv, lse.data(), ex);
      for (std::size_t r = 0; r < rows; ++r) {
        d::topk_softmax(x.data() + r * cols, cols, k, p1.data(), ix1.data());
        CHECK(std::memcmp(p1.data(), p.data() + r * k, k * sizeof(H)) == 0);
        CHECK(std::memcmp(ix1.data(), ix.data() + r * k, k * 4) == 0);
        CHECK(drawn[r] == d::sample(x.data() + r * cols, cols, s, smax::gumbel_row_seed(5, r), 2));
        CHECK(lse[r] == d::logsumexp(x.data() + r * cols, cols));
      }
    }
  }
  // the default-arch spelling and the shape checks
  std::vector<double> lse(rows);
  smax::logsumexp(xv, lse.data());
  CHECK(lse[1] == smax::logsumexp(x.data() + cols, cols));
  std::vector<H> p(rows * k);
  std::vector<std::uint32_t> ix(rows * k);
  CHECK_THROWS_AS(d::topk_softmax(xv, k, smax::matrix_view<H>(p.data(), rows - 1, k),
                                  smax::matrix_view<std::uint32_t>(ix.data(), rows, k)),
                  std::invalid_argument);
  CHECK_THROWS_AS(d::sample(xv, nullptr, s, 1), std::invalid_argument);
}

TEMPLATE_TEST_CASE("16-bit batched cross_entropy and its backward: rows as single-row calls, the float reductions",
                   "[half][family][batched][losses]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  smax::thread_pool pool(2);
  const std::size_t rows = 7, cols = 301;
  const std::vector<H> x = logits<H>(rows * cols, 3.0, 31);
  const smax::matrix_view<const H> xv(x.data(), rows, cols);
  const std::vector<std::int64_t> targets{0, 5, -100, 300, 17, -100, 42};
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (smax::executor* ex : {static_cast<smax::executor*>(nullptr), static_cast<smax::executor*>(&pool)}) {
      for (smax::reduction red : {smax::reduction::none, smax::reduction::sum, smax::reduction::mean}) {
        INFO(isa << " " << format<H>::name() << (ex ? " pool" : " this thread") << " reduction "
                 << static_cast<int>(red));
        smax::loss_options o;
        o.reduce = red;
        o.label_smoothing = 0.1f;
        std::vector<double> loss(rows), lse(rows);
        const double total = d::cross_entropy(xv, targets.data(), o, loss.data(), lse.data(), ex);
        double sum = 0;
        std::size_t counted = 0;
        for (std::size_t r = 0; r < rows; ++r) {
          const H* xr = x.data() + r * cols;
          CHECK(lse[r] == d::logsumexp(xr, cols));
          if (targets[r] == o.ignore_index) {
            CHECK(loss[r] == 0);
            continue;
          }
          CHECK(loss[r] == d::cross_entropy(xr, cols, static_cast<std::size_t>(targets[r]), 0.1f));
          sum += loss[r];
          ++counted;
        }
        CHECK(total == (red == smax::reduction::none ? 0.0 : red == smax::reduction::sum ? sum : sum / counted));
        // backward: row r is the single-row call with that row's factor
        std::vector<H> dx(rows * cols), dx2(rows * cols), one(cols);
        const std::vector<double> row_dloss{0.5, 1, 2, 3, 4, 5, 6};
        d::cross_entropy_backward(xv, targets.data(), 1.5, smax::matrix_view<H>(dx.data(), rows, cols), o,
                                  row_dloss.data(), nullptr, ex);
        d::cross_entropy_backward(xv, targets.data(), 1.5, smax::matrix_view<H>(dx2.data(), rows, cols), o,
                                  row_dloss.data(), lse.data(), ex);
        CHECK(same_bits(dx, dx2));
        for (std::size_t r = 0; r < rows; ++r) {
          const double g = red == smax::reduction::none ? row_dloss[r] : red == smax::reduction::sum ? 1.5 : 1.5 / counted;
          if (targets[r] == o.ignore_index) {
            CHECK(std::all_of(dx.begin() + r * cols, dx.begin() + (r + 1) * cols,
                              [](H h) { return static_cast<float>(h) == 0; }));
            continue;
          }
          d::cross_entropy_backward(x.data() + r * cols, cols, static_cast<std::size_t>(targets[r]), g, one.data(), 0.1f);
          CHECK(std::memcmp(one.data(), dx.data() + r * cols, cols * sizeof(H)) == 0);
        }
      }
    }
  }
  // the default-arch spelling; a bad target throws
  std::vector<double> loss(rows);
  smax::loss_options none;
  none.reduce = smax::reduction::none;
  smax::cross_entropy(xv, targets.data(), none, loss.data());
  CHECK(loss[1] == smax::cross_entropy(x.data() + cols, cols, 5));
  const std::vector<std::int64_t> bad{0, 1, 2, 3, 4, 5, 301};
  CHECK_THROWS_AS(d::cross_entropy(xv, bad.data()), std::invalid_argument);
}

TEMPLATE_TEST_CASE("16-bit batched attention rows: each row the single-row call with that row's options",
                   "[half][family][batched][attention]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  smax::thread_pool pool(2);
  const std::size_t heads = 2, per_head = 3, rows = heads * per_head, cols = 130;
  const std::vector<H> x = logits<H>(rows * cols, 3.0, 41), mask = logits<H>(per_head * cols, 1.0, 42);
  const std::vector<float> sinks{0.25f, -1.0f};
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (smax::executor* ex : {static_cast<smax::executor*>(nullptr), static_cast<smax::executor*>(&pool)}) {
      for (int log = 0; log < 2; ++log) {
        INFO(isa << " " << format<H>::name() << (ex ? " pool" : " this thread") << (log ? " log" : ""));
        smax::attention_options<H> o;
        o.scale = 0.5f;
        o.softcap = 30.0f;
        o.mask = smax::matrix_view<const H>(mask.data(), per_head, cols);
        o.lengths = smax::causal(120);
        o.heads = heads;
        o.max_bias = 8.0f;
        o.sinks = sinks.data();
        std::vector<H> y(rows * cols), one(cols), dx(rows * cols), dx_one(cols);
        const smax::matrix_view<const H> xv(x.data(), rows, cols);
        if (log)
          d::log_softmax(xv, smax::matrix_view<H>(y.data(), rows, cols), o, ex);
        else
          d::softmax(xv, smax::matrix_view<H>(y.data(), rows, cols), o, ex);
        const std::vector<H> dy = logits<H>(rows * cols, 1.0, 43);
        if (!log)
          d::softmax_backward(xv, smax::matrix_view<const H>(y.data(), rows, cols),
                              smax::matrix_view<const H>(dy.data(), rows, cols),
                              smax::matrix_view<H>(dx.data(), rows, cols), o, ex);
        for (std::size_t r = 0; r < rows; ++r) {
          const std::size_t h = r / per_head, q = r % per_head;
          smax::softmax_options<H> so;
          so.scale = o.scale;
          so.softcap = o.softcap;
          so.mask = mask.data() + (r % per_head) * cols;
          so.mask_scale = static_cast<float>(smax::alibi_slope(h, heads, 8.0));
          so.length = q + 120 + 1;
          so.sink = sinks[h];
          if (log)
            d::log_softmax(x.data() + r * cols, one.data(), cols, so);
          else
            d::softmax(x.data() + r * cols, one.data(), cols, so);
          CHECK(std::memcmp(one.data(), y.data() + r * cols, cols * sizeof(H)) == 0);
          if (log) continue;
          d::softmax_backward(x.data() + r * cols, y.data() + r * cols, dy.data() + r * cols, dx_one.data(), cols, so);
          CHECK(std::memcmp(dx_one.data(), dx.data() + r * cols, cols * sizeof(H)) == 0);
        }
      }
    }
  }
  smax::attention_options<H> bad;
  bad.heads = 4;
  std::vector<H> y(rows * cols);
  CHECK_THROWS_AS(smax::softmax(smax::matrix_view<const H>(x.data(), rows, cols),
                                smax::matrix_view<H>(y.data(), rows, cols), bad),
                  std::invalid_argument);
  const smax::matrix_view<const H> xv(x.data(), rows, cols), short_y(y.data(), rows - 1, cols);
  CHECK_THROWS_AS(smax::softmax_backward(xv, xv, xv, smax::matrix_view<H>(y.data(), rows, cols), bad),
                  std::invalid_argument);
  CHECK_THROWS_AS(smax::softmax_backward(xv, short_y, xv, smax::matrix_view<H>(y.data(), rows, cols), {}),
                  std::invalid_argument);
}

TEMPLATE_TEST_CASE("16-bit sparse family reads its arrays as 16-bit: the float kernels' results, every path",
                   "[half][family][sparse]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  const float inf = std::numeric_limits<float>::infinity();
  const float big = static_cast<float>(format<H>::max_finite);
  // (4097 and up: more candidates than the stack's 2048 on the narrow rows)
  std::vector<std::size_t> ns{1, 2, 3, 100, 4097, 12289};
  if (smax_test::max_n() >= 300000) ns.push_back(270001);  // beyond the kept workspace (the fallback's rows)
  // One call of each function: the 16-bit call (out of place, in place) against the float kernel on the
  // widened arrays, rounded once.
  const auto same_as_float = [](auto&& call, const std::vector<H>& a, const std::vector<H>& b, bool in_place_b) {
    const std::vector<float> af = widen_to<float>(a), bf = widen_to<float>(b);
    std::vector<float> of(a.size());
    call(af.data(), bf.data(), of.data());
    const std::vector<H> want = narrow_from<H>(of);
    std::vector<H> got(a.size());
    call(a.data(), b.data(), got.data());
    CHECK(same_bits(got, want));
    std::vector<H> io = a;
    call(static_cast<const H*>(io.data()), b.data(), io.data());
    CHECK(same_bits(io, want));
    if (in_place_b) {
      io = b;
      call(a.data(), static_cast<const H*>(io.data()), io.data());
      CHECK(same_bits(io, want));
    }
  };
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : ns) {
      for (int row = 0; row < 10; ++row) {
        if (n > 300000 && row > 3) continue;
        std::vector<H> x = logits<H>(n, 3.0, n + row), dy = logits<H>(n, 1.0, n + row + 50);
        if (row == 1) x[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
        if (row == 2) x[n / 3] = H(inf);
        if (row == 3) std::fill(x.begin(), x.end(), H(-inf));
        if (row == 4) x[0] = H(-inf);
        if (row == 5) std::fill(x.begin(), x.end(), H(0.25f));  // every entry a candidate
        if (row == 6)                                           // narrow: most entries candidates
          for (auto& v : x) v = H(0.05f * static_cast<float>(v));
        if (row == 7)  // magnitudes near the largest finite (the threshold's split)
          for (auto& v : x) v = H(big * (0.875f + 0.01f * static_cast<float>(v)));
        if (row == 8) dy[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
        if (row == 9) x[n / 2] = x[n - 1] = H(40.0f);  // tied maxima
        INFO(isa << " " << format<H>::name() << " n=" << n << " row kind " << row);
        const auto fwd = [&](auto f) {
          same_as_float([&](auto a, auto, auto o) { f(a, o); }, x, dy, false);
        };
        fwd([n](auto a, auto o) { d::sparsemax(a, o, n); });
        fwd([n](auto a, auto o) { d::entmax15(a, o, n); });
        for (float alpha : {1.0f, 1.25f, 1.5f, 2.0f, 3.0f})
          fwd([n, alpha](auto a, auto o) { d::entmax_bisect(a, o, n, alpha, 40); });
        // asentmax: c > 0, alpha 1 (ssmax), c < 0 and a c x that overflows (both on c x written out)
        for (auto sa : {std::make_pair(0.5f, 1.5f), std::make_pair(0.5f, 1.0f), std::make_pair(0.5f, 1.75f),
                        std::make_pair(-0.75f, 1.5f), std::make_pair(1e30f, 1.5f)})
          fwd([n, sa](auto a, auto o) { d::asentmax(a, o, n, sa.second, sa.first, 0.1f); });
        // the backward passes, on a forward output y (its zeros: off the support)
        std::vector<H> y(n);
        d::entmax15(x.data(), y.data(), n);
        const auto bwd = [&](auto f) { same_as_float(f, y, dy, true); };
        bwd([n](auto a, auto b, auto o) { d::sparsemax_backward(a, b, o, n); });
        for (float alpha : {1.0f, 1.25f, 1.5f, 2.0f, 3.0f})
          bwd([n, alpha](auto a, auto b, auto o) { d::entmax_backward(a, b, o, n, alpha); });
        bwd([n](auto a, auto b, auto o) { d::asentmax_backward(a, a, b, o, n, 1.25f, 0.5f, 0.1f); });
      }
    }
    // misaligned: 16-bit rows one element into their buffer, batched
    const std::size_t n = 1037, rows = 3;
    const std::vector<H> buf = logits<H>(n * rows + 1, 1.0, 7);
    std::vector<H> y(n * rows + 1), dx(n * rows + 1);
    d::entmax_bisect(smax::matrix_view<const H>(buf.data() + 1, rows, n), smax::matrix_view<H>(y.data() + 1, rows, n),
                     1.75f);
    d::sparsemax_backward(smax::matrix_view<const H>(y.data() + 1, rows, n),
                          smax::matrix_view<const H>(buf.data() + 1, rows, n), smax::matrix_view<H>(dx.data() + 1, rows, n));
    for (std::size_t r = 0; r < rows; ++r) {
      const auto at = [&](const std::vector<H>& v) {
        return widen_to<float>(std::vector<H>(v.begin() + 1 + r * n, v.begin() + 1 + (r + 1) * n));
      };
      const std::vector<float> xf = at(buf), yf = at(y);
      std::vector<float> of(n);
      d::entmax_bisect(xf.data(), of.data(), n, 1.75f);
      CHECK(same_bits(std::vector<H>(y.begin() + 1 + r * n, y.begin() + 1 + (r + 1) * n), narrow_from<H>(of)));
      d::sparsemax_backward(yf.data(), xf.data(), of.data(), n);
      CHECK(same_bits(std::vector<H>(dx.begin() + 1 + r * n, dx.begin() + 1 + (r + 1) * n), narrow_from<H>(of)));
    }
  }
  // Streamed outputs (from 16 MiB of 16-bit output), on the dispatcher's level
  const std::size_t n = (std::size_t(8) << 20) + 37;
  if (smax_test::max_n() >= n) {
    const std::vector<H> x = logits<H>(n, 0.5, 11), dy = logits<H>(n, 1.0, 12);
    const std::vector<float> xf = widen_to<float>(x), dyf = widen_to<float>(dy);
    std::vector<float> of(n), yf(n);
    std::vector<H> got(n), y(n);
    d::sparsemax(xf.data(), of.data(), n);
    d::sparsemax(x.data(), got.data(), n);
    CHECK(same_bits(got, narrow_from<H>(of)));
    d::entmax_bisect(xf.data(), of.data(), n, 1.25f);
    d::entmax_bisect(x.data(), y.data(), n, 1.25f);
    CHECK(same_bits(y, narrow_from<H>(of)));
    const std::vector<float> ywf = widen_to<float>(y);
    d::entmax_backward(ywf.data(), dyf.data(), of.data(), n, 1.25f);
    d::entmax_backward(y.data(), dy.data(), got.data(), n, 1.25f);
    CHECK(same_bits(got, narrow_from<H>(of)));
  }
}

// gumbel_noise on 16-bit g runs the float kernel's noise a block of 2048 at a time through L1, and
// gumbel_softmax with hard reads the logits as 16-bit: against the float kernel on every path (blocks and
// their tails, offsets that start mid-block or wrap past 2^64, misaligned g, special rows, in place).
TEMPLATE_TEST_CASE("16-bit gumbel_noise and hard gumbel_softmax: the float kernel's results, every path",
                   "[half][family][gumbel]", bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::size_t> ns{1, 2, 255, 257, 2047, 2049, 6001};
  if (smax_test::max_n() >= 300000) ns.push_back(270001);  // beyond the kept workspace
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : ns) {
      for (std::uint64_t offset : {std::uint64_t(0), std::uint64_t(7), std::uint64_t(2048 * 5 + 100),
                                   (std::uint64_t(1) << 40) + 3, ~std::uint64_t(0) - 1000}) {
        INFO(isa << " " << format<H>::name() << " n=" << n << " offset=" << offset);
        std::vector<H> g(n + 1);
        std::vector<float> gf(n);
        d::gumbel_noise(g.data() + 1, n, 1234, offset);  // (misaligned)
        d::gumbel_noise(gf.data(), n, 1234, offset);
        CHECK(same_bits(std::vector<H>(g.begin() + 1, g.end()), narrow_from<H>(gf)));
      }
      for (int row = 0; row < 7; ++row) {
        std::vector<H> x = logits<H>(n, 2.0, n + row);
        if (row == 1) x[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
        if (row == 2) x[n / 3] = x[n - 1] = H(inf);  // the first +inf
        if (row == 3) std::fill(x.begin(), x.end(), H(-inf));
        if (row == 4) std::fill(x.begin(), x.end(), H(1.0f));  // the noise alone decides
        if (row == 5) x[n - 1] = H(-inf);
        if (row == 6)  // magnitudes where x + g rounds to x
          for (auto& v : x) v = H(1e30f * static_cast<float>(v));
        INFO(isa << " " << format<H>::name() << " n=" << n << " row kind " << row);
        const std::vector<float> xf = widen_to<float>(x);
        for (bool hard : {true, false}) {
          std::vector<float> yf(n);
          d::gumbel_softmax(xf.data(), yf.data(), n, 0.7f, 99, hard);
          const std::vector<H> want = narrow_from<H>(yf);
          std::vector<H> y(n);
          d::gumbel_softmax(x.data(), y.data(), n, 0.7f, 99, hard);
          CHECK(same_bits(y, want));
          std::vector<H> io = x;
          d::gumbel_softmax(io.data(), io.data(), n, 0.7f, 99, hard);
          CHECK(same_bits(io, want));
        }
      }
    }
  }
}

// softpick_backward on 16-bit arrays reads them as 16-bit where the dot product is the float kernel's own
// (x86), the first argmax's correction applied before the rounding; elsewhere (NEON) and on the rows pass 1
// refuses, the widened form. Either way the float kernel's results on the widened arrays.
TEMPLATE_TEST_CASE("16-bit softpick_backward: the float kernel's results, every path", "[half][family][softpick]",
                   bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  const float inf = std::numeric_limits<float>::infinity();
  const float big = static_cast<float>(format<H>::max_finite);
  std::vector<std::size_t> ns{1, 2, 3, 100, 4097, 12289};
  if (smax_test::max_n() >= 300000) ns.push_back(270001);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : ns) {
      for (int row = 0; row < 11; ++row) {
        if (n > 300000 && row > 2) continue;
        std::vector<H> x = logits<H>(n, 3.0, n + row), dy = logits<H>(n, 1.0, n + row + 50);
        if (row == 1) x[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
        if (row == 2) x[n / 3] = H(inf);
        if (row == 3) std::fill(x.begin(), x.end(), H(-inf));
        if (row == 4) x[0] = H(-inf);
        if (row == 5)  // every x <= 0: no argmax term
          for (auto& v : x) v = H(-std::fabs(static_cast<float>(v)));
        if (row == 6)  // tiny x: degenerate denominators (the wide form)
          for (auto& v : x) v = H(1e-7f * static_cast<float>(v));
        if (row == 7) x[n - 1] = H(big);  // a max beyond the two-pass range
        if (row == 8) dy[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
        if (row == 9)  // dy near the largest finite: dy - dot overflows
          for (auto& v : dy) v = H(big * (static_cast<float>(v) > 0 ? 0.9f : -0.9f));
        if (row == 10) x[n / 2] = x[n - 1] = H(30.0f);  // tied maxima: the first takes the term
        INFO(isa << " " << format<H>::name() << " n=" << n << " row kind " << row);
        for (float eps : {1e-8f, 0.0f, 0.5f}) {
          std::vector<H> y(n);
          d::softpick(x.data(), y.data(), n, eps);
          const std::vector<float> xf = widen_to<float>(x), yf = widen_to<float>(y), dyf = widen_to<float>(dy);
          std::vector<float> of(n);
          d::softpick_backward(xf.data(), yf.data(), dyf.data(), of.data(), n, eps);
          const std::vector<H> want = narrow_from<H>(of);
          std::vector<H> got(n);
          d::softpick_backward(x.data(), y.data(), dy.data(), got.data(), n, eps);
          CHECK(same_bits(got, want));
          std::vector<H> io = x;
          d::softpick_backward(io.data(), y.data(), dy.data(), io.data(), n, eps);
          CHECK(same_bits(io, want));
          io = dy;
          d::softpick_backward(x.data(), y.data(), io.data(), io.data(), n, eps);
          CHECK(same_bits(io, want));
        }
      }
    }
  }
  // Streamed dx (from 16 MiB of 16-bit output), on the dispatcher's level
  const std::size_t n = (std::size_t(8) << 20) + 37;
  if (smax_test::max_n() >= n) {
    const std::vector<H> x = logits<H>(n, 3.0, 21), dy = logits<H>(n, 1.0, 22);
    std::vector<H> y(n), got(n);
    d::softpick(x.data(), y.data(), n);
    const std::vector<float> xf = widen_to<float>(x), yf = widen_to<float>(y), dyf = widen_to<float>(dy);
    std::vector<float> of(n);
    d::softpick_backward(xf.data(), yf.data(), dyf.data(), of.data(), n);
    d::softpick_backward(x.data(), y.data(), dy.data(), got.data(), n);
    CHECK(same_bits(got, narrow_from<H>(of)));
  }
}

TEMPLATE_TEST_CASE("16-bit multimax, sa_softmax and their backward passes: the float kernels' results, every path", "[half][family][seeds]",
                   bf16, fp16) {
  using H = TestType;
  namespace d = smax::dynamic;
  const float inf = std::numeric_limits<float>::infinity();
  const float big = static_cast<float>(format<H>::max_finite);
  smax::multimax_params shaped;  // hinges on both sides, both orders
  const double ranges[4] = {-1.5, 2.0, -3.0, 1.0}, ts[4] = {0.5, 0.25, 0.125, 0.0625};
  std::copy(ranges, ranges + 4, shaped.ranges);
  std::copy(ts, ts + 4, shaped.ts);
  // In cache the float kernels' three-pass reload (the widened form); from
  // 12 MiB of float on, every x86 level here takes their two passes, which
  // read x as 16-bit.
  std::vector<std::size_t> ns{100, 4097, 12289};
  const std::size_t two_pass_n = (std::size_t(3) << 20) + 5;
  if (smax_test::max_n() >= two_pass_n) ns.push_back(two_pass_n);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : ns) {
      for (int row = 0; row < 7; ++row) {
        std::vector<H> x = logits<H>(n, 3.0, n + row);
        if (row == 1) x[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
        if (row == 2) x[n / 3] = H(inf);
        if (row == 3) x[0] = H(-inf);
        if (row == 4) std::fill(x.begin(), x.end(), H(-inf));
        if (row == 5) x[n - 1] = H(big);  // beyond the two-pass range (and sigma overflows)
        if (row == 6)  // a narrow range: the normalized form's scaled range
          for (auto& v : x) v = H(1e-3f * static_cast<float>(v));
        INFO(isa << " " << format<H>::name() << " n=" << n << " row kind " << row);
        const std::vector<float> xf = widen_to<float>(x);
        std::vector<float> of(n);
        const auto check = [&](auto&& f) {
          f(xf.data(), of.data());
          const std::vector<H> want = narrow_from<H>(of);
          std::vector<H> got(n + 2, H::from_bits(0x7bcd));
          f(x.data(), got.data() + 1);
          CHECK(bits_of(got[0]) == 0x7bcd);
          CHECK(bits_of(got[n + 1]) == 0x7bcd);
          CHECK(same_bits(std::vector<H>(got.begin() + 1, got.end() - 1), want));
          std::vector<H> io = x;
          f(io.data(), io.data());
          CHECK(same_bits(io, want));
        };
        for (bool normalized : {false, true}) {
          check([&](auto xp, auto yp) { d::sa_softmax(xp, yp, n, normalized); });
          // the backward (x86 beyond 2^18: the float kernel's passes on the
          // 16-bit arrays; row 0's ends take the corrections, row 6's the
          // exact end sums, the widened form), dx in place over x, y or dy
          std::vector<H> y(n), dy = logits<H>(n, 1.0, n + row + 70);
          d::sa_softmax(x.data(), y.data(), n, normalized);
          if (row == 3) dy[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
          const std::vector<float> yf = widen_to<float>(y), dyf = widen_to<float>(dy);
          d::sa_softmax_backward(xf.data(), yf.data(), dyf.data(), of.data(), n, normalized);
          const std::vector<H> want = narrow_from<H>(of);
          std::vector<H> got(n + 2, H::from_bits(0x7bcd));
          d::sa_softmax_backward(x.data(), y.data(), dy.data(), got.data() + 1, n, normalized);
          CHECK(bits_of(got[0]) == 0x7bcd);
          CHECK(bits_of(got[n + 1]) == 0x7bcd);
          CHECK(same_bits(std::vector<H>(got.begin() + 1, got.end() - 1), want));
          for (int alias = 0; alias < 3; ++alias) {
            std::vector<H> xs = x, ys = y, dys = dy;
            H* out = alias == 0 ? xs.data() : alias == 1 ? ys.data() : dys.data();
            d::sa_softmax_backward(xs.data(), ys.data(), dys.data(), out, n, normalized);
            CHECK(same_bits(alias == 0 ? xs : alias == 1 ? ys : dys, want));
          }
        }
        for (const smax::multimax_params& p : {smax::multimax_params{}, shaped}) {
          check([&](auto xp, auto yp) { d::multimax(xp, yp, n, p); });
          // the backward (x86 from half_widened_max on: the float kernel's
          // dot product, then the rounded map), dx in place over x, y or dy
          std::vector<H> y(n), dy = logits<H>(n, 1.0, n + row + 50);
          d::multimax(x.data(), y.data(), n, p);
          if (row == 6) dy[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
          const std::vector<float> yf = widen_to<float>(y), dyf = widen_to<float>(dy);
          d::multimax_backward(xf.data(), yf.data(), dyf.data(), of.data(), n, p);
          const std::vector<H> want = narrow_from<H>(of);
          std::vector<H> got(n);
          d::multimax_backward(x.data(), y.data(), dy.data(), got.data(), n, p);
          CHECK(same_bits_or_nan(got, want));
          for (int alias = 0; alias < 3; ++alias) {
            std::vector<H> xs = x, ys = y, dys = dy;
            H* out = alias == 0 ? xs.data() : alias == 1 ? ys.data() : dys.data();
            d::multimax_backward(xs.data(), ys.data(), dys.data(), out, n, p);
            CHECK(same_bits_or_nan(alias == 0 ? xs : alias == 1 ? ys : dys, want));
          }
        }
      }
    }
  }
  // Streamed outputs (from 16 MiB of 16-bit output), on the dispatcher's level
  const std::size_t n = (std::size_t(8) << 20) + 37;
  if (smax_test::max_n() >= n) {
    const std::vector<H> x = logits<H>(n, 3.0, 23);
    const std::vector<float> xf = widen_to<float>(x);
    std::vector<float> of(n);
    std::vector<H> got(n);
    d::sa_softmax(xf.data(), of.data(), n, true);
    d::sa_softmax(x.data(), got.data(), n, true);
    CHECK(same_bits(got, narrow_from<H>(of)));
    d::multimax(xf.data(), of.data(), n, shaped);
    d::multimax(x.data(), got.data(), n, shaped);
    CHECK(same_bits(got, narrow_from<H>(of)));
  }
}

// sa_softmax_backward's 16-bit passes run from 2^18 elements on (above);
// here on short rows too, called directly on this TU's own ISA (x86), so
// that the sanitizer and emulator stages, whose rows stop at 128K, see
// them: the float kernel's bits when it takes the row, nothing written
// when it declines it.
TEMPLATE_TEST_CASE("16-bit sa_softmax_backward's passes on short rows: the float kernel's bits, or nothing written",
                   "[half][family][seeds]", bf16, fp16) {
  using H = TestType;
  using A = xsimd::default_arch;
  if constexpr (smax::detail::dot_in_double_v<A, float>) {
    int taken = 0, declined = 0;
    for (std::size_t n : {1, 2, 15, 16, 17, 33, 100, 1000, 4097}) {
      for (int row = 0; row < 6; ++row) {
        const float inf = std::numeric_limits<float>::infinity();
        std::vector<H> x = logits<H>(n, 3.0, n + row), dy = logits<H>(n, 1.0, n + row + 9);
        if (row == 1)  // a narrow range: the exact end sums (declined)
          for (auto& v : x) v = H(1e-3f * static_cast<float>(v));
        if (row == 2) x[n / 2] = H(inf);  // declined
        if (row == 3) x[0] = H(-inf);
        if (row == 4) dy[n / 2] = H(inf), dy[0] = H(-inf);  // infinite dx beside finite ones
        if (row == 5) dy[n - 1] = H(std::numeric_limits<float>::quiet_NaN());
        for (bool normalized : {false, true}) {
          INFO(format<H>::name() << " n=" << n << " row kind " << row << " normalized " << normalized);
          std::vector<H> y(n);
          smax::sa_softmax(A{}, x.data(), y.data(), n, normalized);
          const std::vector<float> xf = widen_to<float>(x), yf = widen_to<float>(y), dyf = widen_to<float>(dy);
          std::vector<float> of(n);
          smax::sa_softmax_backward(A{}, xf.data(), yf.data(), dyf.data(), of.data(), n, normalized);
          std::vector<H> got(n + 2, H::from_bits(0x7bcd));
          if (smax::detail::sa_softmax_backward_read_half<A>(x.data(), y.data(), dy.data(), got.data() + 1, n,
                                                             normalized)) {
            ++taken;
            CHECK(same_bits(std::vector<H>(got.begin() + 1, got.end() - 1), narrow_from<H>(of)));
          } else {
            ++declined;
            CHECK(std::all_of(got.begin() + 1, got.end() - 1, [](H v) { return bits_of(v) == 0x7bcd; }));
          }
          CHECK(bits_of(got[0]) == 0x7bcd);
          CHECK(bits_of(got[n + 1]) == 0x7bcd);
        }
      }
    }
    CHECK(taken > 0);
    CHECK(declined > 0);
  } else {
    WARN("SKIPPED: this ISA has no 16-bit sa_softmax_backward passes (its widened form: tested above)");
  }
}
