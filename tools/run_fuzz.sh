#!/usr/bin/env bash
# Builds smax's libFuzzer targets (clang, ASan + UBSan) and runs each for a
# bounded time over its committed seed corpus (fuzz/corpus/<target>/).
#
#   tools/run_fuzz.sh [seconds per target, default 20] [target ...]
#
# The random seed is fixed (SMAX_FUZZ_SEED, default 1) so that a run is
# repeatable: a finding in CI is a real input, found again by the same
# command, not noise. Set SMAX_FUZZ_SEED=0 for a fresh seed each time.
# SMAX_FUZZ_RUNS=N also stops each target after N executions (whichever of
# the time and the count comes first), from the seed corpus alone: the run
# then does not depend on the machine's speed. It is repeatable on one
# machine; another CPU (other ISAs, which the targets pick from the input
# bytes) or another file system (libFuzzer orders seed files of equal size
# by directory listing) may explore other inputs.
#
# Before fuzzing, every open finding (fuzz/findings/<target>-*) is replayed:
# the stage fails while one still fails.
#
# A finding stops the run with a non-zero exit and leaves the crashing input
# in build/asan/artifacts/; turn it into a Catch2 regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
shift || true
if ! command -v clang++ >/dev/null || ! command -v cmake >/dev/null || [ ! -d /usr/include/xsimd ] ||
   [ ! -d /usr/include/catch2 ]; then
  apt-get update -qq && apt-get install -y -qq clang libclang-rt-14-dev cmake libxsimd-dev catch2 >/dev/null
fi
# The asan preset's tree (clang -O1, ASan + UBSan, libFuzzer's coverage):
# the fuzz targets link the tests' sanitized per-ISA objects, so the stage
# after the asan stage compiles nothing again.
build=build/asan
cmake --preset asan >/dev/null
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp)"); done
fi
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
mkdir -p "$build/artifacts"
status=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  mkdir -p "$work"
  seeds="fuzz/corpus/$t"
  [ -d "$seeds" ] || seeds=""
  for f in fuzz/findings/"$t"-*; do
    [ -e "$f" ] || continue
    if ! "$build/fuzz/$t" "$f" >"$build/$t.replay.log" 2>&1; then
      echo "   OPEN FINDING $f still fails (log: $build/$t.replay.log):"
      tail -n 20 "$build/$t.replay.log"
      status=1
    fi
  done
  runs_opt=()
  if [ -n "${SMAX_FUZZ_RUNS:-}" ]; then
    # Repeatable: the seed corpus alone, not what earlier runs added.
    runs_opt=(-runs="$SMAX_FUZZ_RUNS")
    rm -rf "$work"
    mkdir -p "$work"
    echo "== $t: $SMAX_FUZZ_RUNS executions (at most ${secs}s)"
  else
    echo "== $t: ${secs}s"
  fi
  if "$build/fuzz/$t" -seed="${SMAX_FUZZ_SEED:-1}" -max_total_time="$secs" "${runs_opt[@]}" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$t-" "$work" $seeds >"$build/$t.log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/$t.log" | grep -o '[0-9]*$' || echo '?')
    echo "   ok: $runs executions, no finding"
  else
    echo "   FINDING (log: $build/$t.log):"
    tail -n 30 "$build/$t.log"
    status=1
  fi
done
exit $status
