// smax_bench's main: records what the numbers depend on (CPU, ISAs compiled
// in and available, the peers built, the thresholds) in the JSON context,
// then runs Google Benchmark as usual (all its --benchmark_* flags work).
#include <benchmark/benchmark.h>

#include <fstream>
#include <string>

#include <smax/dynamic.hpp>
#include <smax/reduce.hpp>

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
  benchmark::AddCustomContext("cpu_model", cpu_model());
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
