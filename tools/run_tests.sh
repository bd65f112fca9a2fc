#!/usr/bin/env bash
# smax's test command (docs/testing.md; .ci/run calls it).
#
#   bash tools/run_tests.sh              every stage below
#   bash tools/run_tests.sh release neon only the stages named
#
# On Debian 12 run as root it first installs the packages the tests need
# (apt-get); as another user it says which are missing. Then, one CMake
# preset per stage (CMakePresets.json; build trees under build/<stage>):
#
#   release  g++ -O2, warnings as errors: every test on every ISA the CPU
#            has, the examples, SMAX_ISA forcing, packaging (find_package
#            against an install prefix, add_subdirectory), and the bindings
#            preset's C API and Python tests (below), all on one compile of
#            the per-ISA objects (the C library's); smax_bench is built
#            (not run)
#   clang    clang++ -O2, warnings as errors: the same tests, less packaging
#   asan     clang++ -O1 (Debug: xsimd assertions on) with AddressSanitizer +
#            UndefinedBehaviorSanitizer and libFuzzer's coverage; large sizes
#            capped at 128K (SMAX_TEST_MAX_N); the examples are left to
#            release and clang; the fuzz targets are built here too, on the
#            tests' per-ISA objects
#   neon     aarch64 cross build, tests run under qemu-aarch64; large sizes
#            capped at 128K (SMAX_TEST_MAX_N: QEMU emulates long double, the
#            references' type, in software); the examples are left to release
#            and clang
#   bindings (not in the default list: release runs its tests) g++ -O2,
#            warnings as errors, without smax's own tests: the C API (tests/c_api: every
#            function from C, bit for bit against the C++ calls, linked shared,
#            static, and with `cc $(pkg-config --cflags --libs smax)` against
#            an install prefix) and the Python module (pytest: python/tests,
#            against torch and numpy references, gradcheck in double)
#   tsan     clang++ ThreadSanitizer: threads calling at once, the thread
#            pool, a long row split across threads (tests/tsan)
#   fuzz     the asan tree's libFuzzer targets: every one (fuzz/) from its
#            seed corpus (which replays the inputs of past findings first),
#            fixed seed, SMAX_FUZZ_RUNS executions each (default 20000)
#            or SMAX_FUZZ_SECONDS (default 30), whichever
#            comes first (independent of the machine's speed); open findings
#            in fuzz/findings/ are replayed and fail the stage
#
# It prints a per-stage summary and, as its last line, "N passed, N failed";
# it exits non-zero if any stage fails to build or any test fails. Full logs:
# build/logs/<stage>.{build,test}.log.
set -u -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(release clang asan neon tsan fuzz)

# libclang-rt-14-dev: the sanitizer and libFuzzer runtimes of Debian 12's clang
# (only recommended by clang, and recommends are not installed here)
# bindings: pkg-config, pybind11-dev, python3-dev and Debian's numpy, torch, pytest
# libbenchmark-dev: the release stage also builds smax_bench (without the
# peers, which tools/run_bench.sh installs), so that a change that breaks
# the benchmark suite fails here
packages=(cmake make g++ clang libclang-rt-14-dev libxsimd-dev catch2 g++-aarch64-linux-gnu qemu-user
          pkg-config pybind11-dev python3-dev python3-numpy python3-torch python3-pytest libbenchmark-dev)

install_packages() {
  command -v dpkg-query >/dev/null 2>&1 || return 0  # not Debian: trust the PATH
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "missing packages: ${missing[*]}"
    echo "install them with: sudo apt-get install -y ${missing[*]}"
    return 1
  fi
  echo "== installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
}

t0=$(date +%s)
if ! install_packages; then
  echo "0 passed, 1 failed"
  exit 1
fi

jobs=$(nproc 2>/dev/null || echo 2)
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$jobs}
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-$jobs}
mkdir -p build/logs

total_passed=0
total_failed=0
total_skipped=0
summary=()

run_stage() {
  local s=$1 t=$(date +%s)
  local blog=build/logs/$s.build.log tlog=build/logs/$s.test.log
  echo
  echo "== [$s] configure and build (log: $blog)"
  if ! { cmake --preset "$s" && cmake --build --preset "$s"; } >"$blog" 2>&1; then
    tail -n 60 "$blog"
    echo "== [$s] BUILD FAILED"
    total_failed=$((total_failed + 1))
    summary+=("$(printf '%-8s build FAILED (%ds)' "$s" $(($(date +%s) - t)))")
    return
  fi
  echo "== [$s] test (log: $tlog)"
  ctest --preset "$s" 2>&1 | tee "$tlog"
  local line total failed skipped
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$tlog" | tail -n 1)
  if [ -z "$line" ]; then
    echo "== [$s] ctest did not report a result"
    total_failed=$((total_failed + 1))
    summary+=("$(printf '%-8s ctest FAILED to run (%ds)' "$s" $(($(date +%s) - t)))")
    return
  fi
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  failed=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
  skipped=$(grep -cE '^\s+[0-9]+ - .*\((Skipped|Not Run|Disabled)\)$' "$tlog")
  total_passed=$((total_passed + total - failed - skipped))
  total_failed=$((total_failed + failed))
  total_skipped=$((total_skipped + skipped))
  summary+=("$(printf '%-8s %4d passed, %d failed, %d skipped (%ds)' "$s" $((total - failed - skipped)) "$failed" \
    "$skipped" $(($(date +%s) - t)))")
}

# A stage that is one command: its exit status is the result.
run_command_stage() {
  local s=$1 t=$(date +%s) log=build/logs/$1.log
  shift
  echo
  echo "== [$s] (log: $log)"
  if "$@" >"$log" 2>&1; then
    grep -E "ok:|passed" "$log" | tail -n 5
    total_passed=$((total_passed + 1))
    summary+=("$(printf '%-8s passed (%ds)' "$s" $(($(date +%s) - t)))")
  else
    tail -n 40 "$log"
    total_failed=$((total_failed + 1))
    summary+=("$(printf '%-8s FAILED (%ds)' "$s" $(($(date +%s) - t)))")
  fi
}

tsan_stage() {
  mkdir -p build/tsan
  clang++ -std=c++17 -O1 -g -fsanitize=thread -Iinclude tests/tsan/tsan_threads.cpp -o build/tsan/tsan_threads -pthread &&
    TSAN_OPTIONS=halt_on_error=1 build/tsan/tsan_threads
}

for s in "${stages[@]}"; do
  case "$s" in
    tsan) run_command_stage tsan tsan_stage ;;
    fuzz) run_command_stage fuzz env SMAX_FUZZ_RUNS="${SMAX_FUZZ_RUNS:-20000}" bash tools/run_fuzz.sh "${SMAX_FUZZ_SECONDS:-30}" ;;
    *) run_stage "$s" ;;
  esac
done

echo
echo "== summary ($(($(date +%s) - t0))s)"
for l in "${summary[@]}"; do echo "   $l"; done
[ "$total_skipped" -gt 0 ] && echo "   $total_skipped test(s) skipped: see the logs (e.g. an ISA this CPU lacks)"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
