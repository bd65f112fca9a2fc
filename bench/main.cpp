// smax_bench's main: records what the numbers depend on (CPU, ISAs compiled
// in and available, the peers built, the thresholds) in the JSON context,
// then runs Google Benchmark as usual (all its --benchmark_* flags work).
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <smax/dynamic.hpp>
#include <smax/detail/loops.hpp>

#include "common.hpp"

#ifndef SMAX_BENCH_PEERS
#define SMAX_BENCH_PEERS ""
#endif

namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

// Cache sizes as glibc reports them (Google Benchmark's own list is empty
// on some VMs).
std::string cache_sizes() {
  std::string s;
#if defined(_SC_LEVEL1_DCACHE_SIZE)
  const struct {
    const char* name;
    int id;
  } levels[] = {{"L1d", _SC_LEVEL1_DCACHE_SIZE}, {"L2", _SC_LEVEL2_CACHE_SIZE}, {"L3", _SC_LEVEL3_CACHE_SIZE}};
  for (const auto& l : levels) {
    const long bytes = sysconf(l.id);
    if (bytes > 0) s += (s.empty() ? "" : ", ") + std::string(l.name) + " " + std::to_string(bytes >> 10) + " KiB";
  }
#endif
  return s.empty() ? "unknown" : s;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ",") + e;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const char* names[8];
  const std::size_t k = smax::dynamic::available_isas(names, 8);
  std::vector<std::string> avail(names, names + (k < 8 ? k : 8));
  // --smax_isas: print the ISAs this CPU runs, best first (for scripts).
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--smax_isas") {
      std::printf("%s\n", join(avail).c_str());
      return 0;
    }
  benchmark::AddCustomContext("cpu_model", cpu_model());
  benchmark::AddCustomContext("cache_sizes", cache_sizes());
  benchmark::AddCustomContext("smax_isas_compiled", join(smax_bench::compiled_isas()));
  benchmark::AddCustomContext("smax_isas_cpu", join(avail));
  benchmark::AddCustomContext("smax_peers", SMAX_BENCH_PEERS);
  benchmark::AddCustomContext("smax_stream_min_bytes", std::to_string(smax::detail::stream_min_bytes));
  benchmark::AddCustomContext("bench_rotate_min_bytes", std::to_string(smax_bench::rotate_min_bytes));
  benchmark::AddCustomContext("roofline_isa", smax_bench::roofline::isa());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
