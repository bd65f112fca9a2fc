// smax_pass_profile: the passes of an out-of-cache softmax timed one by one
// beside the memory-only kernels that bound them (pass_profile.hpp), as a
// markdown section. tools/run_bench.sh runs it after the suite and appends
// its output to report.md.
//
//   smax_pass_profile [--n ELEMENTS] [--reps N] [--isa avx512|avx2|all]
//
// Compiled for x86-64 only; an ISA the CPU lacks is reported and skipped.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pass_profile.hpp"

namespace smax_pass_profile {
std::vector<entry> run_avx512(std::size_t n, int reps);
std::vector<entry> run_avx2(std::size_t n, int reps);
}  // namespace smax_pass_profile

namespace {

using smax_pass_profile::entry;

double get(const std::vector<entry>& es, const char* name) {
  for (const entry& e : es)
    if (e.name == name) return e.median;
  return 0;
}

void report(const char* isa, std::size_t n, int reps, const std::vector<entry>& es) {
  std::printf("\n### %s, %zu floats, median of %d interleaved rounds\n\n", isa, n, reps);
  std::printf("| entry | ns per element | what |\n|---|---|---|\n");
  for (const entry& e : es) std::printf("| %s | %.3f | %s |\n", e.name.c_str(), e.median, e.what.c_str());
  const double read = get(es, "read"), write = get(es, "stream"), copy = get(es, "copy"), rw2 = get(es, "rw2");
  const double sum = get(es, "sum"), sum_l2 = get(es, "sum_L2"), ws = get(es, "write"), wd = get(es, "write_direct"),
               w_l2 = get(es, "write_L2"), tp = get(es, "two_pass"), reload = get(es, "reload");
  const double rows_copy = get(es, "rows_copy"), rows_pf = get(es, "rows_copy_pf"), rows = get(es, "rows_softmax");
  std::printf("\n");
  std::printf("- two_pass runs at %.2fx the rw2 roofline (rw2 / two_pass) and %.2fx three-pass reload; its passes add "
              "up to %.3f ns (sum %.3f + write %.3f) against rw2's %.3f (read %.3f + copy %.3f).\n",
              rw2 / tp, reload / tp, sum + ws, sum, ws, rw2, read, copy);
  std::printf("- Pass 1: %.3f ns against a plain read's %.3f (+%.3f); its arithmetic alone, in L2, takes %.3f: "
              "memory and arithmetic overlap only in part.\n",
              sum, read, sum - read, sum_l2);
  std::printf("- Pass 2: %.3f ns", ws);
  if (wd > 0) std::printf(" (%.3f streaming each vector as computed)", wd);
  std::printf(" against the copy's %.3f (+%.3f). Streaming writes alone take %.3f and the pass's arithmetic alone %.3f: "
              "%.3f if they did not overlap at all",
              copy, ws - copy, write, w_l2, write + w_l2);
  if (write + w_l2 - ws > 0.005)
    std::printf("; %.3f ns of the arithmetic is hidden behind the writes.\n", write + w_l2 - ws);
  else
    std::printf(": none of the arithmetic is hidden behind the writes.\n");
  const double wi = get(es, "write_in_place"), tpi = get(es, "two_pass_in_place");
  std::printf("- In place (y to y), pass 2 takes %.3f against %.3f out of place, and the whole two_pass %.3f against "
              "%.3f (%.2fx faster): the streaming stores then go to lines the pass has just read.\n",
              wi, ws, tpi, tp, tp / tpi);
  const double gumbel = get(es, "gumbel"), gw = get(es, "gumbel_write"), noise = get(es, "noise_L2");
  std::printf("- gumbel_softmax: %.3f ns, %.2fx two_pass's time. Its pass 2 rewrites y in place in %.3f (streaming "
              "writes alone: %.3f); pass 1 takes the rest, about %.3f, against %.3f for the noise alone in L2 and "
              "%.3f for two_pass's pass-1 arithmetic: pass 1 is bound by its arithmetic, not by memory.\n",
              gumbel, gumbel / tp, gw, write, gumbel - gw, noise, sum_l2);
  std::printf("- Batched rows of %zu floats: %.3f ns, %.2fx the copy. Reading each row (max) and then streaming it out, "
              "with no arithmetic at all, takes %.3f (%.2fx the copy); with the next row prefetched during the "
              "writes, %.3f (%.2fx).\n",
              smax_pass_profile::row_cols, rows, copy / rows, rows_copy, copy / rows_copy, rows_pf, copy / rows_pf);
}

bool cpu_has(const char* isa) {
#if defined(__GNUC__) || defined(__clang__)
  if (!std::strcmp(isa, "avx512")) return __builtin_cpu_supports("avx512f");
  if (!std::strcmp(isa, "avx2")) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = std::size_t(64) << 20;
  int reps = 5;
  std::string isa = "best";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--n" || a == "--reps" || a == "--isa") && i + 1 < argc) {
      const char* v = argv[++i];
      if (a == "--n") n = std::strtoull(v, nullptr, 10);
      if (a == "--reps") reps = std::atoi(v);
      if (a == "--isa") isa = v;
    } else {
      std::fprintf(stderr, "usage: smax_pass_profile [--n ELEMENTS] [--reps N] [--isa avx512|avx2|all|best]\n");
      return 2;
    }
  }
  const std::size_t unit = smax_pass_profile::row_cols;
  n = (n + unit - 1) / unit * unit;
  if (n < smax_pass_profile::l2_block || reps < 1) {
    std::fprintf(stderr, "smax_pass_profile: need --n >= %zu and --reps >= 1\n", smax_pass_profile::l2_block);
    return 2;
  }
  std::printf("## Where the time goes (smax_pass_profile)\n\n");
  std::printf("Each pass of an out-of-cache two-pass softmax timed alone, beside the memory-only kernels that bound it "
              "and its arithmetic alone on an L2-resident block; float, one thread, every entry one call over the "
              "whole array (two buffer pairs in turn, never in cache), all entries interleaved.\n");
  bool any = false;
  for (const char* name : {"avx512", "avx2"}) {
    const bool wanted = isa == "all" || isa == name || (isa == "best" && !any);
    if (!wanted) continue;
    if (!cpu_has(name)) {
      if (isa != "best") std::printf("\n### %s: not on this CPU, skipped\n", name);
      continue;
    }
    any = true;
    const auto es = std::string(name) == "avx512" ? smax_pass_profile::run_avx512(n, reps)
                                                   : smax_pass_profile::run_avx2(n, reps);
    report(name, n, reps, es);
  }
  if (!any) std::printf("\nNo AVX2 or AVX-512 on this CPU: nothing profiled.\n");
  return 0;
}
