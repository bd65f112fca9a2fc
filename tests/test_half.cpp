// bf16 and fp16: the conversions (every bit pattern, every rounding
// midpoint, against an exact reference) and softmax / log_softmax of 16-bit
// logits (within one 16-bit ulp of the exact result of the 16-bit inputs, or
// the float contract for float outputs), on every ISA compiled in.
#include <cstdlib>
#include <cstring>
#include <iterator>

#include <smax/dynamic.hpp>
#include <smax/parallel.hpp>

#include "common.hpp"
#include "half_common.hpp"

namespace {

using smax::bf16;
using smax::fp16;
using smax_test::isas;
using smax_test::format;
using smax_test::ulp;
using smax_test::within_ulp;
using smax_test::logits;
using smax_test::bits_of;
using smax_test::use_isa;


// The value of bit pattern b, decoded from its fields (independent of the
// library's conversions).
template <class H>
long double decode(std::uint16_t b) {
  constexpr int mbits = format<H>::digits - 1;
  constexpr int ebits = 15 - mbits;
  constexpr int bias = (1 << (ebits - 1)) - 1;
  const int e = (b >> mbits) & ((1 << ebits) - 1);
  const long double m = b & ((1u << mbits) - 1);
  const long double sign = (b & 0x8000) ? -1.0L : 1.0L;
  if (e == (1 << ebits) - 1) return m != 0 ? std::numeric_limits<long double>::quiet_NaN()
                                           : sign * std::numeric_limits<long double>::infinity();
  if (e == 0) return sign * std::ldexp(m, 1 - bias - mbits);
  return sign * std::ldexp(1.0L + std::ldexp(m, -mbits), e - bias);
}


// v rounded to H, to nearest even, as a value (inf beyond the range).
template <class H>
long double round_exact(long double v) {
  if (v != v || std::isinf(v) || v == 0) return v;
  const long double u = ulp<H>(v);
  long double q = std::nearbyint(v / u);  // default mode: ties to even
  const long double r = q * u;
  // at or above max + half an ulp: inf
  if (std::fabs(r) > format<H>::max_finite) return std::copysign(std::numeric_limits<long double>::infinity(), v);
  return r;
}

float as_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class H>
void check_rounding_of(float f) {
  const H h(f);
  const long double got = static_cast<float>(h), want = round_exact<H>(f);
  if (f != f) {
    CHECK(got != got);
  } else if (!(got == want && std::signbit(got) == std::signbit(want))) {
    FAIL_CHECK(format<H>::name() << " of " << std::hexfloat << f << ": " << got << ", exact rounding " << want);
  }
}

// Floats worth rounding: every midpoint between neighbouring H values and
// its float neighbours, the bit patterns of H values and their neighbours,
// and random bit patterns.
template <class H>
std::vector<float> rounding_cases() {
  std::vector<float> out;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const long double lo = decode<H>(static_cast<std::uint16_t>(b));
    if (!(lo == lo) || std::isinf(lo) || lo < 0) continue;
    const long double hi = lo + ulp<H>(lo > 0 ? lo : std::ldexp(1.0L, format<H>::min_exponent));
    for (long double v : {lo, (lo + hi) / 2}) {
      const float f = static_cast<float>(v);
      for (float g : {f, std::nextafter(f, 0.0f), std::nextafter(f, 1e30f)}) {
        out.push_back(g);
        out.push_back(-g);
      }
    }
  }
  std::mt19937 rng(17);
  for (int i = 0; i < 200000; ++i) out.push_back(as_float(rng()));
  for (float f : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::min(), std::numeric_limits<float>::quiet_NaN(), 65504.0f, 65519.99f,
                  65520.0f, 0x1p-24f, 0x1p-25f, 0x1.000002p-25f, 0x1.8p-24f})
    out.push_back(f);
  return out;
}


}  // namespace

TEMPLATE_TEST_CASE("16-bit types: every bit pattern widens exactly and narrows back to itself", "[half]", bf16, fp16) {
  using H = TestType;
  static_assert(sizeof(H) == 2 && std::is_trivially_copyable<H>::value, "storage layout");
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const H h = H::from_bits(static_cast<std::uint16_t>(b));
    const float f = static_cast<float>(h);
    const long double want = decode<H>(static_cast<std::uint16_t>(b));
    if (want != want) {
      CHECK(f != f);
      const H back(f);
      CHECK(static_cast<float>(back) != static_cast<float>(back));  // NaN stays NaN
      continue;
    }
    if (!(f == want && std::signbit(f) == std::signbit(want))) FAIL_CHECK(format<H>::name() << " " << b << ": " << f);
    if (bits_of(H(f)) != b) FAIL_CHECK(format<H>::name() << " " << b << " came back as " << bits_of(H(f)));
  }
}

TEMPLATE_TEST_CASE("16-bit types: float rounds to nearest even, midpoints and overflow included", "[half]", bf16,
                   fp16) {
  for (float f : rounding_cases<TestType>()) check_rounding_of<TestType>(f);
}

