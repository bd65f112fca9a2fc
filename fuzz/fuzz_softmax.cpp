// libFuzzer target: softmax (every algorithm) and log_softmax, float,
// double, bf16 and fp16 logits (16-bit and float outputs), every ISA the CPU has, out of place and in place, misaligned, with
// guard regions; checked against the long-double reference and the
// special-value rules.
#include "common.hpp"

namespace {

template <class T>
void run(smax_fuzz::stream& in) {
  const auto a = static_cast<smax::algorithm>(in.byte() % 5);
  const bool in_place = in.byte() & 1;
  const std::size_t offset = in.byte();
  const std::size_t n = in.size(4096);
  const std::vector<T> x = in.values<T>(n);
  smax_fuzz::context() = std::string(sizeof(T) == 4 ? "float, " : "double, ") + "algorithm " +
                         std::to_string(static_cast<int>(a)) + (in_place ? ", in place\n" : "\n");
  smax_fuzz::describe("x", x);

  smax_fuzz::guarded<T> xb(n, offset), yb(n, offset + 1);
  xb.assign(x);
  T* out = in_place ? xb.data() : yb.data();
  smax::dynamic::softmax(xb.data(), out, n, a);
  std::vector<T> y = in_place ? xb.vec() : yb.vec();
  xb.check_guards("softmax");
  yb.check_guards("softmax");
  if (!in_place && xb.vec() != x && !smax_fuzz::any_nan(x)) smax_fuzz::fail("softmax: input modified");
  if (!smax_fuzz::check_special_softmax(x, y, false, "softmax")) smax_fuzz::check_softmax_values(x, y, "softmax");

  xb.assign(x);
  out = in_place ? xb.data() : yb.data();
  smax::dynamic::log_softmax(xb.data(), out, n);
  y = in_place ? xb.vec() : yb.vec();
  xb.check_guards("log_softmax");
  yb.check_guards("log_softmax");
  if (!smax_fuzz::check_special_softmax(x, y, true, "log_softmax"))
    smax_fuzz::check_log_softmax_values(x, y, "log_softmax");
}

// One ulp of H at the magnitude of v (v finite): binade spacing, the
// subnormal spacing below H's normal range.
template <class H>
double ulp16(double v) {
  constexpr bool bf = std::is_same<H, smax::bf16>::value;
  int e = 0;
  std::frexp(v, &e);  // |v| in [2^(e - 1), 2^e)
  return std::ldexp(1.0, std::max(e - 1, bf ? -126 : -14) - (bf ? 7 : 10));
}

// 16-bit logits: the float-output form at the float contract, and the
// 16-bit output (in place or not): log_softmax equal bit for bit to that
// float output rounded once; softmax, which computes its terms with the
// cheaper exp its rounding allows (exp_accuracy, exp.hpp), within one
// 16-bit ulp of it (the contract: one ulp of the exact result; the float
// output is within 1e-6 of that, outputs below 1e-30 absolutely).
template <class H>
void run_half(smax_fuzz::stream& in) {
  const auto a = static_cast<smax::algorithm>(in.byte() % 5);
  const bool in_place = in.byte() & 1;
  const std::size_t offset = in.byte();
  const std::size_t n = in.size(4096);
  const std::vector<float> raw = in.values<float>(n);
  std::vector<H> x(n);
  std::vector<float> xf(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = H(raw[i]);
    xf[i] = static_cast<float>(x[i]);
  }
  smax_fuzz::context() = std::string(sizeof(H) == 2 && std::is_same<H, smax::bf16>::value ? "bf16, " : "fp16, ") +
                         "algorithm " + std::to_string(static_cast<int>(a)) + (in_place ? ", in place\n" : "\n");
  smax_fuzz::describe("x", xf);
  for (int log = 0; log < 2; ++log) {
    const char* name = log ? "log_softmax (16-bit)" : "softmax (16-bit)";
    smax_fuzz::guarded<float> yf(n, offset);
    if (log)
      smax::dynamic::log_softmax(x.data(), yf.data(), n);
    else
      smax::dynamic::softmax(x.data(), yf.data(), n, a);
    yf.check_guards(name);
    const std::vector<float> f = yf.vec();
    if (!smax_fuzz::check_special_softmax(xf, f, log != 0, name)) {
      if (log)
        smax_fuzz::check_log_softmax_values(xf, f, name);
      else
        smax_fuzz::check_softmax_values(xf, f, name);
    }
    smax_fuzz::guarded<H> xb(n, offset), yb(n, offset + 1);
    xb.assign(x);
    H* out = in_place ? xb.data() : yb.data();
    if (log)
      smax::dynamic::log_softmax(xb.data(), out, n);
    else
      smax::dynamic::softmax(xb.data(), out, n, a);
    xb.check_guards(name);
    yb.check_guards(name);
    const std::vector<H> y = in_place ? xb.vec() : yb.vec();
    for (std::size_t i = 0; i < n; ++i) {
      const float got = static_cast<float>(y[i]), want = static_cast<float>(H(f[i]));
      if (got != got && want != want) continue;
      if (log) {
        if (y[i].bits != H(f[i]).bits)
          smax_fuzz::fail(std::string(name) + ": the 16-bit output is not the float output rounded once at " +
                          std::to_string(i));
      } else if (!(std::fabs(static_cast<double>(got) - f[i]) <=
                   ulp16<H>(f[i]) + 2e-6 * std::fabs(static_cast<double>(f[i])) + 1e-30)) {
        smax_fuzz::fail(std::string(name) + ": the 16-bit output is not within one 16-bit ulp of the float output at " +
                        std::to_string(i));
      }
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
