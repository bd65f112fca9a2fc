// The per-ISA probes: tests/isa_probe.cpp is compiled once per ISA of the
// runtime dispatch list (SMAX_ISAS in smax/detail/dispatch.hpp), with that ISA's -m
// flags (tests/CMakeLists.txt), and exposes what can only be observed from
// inside a TU built for that ISA: the accuracy of the exp primitive
// (detail::shifted_exp, detail::extexp, which are templates on the arch tag),
// the xsimd::default_arch those flags select, and the unqualified and
// arch-tag overloads of the public functions. Tests call a probe only when
// the CPU has its ISA (smax::dynamic::available_isas).
#pragma once

#include <cstddef>

#include <smax/detail/dispatch.hpp>

namespace smax_test {

// Measured error of the exp primitive, in ulp of the result type, against a
// long-double reference; `failure` is empty when every exact/edge-case check
// (e^0 = 1, e^-inf = 0, NaN stays NaN, flushing below the normal range,
// extexp's p and K ranges) held, else names the first that did not.
struct exp_ulp {
  double shifted_split = 0;  // shifted_exp<A, T, true>, several m up to split_limit
  double shifted_plain = 0;  // shifted_exp<A, T, false>, m = 0 and |m| > split_limit
  double extexp = 0;         // extexp over |x| <= split_limit (error of p)
  // float only: the relative error of exp_ref at the accuracies of 16-bit
  // outputs (exp_accuracy::bf16_output, fp16_output), m up to split_limit
  double ref_bf16_rel = 0, ref_fp16_rel = 0;
  std::size_t evaluations = 0;
  char failure[160] = {};
};

template <class T>
using kernel_fn = void (*)(const T*, T*, std::size_t, smax::algorithm);
template <class T>
using log_kernel_fn = void (*)(const T*, T*, std::size_t);

struct isa_probe {
  const char* default_arch;  // xsimd::default_arch::name() in this TU
  // `points`: sweep points per reference value m (and for extexp).
  exp_ulp (*exp_float)(std::size_t points);
  exp_ulp (*exp_double)(std::size_t points);
  // smax::softmax(x, y, n, a) (default_arch) and smax::softmax(Arch{}, ...).
  kernel_fn<float> softmax_default_f, softmax_tag_f;
  kernel_fn<double> softmax_default_d, softmax_tag_d;
  log_kernel_fn<float> log_softmax_default_f, log_softmax_tag_f;
  log_kernel_fn<double> log_softmax_default_d, log_softmax_tag_d;
  // half.hpp's narrow_pair against two narrow() calls, bf16 and fp16, both
  // narrow_input forms, on `vectors` pairs of random float bit patterns
  // (NaN, inf, subnormals among them; finite normal ones for
  // finite_normal): the pairs whose 2W results differ in any bit, or -1
  // where this ISA has no narrow_pair.
  long (*narrow_pair_mismatches)(std::size_t vectors);
  // exp.hpp's mul_term_normal(a, t), float and double, both forms, on
  // `vectors` vectors of random (a, t): a of any sign and binade, +-0,
  // subnormals and -inf (finite and >= 0 for the NonnegFinite form), t 0 or
  // normal up to 2^64. The lanes that break its contract: a kept product
  // that is not the rounded a t or lies below the smallest normal number
  // (allowed for a subnormal a beside t >= 1); a dropped one whose exact
  // value reaches 1.125 times that number (the most the integer test drops;
  // 2 times for double on SSE2, which keeps mul_normal); -inf beside t = 0,
  // or +-0 beside t < 2, giving anything but +0.
  long (*mul_term_normal_violations)(std::size_t vectors);
};

#define SMAX_TEST_DECLARE_PROBE(isa, arch, check) const isa_probe& isa_probe_##isa();
SMAX_ISAS(SMAX_TEST_DECLARE_PROBE)
#undef SMAX_TEST_DECLARE_PROBE

}  // namespace smax_test