TEMPLATE_TEST_CASE("16-bit types: convert() on every ISA gives the scalar conversions' bits", "[half]", bf16, fp16) {
  using H = TestType;
  std::vector<std::uint16_t> all(0x10000);
  for (std::uint32_t b = 0; b < 0x10000; ++b) all[b] = static_cast<std::uint16_t>(b);
  const std::vector<float> cases = rounding_cases<H>();
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    INFO(isa << " " << format<H>::name());
    // Widen: all patterns, from an odd offset and with a ragged end.
    for (std::size_t off : {0, 1}) {
      const std::size_t n = all.size() - off - 3;
      std::vector<float> f(n + 2, 7.0f);
      smax::dynamic::convert(reinterpret_cast<const H*>(all.data() + off), f.data() + 1, n);
      CHECK(f[0] == 7.0f);
      CHECK(f[n + 1] == 7.0f);
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const float want = static_cast<float>(H::from_bits(all[i + off]));
        if (std::memcmp(&want, &f[i + 1], 4) != 0 && !(want != want && f[i + 1] != f[i + 1])) ++bad;
      }
      CHECK(bad == 0);
    }
    // Narrow: the rounding cases.
    std::vector<H> h(cases.size() + 2, H::from_bits(0x1234));
    smax::dynamic::convert(cases.data(), h.data() + 1, cases.size());
    CHECK(bits_of(h[0]) == 0x1234);
    CHECK(bits_of(h.back()) == 0x1234);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const float f = cases[i];
      if (f != f) {
        bad += !(static_cast<float>(h[i + 1]) != static_cast<float>(h[i + 1]));
      } else {
        bad += bits_of(h[i + 1]) != bits_of(H(f));
      }
    }
    CHECK(bad == 0);
  }
}

namespace {



template <class H>
std::vector<long double> widened(const std::vector<H>& x) {
  std::vector<long double> w(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) w[i] = static_cast<float>(x[i]);
  return w;
}

// Exact softmax and log_softmax of finite inputs.
void reference(const std::vector<long double>& x, std::vector<long double>& p, std::vector<long double>& lp) {
  long double m = -std::numeric_limits<long double>::infinity();
  for (long double v : x) m = std::max(m, v);
  long double s = 0;
  for (long double v : x) s += std::exp(v - m);
  const long double ls = std::log(s);
  p.resize(x.size());
  lp.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    p[i] = std::exp(x[i] - m) / s;
    lp[i] = (x[i] - m) - ls;
  }
}

// Whether pred(i) holds for every i < n (one assertion, not n).
template <class P>
bool all_i(std::size_t n, P&& pred) {
  for (std::size_t i = 0; i < n; ++i)
    if (!pred(i)) return false;
  return true;
}

const std::vector<std::size_t>& half_sizes() {
  // up to 2^18 three-pass reload on the whole row; 270001 takes the two-pass / blocked passes
  static const std::vector<std::size_t> s{1, 2, 3, 7, 16, 17, 33, 100, 1000, 2048, 2049, 4097, 70001, 270001};
  return s;
}

}  // namespace

TEMPLATE_TEST_CASE("16-bit softmax and log_softmax: within one 16-bit ulp of the exact result, every ISA",
                   "[half][softmax][log_softmax][accuracy]", bf16, fp16) {
  using H = TestType;
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : half_sizes()) {
      for (double sigma : {1.0, 8.0}) {
        const std::vector<H> x = logits<H>(n, sigma, n * 7 + static_cast<std::uint64_t>(sigma));
        std::vector<long double> p, lp;
        reference(widened(x), p, lp);
        for (smax::algorithm a : smax_test::algorithms()) {
          INFO(isa << " " << format<H>::name() << " n=" << n << " sigma=" << sigma << " "
                   << smax_test::algorithm_name(a));
          std::vector<H> y(n);
          std::vector<float> yf(n);
          smax::dynamic::softmax(x.data(), y.data(), n, a);
          smax::dynamic::softmax(x.data(), yf.data(), n, a);
          std::size_t bad = 0;
          long double sum = 0, slack = 0;
          for (std::size_t i = 0; i < n; ++i) {
            const float v = static_cast<float>(y[i]);
            bad += !within_ulp<H>(v, p[i]);
            sum += v;
            if (v != 0) slack += ulp<H>(v) / 2;
          }
          CHECK(bad == 0);
          // the rounding of each output and nothing more (plus the float kernel's 1e-6)
          CHECK(std::fabs(sum - 1) <= slack + 1e-6L);
          CHECK(smax_test::max_rel_err(yf, p) < 1e-6);
        }
        std::vector<H> ly(n);
        std::vector<float> lyf(n);
        smax::dynamic::log_softmax(x.data(), ly.data(), n);
        smax::dynamic::log_softmax(x.data(), lyf.data(), n);
        std::size_t bad = 0;
        double worst = 0;
        for (std::size_t i = 0; i < n; ++i) {
          bad += !within_ulp<H>(static_cast<float>(ly[i]), lp[i]);
          worst = std::max<double>(worst, std::fabs(lyf[i] - lp[i]) / std::max(1.0L, std::fabs(lp[i])));
        }
        INFO(isa << " " << format<H>::name() << " log_softmax n=" << n << " sigma=" << sigma);
        CHECK(bad == 0);
        CHECK(worst < 1e-6);
      }
    }
  }
}

