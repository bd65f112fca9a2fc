// libFuzzer target: the rest of the family on bf16 / fp16 (half_family.hpp),
// every ISA the CPU has: any 16-bit inputs (raw bit patterns or rounded
// logits, NaN, inf and subnormals included), any scalar parameter (out of
// range included), misaligned, in place or not. Each 16-bit call must refuse
// exactly the arguments the float call refuses, and otherwise write the float
// kernel's result on the widened inputs rounded once (NaN where it is NaN),
// nothing outside [0, n).
#include "common.hpp"

#include <stdexcept>

namespace {

using smax_fuzz::fail;
namespace d = smax::dynamic;

template <class H>
std::vector<H> half_values(smax_fuzz::stream& in, std::size_t n) {
  std::vector<H> v(n);
  if (in.byte() & 1) {
    for (auto& e : v) e = H::from_bits(static_cast<std::uint16_t>(in.u32()));
  } else {
    const std::vector<float> f = in.values<float>(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = H(f[i]);
  }
  return v;
}

// f(x, y, dy, out, n, p0, p1, p2): the function under test on H or float
// arrays; p* are its scalar parameters where it has any.
template <class H, class F>
void run(smax_fuzz::stream& in, const char* name, F&& f) {
  const std::size_t n = in.size(3000);
  const std::vector<H> x = half_values<H>(in, n), y = half_values<H>(in, n), dy = half_values<H>(in, n);
  const float p0 = smax_fuzz::param<float>(in, {1.5f, 0.5f, 2.0f, 1e-8f, 1.2f});
  const float p1 = smax_fuzz::param<float>(in, {1.0f, 0.3f, 4.0f});
  const float p2 = smax_fuzz::param<float>(in, {0.0f, -0.5f, 0.25f});
  const int where = in.byte() % 3;  // out of place, over x, over dy
  smax_fuzz::context() = std::string(std::is_same<H, smax::bf16>::value ? "bf16 " : "fp16 ") + name +
                         " n=" + std::to_string(n) + " where=" + std::to_string(where) + "\n";
  // the float call on the widened inputs
  std::vector<float> xf(n), yf(n), dyf(n), of(n);
  for (std::size_t i = 0; i < n; ++i) {
    xf[i] = static_cast<float>(x[i]);
    yf[i] = static_cast<float>(y[i]);
    dyf[i] = static_cast<float>(dy[i]);
  }
  bool float_refused = false;
  try {
    f(xf.data(), yf.data(), dyf.data(), of.data(), n, p0, p1, p2);
  } catch (const std::invalid_argument&) {
    float_refused = true;
  }
  // the 16-bit call
  smax_fuzz::guarded<H> gx(n, in.byte()), gdy(n, in.byte()), gout(n, in.byte());
  gx.assign(x);
  gdy.assign(dy);
  H* out = where == 1 ? gx.data() : where == 2 ? gdy.data() : gout.data();
  bool half_refused = false;
  try {
    f(static_cast<const H*>(gx.data()), y.data(), static_cast<const H*>(gdy.data()), out, n, p0, p1, p2);
  } catch (const std::invalid_argument&) {
    half_refused = true;
  }
  if (float_refused != half_refused) fail("the 16-bit and float calls disagree on refusing the arguments");
  gx.check_guards("x");
  gdy.check_guards("dy");
  gout.check_guards("out");
  const auto& written = where == 1 ? gx : where == 2 ? gdy : gout;
  if (half_refused) {
    for (std::size_t i = 0; i < n && where != 0; ++i)
      if (written[i].bits != (where == 1 ? x : dy)[i].bits) fail("a refused call wrote its output");
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const H want(of[i]);
    const float w = static_cast<float>(want), g = static_cast<float>(written[i]);
    if (w != w ? g == g : written[i].bits != want.bits)
      fail("output " + std::to_string(i) + " is not the float kernel's result rounded once");
  }
}

template <class H>
void pick(smax_fuzz::stream& in) {
  const auto mp = [](float a, float b) {
    smax::multimax_params p;
    p.ts[0] = a;
    p.ranges[1] = b;
    return p;
  };
  switch (in.byte() % 22) {
    case 0: return run<H>(in, "stablemax", [](auto x, auto, auto, auto o, std::size_t n, float, float, float) { d::stablemax(x, o, n); });
    case 1: return run<H>(in, "log_stablemax", [](auto x, auto, auto, auto o, std::size_t n, float, float, float) { d::log_stablemax(x, o, n); });
    case 2: return run<H>(in, "softpick", [](auto x, auto, auto, auto o, std::size_t n, float a, float, float) { d::softpick(x, o, n, a); });
    case 3: return run<H>(in, "ssmax", [](auto x, auto, auto, auto o, std::size_t n, float a, float b, float) { d::ssmax(x, o, n, a, b); });
    case 4: return run<H>(in, "gumbel_softmax", [](auto x, auto, auto, auto o, std::size_t n, float a, float, float c) { d::gumbel_softmax(x, o, n, a, 5, c > 0); });
    case 5: return run<H>(in, "stablemax_backward", [](auto x, auto, auto dy, auto o, std::size_t n, float, float, float) { d::stablemax_backward(x, dy, o, n); });
    case 6: return run<H>(in, "softpick_backward", [](auto x, auto y, auto dy, auto o, std::size_t n, float a, float, float) { d::softpick_backward(x, y, dy, o, n, a); });
    case 7: return run<H>(in, "sparsemax", [](auto x, auto, auto, auto o, std::size_t n, float, float, float) { d::sparsemax(x, o, n); });
    case 8: return run<H>(in, "entmax15", [](auto x, auto, auto, auto o, std::size_t n, float, float, float) { d::entmax15(x, o, n); });
    case 9: return run<H>(in, "entmax_bisect", [](auto x, auto, auto, auto o, std::size_t n, float a, float, float) { d::entmax_bisect(x, o, n, a, 30); });
    case 10: return run<H>(in, "sparsemax_backward", [](auto, auto y, auto dy, auto o, std::size_t n, float, float, float) { d::sparsemax_backward(y, dy, o, n); });
    case 11: return run<H>(in, "entmax_backward", [](auto, auto y, auto dy, auto o, std::size_t n, float a, float, float) { d::entmax_backward(y, dy, o, n, a); });
    case 12: return run<H>(in, "sigmoid_attention", [](auto x, auto, auto, auto o, std::size_t n, float, float, float c) { d::sigmoid_attention(x, o, n, c); });
    case 13: return run<H>(in, "sa_softmax", [](auto x, auto, auto, auto o, std::size_t n, float, float, float c) { d::sa_softmax(x, o, n, c > 0); });
    case 14: return run<H>(in, "multimax", [&](auto x, auto, auto, auto o, std::size_t n, float a, float b, float) { d::multimax(x, o, n, mp(a, b)); });
    case 15: return run<H>(in, "asentmax", [](auto x, auto, auto, auto o, std::size_t n, float a, float b, float c) { d::asentmax(x, o, n, a, b, c); });
    case 16: return run<H>(in, "sigmoid_attention_backward", [](auto x, auto y, auto dy, auto o, std::size_t n, float, float, float c) { d::sigmoid_attention_backward(x, y, dy, o, n, c); });
    case 17: return run<H>(in, "sa_softmax_backward", [](auto x, auto y, auto dy, auto o, std::size_t n, float, float, float c) { d::sa_softmax_backward(x, y, dy, o, n, c > 0); });
    case 18: return run<H>(in, "multimax_backward", [&](auto x, auto y, auto dy, auto o, std::size_t n, float a, float b, float) { d::multimax_backward(x, y, dy, o, n, mp(a, b)); });
    case 19: return run<H>(in, "asentmax_backward", [](auto x, auto y, auto dy, auto o, std::size_t n, float a, float b, float c) { d::asentmax_backward(x, y, dy, o, n, a, b, c); });
    case 20: return run<H>(in, "cross_entropy_backward", [](auto x, auto, auto, auto o, std::size_t n, float a, float b, float c) {
      d::cross_entropy_backward(x, n, b > 0 && b < 1e6f ? static_cast<std::size_t>(b) : 0, a, o, c);
    });
    default: return run<H>(in, "gumbel_noise", [](auto, auto, auto, auto o, std::size_t n, float, float, float) { d::gumbel_noise(o, n, 3, 9); });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  smax_fuzz::stream in(data, size);
  in.pick_isa();
  if (in.byte() & 1)
    pick<smax::bf16>(in);
  else
    pick<smax::fp16>(in);
  return 0;
}
