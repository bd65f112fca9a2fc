// The exp primitive (detail::shifted_exp, detail::extexp) measured in ulp
// against long double on every ISA, and compile-time ISA selection: a TU
// compiled with an ISA's flags must pick that ISA for the unqualified
// functions (xsimd::default_arch) and agree with the explicit arch tag and
// the runtime dispatcher. Both need code compiled with each ISA's flags: the
// per-ISA probes of isa_probe.hpp.
#include <cstdio>
#include <string>
#include <vector>

#include "common.hpp"
#include "isa_probe.hpp"

namespace {

const smax_test::isa_probe& probe(const std::string& isa) {
#define SMAX_TEST_PROBE(isa_name, arch, check) \
  if (isa == #isa_name) return smax_test::isa_probe_##isa_name();
  SMAX_ISAS(SMAX_TEST_PROBE)
#undef SMAX_TEST_PROBE
  FAIL("no probe for " << isa);
  throw;
}

// The xsimd arch tag the dispatcher instantiates for `isa`.
std::string arch_name(const std::string& isa) {
#define SMAX_TEST_ARCH(isa_name, arch, check) \
  if (isa == #isa_name) return arch::name();
  SMAX_ISAS(SMAX_TEST_ARCH)
#undef SMAX_TEST_ARCH
  return "?";
}

bool cpu_has(const std::string& isa) {
  const auto s = smax_test::isas();
  return std::find(s.begin(), s.end(), isa) != s.end();
}

// One test case per ISA (the SMAX_ISAS list below), so that CTest's
// "SKIPPED:" rule marks only the ISA this CPU lacks as skipped; a case
// looping over the ISAs would report a failure on another ISA as skipped.
void exp_primitive_within_2_ulp(const std::string& isa) {
  // Sweep points per reference value m: 1M natively (about 10M evaluations
  // per ISA and type), fewer under QEMU (SMAX_TEST_MAX_N).
  const std::size_t points = std::min<std::size_t>(std::size_t(1) << 20, std::max<std::size_t>(smax_test::max_n() / 16, 4096));
  if (!cpu_has(isa)) {
    WARN("SKIPPED: exp primitive on " << isa << ": this CPU lacks it");
    return;
  }
  const auto& p = probe(isa);
  const smax_test::exp_ulp f = p.exp_float(points);
  const smax_test::exp_ulp d = p.exp_double(points);
  std::printf("exp max ulp on %-7s float: shifted_exp split %.3f, plain %.3f, extexp %.3f (%zu points); "
              "double: split %.3f, plain %.3f, extexp %.3f (%zu points)\n",
              isa.c_str(), f.shifted_split, f.shifted_plain, f.extexp, f.evaluations, d.shifted_split,
              d.shifted_plain, d.extexp, d.evaluations);
  std::fflush(stdout);
  INFO("isa " << isa);
  CHECK(std::string(f.failure) == "");
  CHECK(std::string(d.failure) == "");
  CHECK(f.shifted_split <= 2.0);
  CHECK(f.shifted_plain <= 2.0);
  CHECK(f.extexp <= 2.0);
  CHECK(d.shifted_split <= 2.0);
  CHECK(d.shifted_plain <= 2.0);
  CHECK(d.extexp <= 2.0);
  // The bounds exp.hpp's exp_accuracy states for the terms of 16-bit
  // outputs: fit error plus the one-part ln2 (up to 1.1e-5 at |m| = split_limit)
  std::printf("exp_ref relative error on %-7s for bf16 outputs %.3g, for fp16 outputs %.3g\n", isa.c_str(),
              f.ref_bf16_rel, f.ref_fp16_rel);
  CHECK(f.ref_bf16_rel > 0);
  CHECK(f.ref_bf16_rel <= 4.9e-4);
  CHECK(f.ref_fp16_rel <= 2.9e-5);
}

void compile_time_selection_agrees(const std::string& isa) {
  const std::vector<std::size_t> ns = {1, 5, 17, 100, 1000, 4097, 100003};
  if (!cpu_has(isa)) {
    WARN("SKIPPED: compile-time selection for " << isa << ": this CPU lacks it");
    return;
  }
  const auto& p = probe(isa);
  INFO("isa " << isa);
  // A TU compiled with this ISA's flags selects this ISA's arch tag.
  CHECK(std::string(p.default_arch) == arch_name(isa));
  smax_test::use_isa guard(isa);
  for (std::size_t n : ns) {
    INFO("n " << n);
    const auto xf = smax_test::normal<float>(n, 6.0, n);
    const auto xd = smax_test::normal<double>(n, 6.0, n);
    std::vector<float> af(n), bf(n), cf(n);
    std::vector<double> ad(n), bd(n), cd(n);
    for (smax::algorithm a : smax_test::algorithms()) {
      INFO(smax_test::algorithm_name(a));
      p.softmax_default_f(xf.data(), af.data(), n, a);
      p.softmax_tag_f(xf.data(), bf.data(), n, a);
      smax::dynamic::softmax(xf.data(), cf.data(), n, a);
      CHECK(smax_test::same_bits(af, bf));
      CHECK(smax_test::same_bits(bf, cf));
      p.softmax_default_d(xd.data(), ad.data(), n, a);
      p.softmax_tag_d(xd.data(), bd.data(), n, a);
      smax::dynamic::softmax(xd.data(), cd.data(), n, a);
      CHECK(smax_test::same_bits(ad, bd));
      CHECK(smax_test::same_bits(bd, cd));
    }
    p.log_softmax_default_f(xf.data(), af.data(), n);
    p.log_softmax_tag_f(xf.data(), bf.data(), n);
    smax::dynamic::log_softmax(xf.data(), cf.data(), n);
    CHECK(smax_test::same_bits(af, bf));
    CHECK(smax_test::same_bits(bf, cf));
    p.log_softmax_default_d(xd.data(), ad.data(), n);
    p.log_softmax_tag_d(xd.data(), bd.data(), n);
    smax::dynamic::log_softmax(xd.data(), cd.data(), n);
    CHECK(smax_test::same_bits(ad, bd));
    CHECK(smax_test::same_bits(bd, cd));
  }
}

// half.hpp's narrow_pair (the 16-bit softmax's streamed and bf16 write
// loops) rounds as two narrow() calls do, bit for bit, where the ISA has it.
void narrow_pair_as_two_narrows(const std::string& isa) {
  if (!cpu_has(isa)) {
    WARN("SKIPPED: narrow_pair on " << isa << ": this CPU lacks it");
    return;
  }
  const std::size_t vectors = std::min<std::size_t>(std::size_t(1) << 18, std::max<std::size_t>(smax_test::max_n() / 64, 4096));
  const long differ = probe(isa).narrow_pair_mismatches(vectors);
  if (differ < 0) {
    WARN("SKIPPED: " << isa << " has no narrow_pair (the 16-bit outputs are stored a vector at a time)");
    return;
  }
  INFO("isa " << isa << ", " << vectors << " pairs per type and form");
  CHECK(differ == 0);
}

// mul_term_normal (sa_softmax's write pass out of cache): a kept product is
// the rounded product and normal, a dropped one below 1.125 times the
// smallest normal number, -inf beside a term 0 gives +0.
void mul_term_normal_contract(const std::string& isa) {
  if (!cpu_has(isa)) {
    WARN("SKIPPED: mul_term_normal on " << isa << ": this CPU lacks it");
    return;
  }
  const std::size_t vectors = std::min<std::size_t>(std::size_t(1) << 16, std::max<std::size_t>(smax_test::max_n() / 64, 4096));
  INFO("isa " << isa << ", " << vectors << " vectors per type and form");
  CHECK(probe(isa).mul_term_normal_violations(vectors) == 0);
}

}  // namespace

#define SMAX_TEST_PER_ISA(isa, arch, check)                                                                   \
  TEST_CASE("exp primitive: max error <= 2 ulp against long double on " #isa, "[exp]") {                      \
    exp_primitive_within_2_ulp(#isa);                                                                         \
  }                                                                                                           \
  TEST_CASE("ISA selection at compile time on " #isa ": default_arch and arch tags agree with the dispatcher", \
            "[dispatch][isa]") {                                                                              \
    compile_time_selection_agrees(#isa);                                                                      \
  }                                                                                                           \
  TEST_CASE("16-bit narrow_pair: the bits of two narrow() calls on " #isa, "[half][isa]") {                   \
    narrow_pair_as_two_narrows(#isa);                                                                         \
  }                                                                                                           \
  TEST_CASE("mul_term_normal: kept products normal, dropped ones below the normal range on " #isa,            \
            "[exp][subnormal][isa]") {                                                                        \
    mul_term_normal_contract(#isa);                                                                           \
  }
SMAX_ISAS(SMAX_TEST_PER_ISA)
#undef SMAX_TEST_PER_ISA