TEMPLATE_TEST_CASE("16-bit softmax: special values as for float, huge finite inputs stay finite",
                   "[half][softmax][log_softmax][special]", bf16, fp16) {
  using H = TestType;
  const float inf = std::numeric_limits<float>::infinity();
  const float big = static_cast<float>(format<H>::max_finite);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : {5, 3000, 270000}) {
      INFO(isa << " " << format<H>::name() << " n=" << n);
      std::vector<H> x = logits<H>(n, 2.0, n), y(n);
      // NaN anywhere: all NaN
      x[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
      smax::dynamic::softmax(x.data(), y.data(), n);
      CHECK(std::all_of(y.begin(), y.end(), [&](const H& v) { return static_cast<float>(v) != static_cast<float>(v); }));
      smax::dynamic::log_softmax(x.data(), y.data(), n);
      CHECK(std::all_of(y.begin(), y.end(), [&](const H& v) { return static_cast<float>(v) != static_cast<float>(v); }));
      // two +inf share the mass; log: -log 2 there, -inf elsewhere
      x = logits<H>(n, 2.0, n);
      x[1] = H(inf);
      x[n - 1] = H(inf);
      smax::dynamic::softmax(x.data(), y.data(), n);
      CHECK(all_i(n, [&](std::size_t i) { return static_cast<float>(y[i]) == ((i == 1 || i == n - 1) ? 0.5f : 0.0f); }));
      smax::dynamic::log_softmax(x.data(), y.data(), n);
      CHECK(all_i(n, [&](std::size_t i) { return static_cast<float>(y[i]) == ((i == 1 || i == n - 1) ? static_cast<float>(H(static_cast<float>(-std::log(2.0)))) : -inf); }));
      // all -inf: zeros (log: -inf); some -inf: masked
      std::fill(x.begin(), x.end(), H(-inf));
      smax::dynamic::softmax(x.data(), y.data(), n);
      CHECK(std::all_of(y.begin(), y.end(), [&](const H& v) { return static_cast<float>(v) == 0.0f; }));
      smax::dynamic::log_softmax(x.data(), y.data(), n);
      CHECK(std::all_of(y.begin(), y.end(), [&](const H& v) { return static_cast<float>(v) == -inf; }));
      x[2] = H(1.0f);
      smax::dynamic::softmax(x.data(), y.data(), n);
      CHECK(all_i(n, [&](std::size_t i) { return static_cast<float>(y[i]) == (i == 2 ? 1.0f : 0.0f); }));
      // the largest finite values, both signs: finite results, the max gets the mass
      for (std::size_t i = 0; i < n; ++i) x[i] = H(i % 2 ? -big : big / 2);
      x[0] = H(big);
      smax::dynamic::softmax(x.data(), y.data(), n);
      CHECK(all_i(n, [&](std::size_t i) { return static_cast<float>(y[i]) == (i == 0 ? 1.0f : 0.0f); }));
      smax::dynamic::log_softmax(x.data(), y.data(), n);
      // (odd entries: -big - big is beyond H's range, and -inf its rounding)
      CHECK(all_i(n, [&](std::size_t i) { return i % 2 || std::isfinite(static_cast<float>(y[i])); }));
      CHECK(static_cast<float>(y[0]) == 0.0f);
    }
  }
}

TEMPLATE_TEST_CASE("16-bit softmax: misaligned, in place, nothing written outside y, n = 0",
                   "[half][softmax][log_softmax][memory]", bf16, fp16) {
  using H = TestType;
  const H guard = H::from_bits(0x7bcd);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : half_sizes()) {
      INFO(isa << " " << format<H>::name() << " n=" << n);
      const std::vector<H> x = logits<H>(n, 4.0, n + 3);
      std::vector<H> ref(n);
      smax::dynamic::softmax(x.data(), ref.data(), n);
      for (int log = 0; log < 2; ++log) {
        if (log) smax::dynamic::log_softmax(x.data(), ref.data(), n);
        const auto run = [&](const H* in, H* out) {
          if (log)
            smax::dynamic::log_softmax(in, out, n);
          else
            smax::dynamic::softmax(in, out, n);
        };
        // misaligned by one element, guards around y
        std::vector<H> buf(n + 3, guard);
        run(x.data(), buf.data() + 1);
        CHECK(bits_of(buf[0]) == bits_of(guard));
        CHECK(bits_of(buf[n + 1]) == bits_of(guard));
        CHECK(std::memcmp(buf.data() + 1, ref.data(), n * 2) == 0);
        // in place
        std::vector<H> inplace(n + 3, guard);
        std::copy(x.begin(), x.end(), inplace.begin() + 1);
        run(inplace.data() + 1, inplace.data() + 1);
        CHECK(std::memcmp(inplace.data() + 1, ref.data(), n * 2) == 0);
        CHECK(bits_of(inplace[n + 1]) == bits_of(guard));
      }
    }
    std::vector<H> z(1, guard);
    smax::dynamic::softmax(static_cast<const H*>(nullptr), static_cast<H*>(nullptr), 0);
    smax::dynamic::softmax(z.data(), z.data(), 0);
    CHECK(bits_of(z[0]) == bits_of(guard));
  }
}

