// libFuzzer target: softmax_backward and log_softmax_backward on arbitrary
// (y, dy), float, double, bf16 and fp16, every ISA, dx aliasing nothing, y or dy.
// Checked against the same formula in long double where every input and the
// reference are finite; always checked for writes outside [0, n).
#include "common.hpp"

namespace {

template <class T>
void run(smax_fuzz::stream& in) {
  const int alias = in.byte() % 3;  // 0: separate dx, 1: dx = y, 2: dx = dy
  const bool from_forward = in.byte() & 1;
  const std::size_t offset = in.byte();
  const std::size_t n = in.size(4096);
  std::vector<T> y = in.values<T>(n);
  const std::vector<T> dy = in.values<T>(n);
  if (from_forward) {  // a genuine forward output half of the time
    std::vector<T> x = y;
    smax::dynamic::softmax(x.data(), y.data(), n);
  }
  for (int log = 0; log < 2; ++log) {
    std::vector<T> yin = y;
    if (log && from_forward) {  // log-probabilities of the same logits
      for (auto& v : yin) v = std::log(v);
    }
    smax_fuzz::guarded<T> yb(n, offset), dyb(n, offset + 1), dxb(n, offset + 2);
    yb.assign(yin);
    dyb.assign(dy);
    T* dx = alias == 1 ? yb.data() : alias == 2 ? dyb.data() : dxb.data();
    if (log)
      smax::dynamic::log_softmax_backward(yb.data(), dyb.data(), dx, n);
    else
      smax::dynamic::softmax_backward(yb.data(), dyb.data(), dx, n);
    const char* fn = log ? "log_softmax_backward" : "softmax_backward";
    yb.check_guards(fn);
    dyb.check_guards(fn);
    dxb.check_guards(fn);
    const std::vector<T> got = alias == 1 ? yb.vec() : alias == 2 ? dyb.vec() : dxb.vec();

    // Reference and the scale of the terms it subtracts (the error bound of
    // a correctly rounded evaluation is a few ulp of that scale).
    // tiny: what the dot product's small terms may lose, each at most its
    // own size plus one subnormal step: log's sum of dy, the terms below a
    // few times the smallest normal number (flushed or rounded to the
    // subnormal grid); softmax's products y_j dy_j, those below
    // 2^digits times it (mul_summable drops them on the ISAs that sum
    // them in T lanes: double, NEON's float; backward.hpp dot_normal).
    // A dot below the smallest normal number is taken as 0 (normal_or_zero):
    // up to that number more. The output i carries it times |y_i|
    // (log: e^y_i), which matters only for a huge y_i against tiny terms.
    long double agg = 0, scale_sum = 0, tiny = 0;
    const long double min = std::numeric_limits<T>::min();
    const long double tiny_term = log ? 4.0L * min : std::ldexp(min, std::numeric_limits<T>::digits);
    for (std::size_t i = 0; i < n; ++i) {
      const long double term = log ? static_cast<long double>(dy[i]) : static_cast<long double>(yin[i]) * dy[i];
      agg += term;
      scale_sum += std::fabs(term);
      if (term != 0 && std::fabs(term) < tiny_term)
        tiny += std::fabs(term) + std::numeric_limits<T>::denorm_min();
    }
    if (!log && std::fabs(agg) < 2 * min) tiny += min;
    const long double big = std::numeric_limits<T>::max();
    bool finite = std::isfinite(static_cast<double>(scale_sum)) && scale_sum < big / 4;
    for (std::size_t i = 0; i < n && finite; ++i) finite = std::isfinite(yin[i]) && std::isfinite(dy[i]);
    if (log)
      for (std::size_t i = 0; i < n && finite; ++i) finite = yin[i] <= T(1);  // e^y in range
    if (!finite) continue;
    const long double eps = std::numeric_limits<T>::epsilon();
    for (std::size_t i = 0; i < n; ++i) {
      // Where the true result or the terms it subtracts leave T's range,
      // inf (or an overflowed product) is a right answer: check only the
      // representable cases.
      const long double e = log ? std::exp(static_cast<long double>(yin[i])) : 0;
      const long double ref = log ? dy[i] - e * agg : yin[i] * (dy[i] - agg);
      const long double scale =
          log ? std::fabs(static_cast<long double>(dy[i])) + e * scale_sum : std::fabs(static_cast<long double>(yin[i])) * (std::fabs(static_cast<long double>(dy[i])) + scale_sum);
      if (!(scale < big / 4)) continue;
      // (+ 4 min: a result below a few times the smallest normal number is
      // 0 rather than a subnormal, docs/guarantees.md, exp.hpp)
      const long double lost = (log ? e : std::fabs(static_cast<long double>(yin[i]))) * tiny;
      if (std::fabs(static_cast<long double>(got[i]) - ref) > 8 * eps * scale + 4 * std::numeric_limits<T>::min() + lost)
        smax_fuzz::fail(std::string(fn) + ": error above a few ulp of the term scale at " + std::to_string(i));
    }
  }
}

// bf16 / fp16 y, dy, dx: the same formula on the 16-bit values, the float
// kernel's bound plus one 16-bit ulp of the result (the rounding of dx).
template <class H>
void run_half(smax_fuzz::stream& in) {
  constexpr bool bf = std::is_same<H, smax::bf16>::value;
  const int alias = in.byte() % 3;
  const bool from_forward = in.byte() & 1;
  const std::size_t offset = in.byte();
  const std::size_t n = in.size(4096);
  const std::vector<float> yraw = in.values<float>(n), dyraw = in.values<float>(n);
  std::vector<H> y(n), dy(n);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = H(yraw[i]);
    dy[i] = H(dyraw[i]);
  }
  if (from_forward) {
    const std::vector<H> x = y;
    smax::dynamic::softmax(x.data(), y.data(), n);
  }
  smax_fuzz::context() = std::string(bf ? "bf16" : "fp16") + ", alias " + std::to_string(alias) + "\n";
  for (int log = 0; log < 2; ++log) {
    std::vector<H> yin = y;
    if (log && from_forward)
      for (auto& v : yin) v = H(std::log(static_cast<float>(v)));
    smax_fuzz::guarded<H> yb(n, offset), dyb(n, offset + 1), dxb(n, offset + 2);
    yb.assign(yin);
    dyb.assign(dy);
    H* dx = alias == 1 ? yb.data() : alias == 2 ? dyb.data() : dxb.data();
    if (log)
      smax::dynamic::log_softmax_backward(yb.data(), dyb.data(), dx, n);
    else
      smax::dynamic::softmax_backward(yb.data(), dyb.data(), dx, n);
    const char* fn = log ? "log_softmax_backward (16-bit)" : "softmax_backward (16-bit)";
    yb.check_guards(fn);
    dyb.check_guards(fn);
    dxb.check_guards(fn);
    const std::vector<H> got = alias == 1 ? yb.vec() : alias == 2 ? dyb.vec() : dxb.vec();
    std::vector<long double> yv(n), dyv(n);
    for (std::size_t i = 0; i < n; ++i) {
      yv[i] = static_cast<float>(yin[i]);
      dyv[i] = static_cast<float>(dy[i]);
    }
    long double agg = 0, scale_sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
      agg += log ? dyv[i] : yv[i] * dyv[i];
      scale_sum += std::fabs(log ? dyv[i] : yv[i] * dyv[i]);
    }
    const long double big = bf ? std::numeric_limits<float>::max() : 65504.0L;
    bool finite = std::isfinite(static_cast<double>(scale_sum)) && scale_sum < big / 4;
    for (std::size_t i = 0; i < n && finite; ++i) finite = std::isfinite(yv[i]) && std::isfinite(dyv[i]);
    if (log)
      for (std::size_t i = 0; i < n && finite; ++i) finite = yv[i] <= 1;
    if (!finite) continue;
    const long double eps = std::numeric_limits<float>::epsilon();
    for (std::size_t i = 0; i < n; ++i) {
      const long double e = log ? std::exp(yv[i]) : 0;
      const long double ref = log ? dyv[i] - e * agg : yv[i] * (dyv[i] - agg);
      const long double scale = log ? std::fabs(dyv[i]) + e * scale_sum : std::fabs(yv[i]) * (std::fabs(dyv[i]) + scale_sum);
      if (!(scale < big / 4)) continue;
      // one ulp of H at ref (2^-7 / 2^-10 relative; fp16 below 2^-14: 2^-24)
      const long double ulp = std::max(std::fabs(ref) * (bf ? 0x1p-7L : 0x1p-10L), bf ? 0x1p-133L : 0x1p-24L);
      if (std::fabs(static_cast<long double>(static_cast<float>(got[i])) - ref) >
          8 * eps * scale + ulp + 4 * std::numeric_limits<float>::min())
        smax_fuzz::fail(std::string(fn) + ": error above the float bound plus a 16-bit ulp at " + std::to_string(i));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  smax_fuzz::stream in(data, size);
  in.pick_isa();
  switch (in.byte() % 4) {
    case 0: run<float>(in); break;
    case 1: run<double>(in); break;
    case 2: run_half<smax::bf16>(in); break;
    default: run_half<smax::fp16>(in); break;
  }
  return 0;
}