TEMPLATE_TEST_CASE("16-bit batched softmax: each row as the single-row call, any executor", "[half][batched]", bf16,
                   fp16) {
  using H = TestType;
  smax::thread_pool pool(2);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t cols : {1, 17, 2048, 5000}) {
      INFO(isa << " " << format<H>::name() << " cols=" << cols);
      const std::size_t rows = 5, stride = cols + 3;
      const std::vector<H> x = logits<H>(rows * stride, 3.0, cols);
      std::vector<H> y(rows * stride, H::from_bits(0x7bcd)), one(cols);
      std::vector<float> yf(rows * cols), onef(cols);
      for (smax::executor* ex : {static_cast<smax::executor*>(nullptr), static_cast<smax::executor*>(&pool)}) {
        for (int log = 0; log < 2; ++log) {
          const smax::matrix_view<const H> xv(x.data(), rows, cols, stride);
          if (log) {
            smax::dynamic::log_softmax(xv, smax::matrix_view<H>(y.data(), rows, cols, stride), ex);
            smax::dynamic::log_softmax(xv, smax::matrix_view<float>(yf.data(), rows, cols), ex);
          } else {
            smax::dynamic::softmax(xv, smax::matrix_view<H>(y.data(), rows, cols, stride), smax::algorithm::automatic,
                                   ex);
            smax::dynamic::softmax(xv, smax::matrix_view<float>(yf.data(), rows, cols), smax::algorithm::automatic,
                                   ex);
          }
          for (std::size_t r = 0; r < rows; ++r) {
            if (log) {
              smax::dynamic::log_softmax(x.data() + r * stride, one.data(), cols);
              smax::dynamic::log_softmax(x.data() + r * stride, onef.data(), cols);
            } else {
              smax::dynamic::softmax(x.data() + r * stride, one.data(), cols);
              smax::dynamic::softmax(x.data() + r * stride, onef.data(), cols);
            }
            CHECK(std::memcmp(y.data() + r * stride, one.data(), cols * 2) == 0);
            CHECK(std::memcmp(yf.data() + r * cols, onef.data(), cols * 4) == 0);
            for (std::size_t c = cols; c < stride && r + 1 < rows; ++c)
              CHECK(bits_of(y[r * stride + c]) == 0x7bcd);
          }
        }
      }
    }
  }
}

// A row of 16-bit outputs just past the streaming size (stream_min_bytes),
// or 0 (with a warning) where SMAX_TEST_MAX_N is below it.
template <class H>
std::size_t streamed_n() {
  const std::size_t n = smax::detail::stream_min_bytes / sizeof(H) + 37;
  if (n <= smax_test::max_n()) return n;
  WARN("SKIPPED: n = " << n << " is above SMAX_TEST_MAX_N = " << smax_test::max_n());
  return 0;
}

// The entries of dx (softmax_backward of y and dy, or log_softmax_backward)
// farther from the exact formula on the 16-bit y and dy than one 16-bit ulp
// plus the float kernel's bound 2^-22 |y| (|dy| + |dot|) (log: 2^-22 (|dy| +
// e^y |sum dy|)); dot: sum y dy (log: sum dy) in long double.
template <class H>
std::size_t backward_misses(bool log, const std::vector<H>& y, const std::vector<H>& dy, const H* dx, long double dot) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const long double yi = static_cast<float>(y[i]), dyi = static_cast<float>(dy[i]);
    const long double exact = log ? dyi - std::exp(yi) * dot : yi * (dyi - dot);
    const long double scale =
        log ? std::fabs(dyi) + std::exp(yi) * std::fabs(dot) : std::fabs(yi) * (std::fabs(dyi) + std::fabs(dot));
    const long double err = std::fabs(static_cast<float>(dx[i]) - exact);
    bad += !(err <= (exact != 0 ? ulp<H>(exact) : 0.0L) + std::ldexp(scale, -22) + 1e-30L);
  }
  return bad;
}

TEMPLATE_TEST_CASE("16-bit softmax_backward and log_softmax_backward: the float formula, rounded once, every ISA",
                   "[half][backward]", bf16, fp16) {
  using H = TestType;
  const H guard = H::from_bits(0x7bcd);
  smax::thread_pool pool(2);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (std::size_t n : half_sizes()) {
      const std::vector<H> x = logits<H>(n, 2.0, n + 11), dy = logits<H>(n, 1.0, n + 12);
      for (int log = 0; log < 2; ++log) {
        INFO(isa << " " << format<H>::name() << " n=" << n << (log ? " log_softmax_backward" : " softmax_backward"));
        std::vector<H> y(n);
        if (log)
          smax::dynamic::log_softmax(x.data(), y.data(), n);
        else
          smax::dynamic::softmax(x.data(), y.data(), n);
        const auto run = [&](const H* a, const H* b, H* out) {
          if (log)
            smax::dynamic::log_softmax_backward(a, b, out, n);
          else
            smax::dynamic::softmax_backward(a, b, out, n);
        };
        std::vector<H> dx(n + 2, guard);
        run(y.data(), dy.data(), dx.data() + 1);
        CHECK(bits_of(dx[0]) == bits_of(guard));
        CHECK(bits_of(dx[n + 1]) == bits_of(guard));
        // against the exact formula on the 16-bit y and dy
        long double dot = 0;
        for (std::size_t i = 0; i < n; ++i)
          dot += log ? static_cast<long double>(static_cast<float>(dy[i]))
                     : static_cast<long double>(static_cast<float>(y[i])) * static_cast<float>(dy[i]);
        CHECK(backward_misses(log != 0, y, dy, dx.data() + 1, dot) == 0);
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
        // x86: softmax_backward sums its dot product as the float kernel
        // does on the widened arrays (in double, the same lanes), so dx is
        // that kernel's result rounded once
        if (!log) {
          std::vector<float> yf(n), dyf(n), of(n);
          for (std::size_t i = 0; i < n; ++i) yf[i] = static_cast<float>(y[i]), dyf[i] = static_cast<float>(dy[i]);
          smax::dynamic::softmax_backward(yf.data(), dyf.data(), of.data(), n);
          std::size_t moved = 0;
          for (std::size_t i = 0; i < n; ++i) moved += bits_of(H(of[i])) != bits_of(dx[i + 1]);
          CHECK(moved == 0);
        }
#endif
        // in place over dy and over y: the same bits
        std::vector<H> io = dy;
        run(y.data(), io.data(), io.data());
        CHECK(std::memcmp(io.data(), dx.data() + 1, n * 2) == 0);
        io = y;
        run(io.data(), dy.data(), io.data());
        CHECK(std::memcmp(io.data(), dx.data() + 1, n * 2) == 0);
        // batched rows (3 copies of the row), any executor: the same bits
        if (n <= 5000) {
          std::vector<H> ys, dys;
          for (int r = 0; r < 3; ++r) {
            ys.insert(ys.end(), y.begin(), y.end());
            dys.insert(dys.end(), dy.begin(), dy.end());
          }
          for (smax::executor* ex : {static_cast<smax::executor*>(nullptr), static_cast<smax::executor*>(&pool)}) {
            std::vector<H> dxs(3 * n);
            const smax::matrix_view<const H> yv(ys.data(), 3, n), dyv(dys.data(), 3, n);
            if (log)
              smax::dynamic::log_softmax_backward(yv, dyv, smax::matrix_view<H>(dxs.data(), 3, n), ex);
            else
              smax::dynamic::softmax_backward(yv, dyv, smax::matrix_view<H>(dxs.data(), 3, n), ex);
            for (int r = 0; r < 3; ++r) CHECK(std::memcmp(dxs.data() + r * n, dx.data() + 1, n * 2) == 0);
          }
        }
      }
      // NaN in dy: NaN reaches dx (every entry for softmax_backward, through the dot product)
      std::vector<H> y(n), d = dy, dx(n);
      smax::dynamic::softmax(x.data(), y.data(), n);
      d[n / 2] = H(std::numeric_limits<float>::quiet_NaN());
      smax::dynamic::softmax_backward(y.data(), d.data(), dx.data(), n);
      CHECK(all_i(n, [&](std::size_t i) {
        return static_cast<float>(y[i]) == 0 || static_cast<float>(dx[i]) != static_cast<float>(dx[i]);
      }));
    }
  }
}

// 16-bit backward outputs of 16 MiB and more are streamed (map2_half: two
// vectors rounded into one, non-temporal stores) where the smaller ones go
// through L1 blocks. Each dx is a function of its own y and dy and the
// row's constants, so dx's alignment and in place over y or dy change no
// bit; nothing is written outside dx; stablemax_backward (and on x86
// softmax_backward) the float kernel's result on the widened arrays, bit for
// bit, the others within the bound of the case above.
TEMPLATE_TEST_CASE("16-bit backward passes, streamed outputs: any alignment, in place, guards, the formula",
                   "[half][backward][large]", bf16, fp16) {
  using H = TestType;
  const std::size_t n = streamed_n<H>();
  if (n == 0) return;
  const H guard = H::from_bits(0x7bcd);
  const std::vector<H> x = logits<H>(n, 3.0, 93), dy = logits<H>(n, 1.0, 94);
  std::vector<float> xf(n), dyf(n);
  for (std::size_t i = 0; i < n; ++i) xf[i] = static_cast<float>(x[i]), dyf[i] = static_cast<float>(dy[i]);
  std::vector<H> p(n), lp(n);
  smax::dynamic::softmax(x.data(), p.data(), n);
  smax::dynamic::log_softmax(x.data(), lp.data(), n);
  // y entries of 2^-80 (bf16; 0 in fp16) here and there: their vectors take
  // softmax_backward_term's general form, whose bits differ from its fast
  // path's, so a dx grouped into vectors other than the float kernel's
  // (streamed from a misaligned start) would show (the earlier form: 2 dx
  // of these at the 31-element offset)
  for (std::size_t i = 7; i < n; i += 33) p[i] = H(0x1p-80f);
  const std::size_t last = 64 / sizeof(H) - 1;
  smax_test::guarded<H> d0(n, 0, guard), d1(n, 1, guard), dl(n, last, guard), z(n, last, guard);
  for (int kind = 0; kind < 3; ++kind) {
    const char* names[] = {"softmax_backward", "log_softmax_backward", "stablemax_backward"};
    const std::vector<H>& a = kind == 0 ? p : kind == 1 ? lp : x;
    // (softmax_backward's and log_softmax_backward's dot product)
    long double dot = 0;
    for (std::size_t i = 0; i < n; ++i)
      dot += kind == 1 ? static_cast<long double>(dyf[i])
                       : static_cast<long double>(static_cast<float>(a[i])) * dyf[i];
    for (const auto& isa : isas()) {
      use_isa scope(isa);
      INFO(isa << " " << format<H>::name() << " " << names[kind]);
      const auto run = [&](const H* in, const H* g, H* out) {
        if (kind == 0) smax::dynamic::softmax_backward(in, g, out, n);
        if (kind == 1) smax::dynamic::log_softmax_backward(in, g, out, n);
        if (kind == 2) smax::dynamic::stablemax_backward(in, g, out, n);
      };
      run(a.data(), dy.data(), d0.data());
      REQUIRE(d0.intact());
      const std::vector<H> ref = d0.values();
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
      const bool float_bits = kind != 1;  // (x86: softmax_backward's dot product is the float kernel's)
#else
      const bool float_bits = kind == 2;
#endif
      if (float_bits) {
        // the float kernel of the same level on the widened arrays
        std::vector<float> pw(n), of(n);
        for (std::size_t i = 0; i < n; ++i) pw[i] = static_cast<float>(p[i]);
        if (kind == 0)
          smax::dynamic::softmax_backward(pw.data(), dyf.data(), of.data(), n);
        else
          smax::dynamic::stablemax_backward(xf.data(), dyf.data(), of.data(), n);
        std::vector<H> expected(n);
        for (std::size_t i = 0; i < n; ++i) expected[i] = H(of[i]);
        CHECK(smax_test::same_bits(ref, expected));
      } else {
        CHECK(backward_misses(kind == 1, a, dy, ref.data(), dot) == 0);
      }
      for (auto* d : {&d1, &dl}) {
        run(a.data(), dy.data(), d->data());
        CHECK(d->intact());
        CHECK(std::memcmp(d->values().data(), ref.data(), n * sizeof(H)) == 0);
      }
      z.assign(dy);
      run(a.data(), z.data(), z.data());
      CHECK(z.intact());
      CHECK(std::memcmp(z.values().data(), ref.data(), n * sizeof(H)) == 0);
      z.assign(a);
      run(z.data(), dy.data(), z.data());
      CHECK(z.intact());
      CHECK(std::memcmp(z.values().data(), ref.data(), n * sizeof(H)) == 0);
    }
  }
}

#if defined(__SSE2__)
#include <xmmintrin.h>

TEMPLATE_TEST_CASE("16-bit: FTZ/DAZ change no bit of the conversions or of softmax (x86)", "[half][subnormal]", bf16,
                   fp16) {
  using H = TestType;
  std::vector<std::uint16_t> all(0x10000);
  for (std::uint32_t b = 0; b < 0x10000; ++b) all[b] = static_cast<std::uint16_t>(b);
  const std::vector<float> cases = rounding_cases<H>();
  // logits whose outputs reach H's subnormal range (fp16: below 2^-14)
  const std::vector<H> x = logits<H>(5000, 6.0, 99);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    INFO(isa << " " << format<H>::name());
    std::vector<float> wide[2];
    std::vector<H> narrow[2], y[2], ly[2];
    for (int ftz = 0; ftz < 2; ++ftz) {
      const unsigned saved = _mm_getcsr();
      if (ftz) _mm_setcsr(saved | 0x8040);  // FTZ (bit 15) | DAZ (bit 6)
      wide[ftz].resize(all.size());
      narrow[ftz].resize(cases.size());
      y[ftz].resize(x.size());
      ly[ftz].resize(x.size());
      smax::dynamic::convert(reinterpret_cast<const H*>(all.data()), wide[ftz].data(), all.size());
      smax::dynamic::convert(cases.data(), narrow[ftz].data(), cases.size());
      smax::dynamic::softmax(x.data(), y[ftz].data(), x.size());
      smax::dynamic::log_softmax(x.data(), ly[ftz].data(), x.size());
      _mm_setcsr(saved);
    }
    CHECK(std::memcmp(wide[0].data(), wide[1].data(), wide[0].size() * 4) == 0);
    CHECK(std::memcmp(narrow[0].data(), narrow[1].data(), narrow[0].size() * 2) == 0);
    CHECK(std::memcmp(y[0].data(), y[1].data(), y[0].size() * 2) == 0);
    CHECK(std::memcmp(ly[0].data(), ly[1].data(), ly[0].size() * 2) == 0);
  }
}
#endif

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <smax/detail/dispatch.hpp>

// The dispatcher installs the variant exactly where it should: the avx512
// level's bf16 table is the AVX512_BF16 one on a CPU with that extension
// (unless SMAX_AVX512_BF16=0), the level's own everywhere else.
TEST_CASE("bf16: the avx512 level's bf16 table is the AVX512_BF16 variant where the CPU has it", "[half]") {
  const auto have = isas();
  if (std::find(have.begin(), have.end(), "avx512") == have.end()) {
    WARN("SKIPPED: this CPU lacks AVX-512");
    return;
  }
  const smax_test::use_isa on("avx512");
  const char* env = std::getenv("SMAX_AVX512_BF16");
  const bool wanted = smax::detail::cpu_has_avx512_bf16() && !(env && std::strcmp(env, "0") == 0);
  const smax::detail::half_table<bf16>& active = smax::detail::active_tables().b16;
  const smax::detail::half_table<bf16>& expected =
      wanted ? smax::detail::bf16_table_avx512_bf16() : smax::detail::tables_avx512().b16;
  INFO("AVX512_BF16 wanted: " << wanted);
  CHECK(active.narrow == expected.narrow);
  CHECK(active.softmax == expected.softmax);
  CHECK(active.softmax_backward == expected.softmax_backward);
  // fp16 has no such variant: the level's own table.
  CHECK(smax::detail::active_tables().h16.softmax == smax::detail::tables_avx512().h16.softmax);
}

// The avx512 level runs bf16 with its AVX512_BF16 variant where the CPU has
// it (vcvtneps2bf16 rounding), so the tests above check that variant there;
// this case pins it to the level's own integer rounding, bit for bit.
TEST_CASE("bf16: the avx512 level's AVX512_BF16 variant gives the integer rounding's bits", "[half]") {
  const auto have = isas();
  if (std::find(have.begin(), have.end(), "avx512") == have.end() || !smax::detail::cpu_has_avx512_bf16()) {
    WARN("SKIPPED: this CPU lacks AVX512_BF16");
    return;
  }
  const smax::detail::half_table<bf16>& hw = smax::detail::bf16_table_avx512_bf16();
  const smax::detail::half_table<bf16>& plain = smax::detail::tables_avx512().b16;
  REQUIRE(hw.narrow != plain.narrow);
  // Every float bit pattern (subnormals, NaNs and the overflow to inf
  // included), narrowed by both; where large sizes are capped (sanitizers,
  // QEMU) every upper half with the rounding's edge cases in the lower one.
  {
    const bool every = smax_test::max_n() >= (std::size_t(1) << 24);
    const std::size_t chunk = std::size_t(1) << 22;
    const std::uint32_t lows[] = {0x0000, 0x0001, 0x3fff, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xfffe, 0xffff};
    std::vector<std::uint32_t> bits(chunk);
    std::vector<bf16> a(chunk), b(chunk);
    std::uint64_t differ = 0;
    const std::uint64_t total = every ? (std::uint64_t(1) << 32) : (std::uint64_t(1) << 16) * std::size(lows);
    for (std::uint64_t base = 0; base < total; base += chunk) {
      const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, total - base));
      for (std::size_t i = 0; i < len; ++i) {
        const std::uint64_t k = base + i;
        bits[i] = every ? static_cast<std::uint32_t>(k)
                        : static_cast<std::uint32_t>((k / std::size(lows)) << 16 | lows[k % std::size(lows)]);
      }
      const float* f = reinterpret_cast<const float*>(bits.data());
      hw.narrow(f, a.data(), len);
      plain.narrow(f, b.data(), len);
      for (std::size_t i = 0; i < len; ++i) differ += bits_of(a[i]) != bits_of(b[i]);
    }
    CHECK(differ == 0);
  }
  // The kernels: every path of the 16-bit softmax (in the stack block, the
  // row buffer, the staged passes), each algorithm, log_softmax, to bf16 and
  // to float, the backward passes, on logits whose outputs span bf16's range.
  for (std::size_t n : {1, 17, 2048, 2049, 70001, 270001}) {
    if (n > smax_test::max_n()) continue;
    for (double sigma : {3.0, 60.0}) {
      INFO("n = " << n << ", sigma = " << sigma);
      std::vector<bf16> x = logits<bf16>(n, sigma, n + 5);
      if (n > 100) x[n / 3] = bf16(-std::numeric_limits<float>::infinity());
      std::vector<bf16> y1(n), y2(n), d1(n), d2(n);
      std::vector<float> f1(n), f2(n);
      for (auto alg : {smax::algorithm::automatic, smax::algorithm::three_pass_recompute,
                       smax::algorithm::three_pass_reload, smax::algorithm::two_pass, smax::algorithm::online}) {
        hw.softmax(x.data(), y1.data(), n, alg);
        plain.softmax(x.data(), y2.data(), n, alg);
        CHECK(std::memcmp(y1.data(), y2.data(), 2 * n) == 0);
      }
      hw.softmax_to_f32(x.data(), f1.data(), n, smax::algorithm::automatic);
      plain.softmax_to_f32(x.data(), f2.data(), n, smax::algorithm::automatic);
      CHECK(std::memcmp(f1.data(), f2.data(), 4 * n) == 0);
      hw.log_softmax(x.data(), y1.data(), n);
      plain.log_softmax(x.data(), y2.data(), n);
      CHECK(std::memcmp(y1.data(), y2.data(), 2 * n) == 0);
      const std::vector<bf16> dy = logits<bf16>(n, 1.0, n + 6);
      plain.softmax(x.data(), y2.data(), n, smax::algorithm::automatic);
      hw.softmax_backward(y2.data(), dy.data(), d1.data(), n);
      plain.softmax_backward(y2.data(), dy.data(), d2.data(), n);
      CHECK(std::memcmp(d1.data(), d2.data(), 2 * n) == 0);
      plain.log_softmax(x.data(), y2.data(), n);
      hw.log_softmax_backward(y2.data(), dy.data(), d1.data(), n);
      plain.log_softmax_backward(y2.data(), dy.data(), d2.data(), n);
      CHECK(std::memcmp(d1.data(), d2.data(), 2 * n) == 0);
      // the losses (the plain level's bf16 losses run nowhere else on a CPU
      // with the variant); a NaN beside a saved lse sends NaN through dx's
      // rounding
      const std::size_t t = n / 2;
      CHECK(hw.logsumexp(x.data(), n) == plain.logsumexp(x.data(), n));
      CHECK(hw.cross_entropy(x.data(), n, t, 0.1f) == plain.cross_entropy(x.data(), n, t, 0.1f));
      hw.cross_entropy_backward(x.data(), n, t, 0.75, d1.data(), 0.1f);
      plain.cross_entropy_backward(x.data(), n, t, 0.75, d2.data(), 0.1f);
      CHECK(std::memcmp(d1.data(), d2.data(), 2 * n) == 0);
      std::vector<bf16> xn = x;
      xn[n - 1] = bf16(std::numeric_limits<float>::quiet_NaN());
      hw.cross_entropy_backward_lse(xn.data(), n, t, 0.75, d1.data(), 0.0f, 3.0);
      plain.cross_entropy_backward_lse(xn.data(), n, t, 0.75, d2.data(), 0.0f, 3.0);
      CHECK(std::memcmp(d1.data(), d2.data(), 2 * n) == 0);
      CHECK(std::isnan(static_cast<float>(d2[n - 1])));
      // the stablemax members, ssmax and softpick (read as 16-bit, rounded as written)
      hw.stablemax(x.data(), y1.data(), n);
      plain.stablemax(x.data(), y2.data(), n);
      CHECK(std::memcmp(y1.data(), y2.data(), 2 * n) == 0);
      hw.log_stablemax(x.data(), y1.data(), n);
      plain.log_stablemax(x.data(), y2.data(), n);
      CHECK(std::memcmp(y1.data(), y2.data(), 2 * n) == 0);
      hw.stablemax_backward(x.data(), dy.data(), d1.data(), n);
      plain.stablemax_backward(x.data(), dy.data(), d2.data(), n);
      CHECK(std::memcmp(d1.data(), d2.data(), 2 * n) == 0);
      hw.ssmax(x.data(), y1.data(), n, 0.5f, 0.0f);
      plain.ssmax(x.data(), y2.data(), n, 0.5f, 0.0f);
      CHECK(std::memcmp(y1.data(), y2.data(), 2 * n) == 0);
      hw.softpick(x.data(), y1.data(), n, 1e-8f);
      plain.softpick(x.data(), y2.data(), n, 1e-8f);
      CHECK(std::memcmp(y1.data(), y2.data(), 2 * n) == 0);
    }
  }
  // Streamed outputs (map_half: vcvtne2ps2bf16 against the integer pack),
  // softmax and log_softmax (above the size cap of the sanitizer and QEMU
  // builds: the release build runs them).
  const std::size_t n = smax::detail::stream_min_bytes / sizeof(bf16) + 37;
  if (n <= smax_test::max_n()) {
    const std::vector<bf16> x = logits<bf16>(n, 60.0, 17);
    std::vector<bf16> y1(n), y2(n);
    hw.softmax(x.data(), y1.data(), n, smax::algorithm::automatic);
    plain.softmax(x.data(), y2.data(), n, smax::algorithm::automatic);
    CHECK(std::memcmp(y1.data(), y2.data(), 2 * n) == 0);
    hw.log_softmax(x.data(), y1.data(), n);
    plain.log_softmax(x.data(), y2.data(), n);
    CHECK(std::memcmp(y1.data(), y2.data(), 2 * n) == 0);
  }
}
#endif

#if defined(SMAX_TEST_BF16_VARIANT_PROBE)
namespace smax_test {
long narrow_pair_mismatches_avx512_bf16(std::size_t vectors);  // bf16_variant_probe.cpp
}
// narrow_pair in the avx512 level's bf16 variant: vcvtne2ps2bf16 reads a
// subnormal as 0, so a pair holding one takes the integer rounding. No
// kernel output reaches that (softmax's are normal or 0; log_softmax's
// nonzero ones are at least the float minimum), so it is checked directly.
TEST_CASE("bf16: narrow_pair with AVX512_BF16 gives the bits of two narrow() calls, subnormals included", "[half]") {
  if (!smax::detail::cpu_has_avx512_bf16()) {
    WARN("SKIPPED: this CPU lacks AVX512_BF16");
    return;
  }
  const std::size_t vectors = std::min<std::size_t>(std::size_t(1) << 18, std::max<std::size_t>(smax_test::max_n() / 64, 4096));
  CHECK(smax_test::narrow_pair_mismatches_avx512_bf16(vectors) == 0);
}
#endif

// 16-bit outputs of 16 MiB and more go out with streaming stores (map_half:
// bf16 rounded two vectors at a time into one, fp16 through a staged
// chunk). Each output is a function of its own x and the passes' constants,
// so y's alignment, in place or not, changes no bit; nothing is written
// outside y; every output within one 16-bit ulp of the exact result.
TEMPLATE_TEST_CASE("16-bit softmax, streamed outputs: any alignment, in place, guards, within one ulp",
                   "[half][softmax][log_softmax][large]", bf16, fp16) {
  using H = TestType;
  const std::size_t n = streamed_n<H>();
  if (n == 0) return;
  const H guard = H::from_bits(0x7bcd);
  std::vector<H> x = logits<H>(n, 3.0, 91);
  x[n / 3] = H(-std::numeric_limits<float>::infinity());
  std::vector<float> xw(n);
  for (std::size_t i = 0; i < n; ++i) xw[i] = static_cast<float>(x[i]);
  const std::vector<long double> p = smax_test::ref_softmax(xw), lp = smax_test::ref_log_softmax(xw);
  const std::size_t last = 64 / sizeof(H) - 1;
  smax_test::guarded<H> y0(n, 0, guard), y1(n, 1, guard), yl(n, last, guard), z(n, last, guard);
  for (const auto& isa : isas()) {
    use_isa scope(isa);
    for (int kind = 0; kind < 3; ++kind) {
      const char* names[] = {"softmax/automatic", "softmax/three_pass_recompute", "log_softmax"};
      INFO(isa << " " << format<H>::name() << " " << names[kind]);
      const auto run = [&](const H* in, H* out) {
        if (kind == 0) smax::dynamic::softmax(in, out, n, smax::algorithm::automatic);
        if (kind == 1) smax::dynamic::softmax(in, out, n, smax::algorithm::three_pass_recompute);
        if (kind == 2) smax::dynamic::log_softmax(in, out, n);
      };
      run(x.data(), y0.data());
      REQUIRE(y0.intact());
      const std::vector<H> ref = y0.values();
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i)
        bad += !within_ulp<H>(static_cast<float>(ref[i]), kind == 2 ? lp[i] : p[i]);
      CHECK(bad == 0);
      for (auto* y : {&y1, &yl}) {
        run(x.data(), y->data());
        CHECK(y->intact());
        CHECK(std::memcmp(y->values().data(), ref.data(), n * sizeof(H)) == 0);
      }
      z.assign(x);
      run(z.data(), z.data());
      CHECK(z.intact());
      CHECK(std::memcmp(z.values().data(), ref.data(), n * sizeof(H)) == 0);
    }
  }
}
