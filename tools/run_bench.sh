#!/usr/bin/env bash
# smax's benchmark command: installs what it needs (Debian/Ubuntu, as root),
# builds smax_bench in Release, runs it and writes the report.
#
#   tools/run_bench.sh            default suite: 222 benchmarks x 3 repetitions,
#                                 about 6 minutes on 2 Zen 5 cores plus 5 for the
#                                 build (2026-12-02); longer on the Intel Xeon (the
#                                 first 42 of its 666 runs took 100 s, 2026-12-01)
#   tools/run_bench.sh --full     every benchmark, every size (much longer)
#
# Options:
#   --out DIR        output folder (default: bench-out)
#   --build DIR      build folder (default: build-bench)
#   --filter REGEX   run only the benchmarks matching REGEX (Google Benchmark)
#   --reps N         repetitions per benchmark (default 3, --full 5); medians
#   --min-time S     seconds per repetition (default 0.1, --full 0.2)
#   --no-install     never call apt-get
#   --no-plots       skip the PNG plots
#   -- ARGS          passed on to smax_bench
#
# Writes into the output folder:
#   results.json     Google Benchmark JSON (every repetition + aggregates)
#   report.md        machine, targets, summary and full tables
#   plot_*.png, overview.png   throughput vs size per ISA (tools/report.py)
#   console.txt      the run's console output
#   passes.md        smax_pass_profile's output (x86-64; default and --full
#                    runs, not --filter ones): each pass of the two-pass
#                    softmax timed alone beside the memory-only kernels,
#                    also appended to report.md
#
# Contenders run in random interleaved order (--benchmark_enable_random_
# interleaving) so that a slow phase of a noisy machine does not fall on one
# of them; every kernel's "x roofline" is measured right after it, on the
# same buffers. Peers run single-threaded (OMP_NUM_THREADS=1), except the
# batched entries named ".../threads:2/real_time", which run every library's
# batched API on 2 threads (smax::thread_pool, XNNPACK's pthreadpool, oneDNN's
# OpenMP threads set per call) and are timed on the wall clock against a
# roofline split over 2 threads.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="bench-out"
build="build-bench"
full=0
filter=""
reps=""
min_time=""
install=1
plots=1
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --full) full=1 ;;
    --out) out="$2"; shift ;;
    --build) build="$2"; shift ;;
    --filter) filter="$2"; shift ;;
    --reps) reps="$2"; shift ;;
    --min-time) min_time="$2"; shift ;;
    --no-install) install=0 ;;
    --no-plots) plots=0 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "run_bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

say() { printf '\n== %s\n' "$*"; }

# 1. Packages. The peers (XNNPACK, oneDNN) and matplotlib are optional: the
# build and the report go on without them and say so.
packages=(cmake g++ libxsimd-dev libbenchmark-dev libxnnpack-dev libpthreadpool-dev libdnnl-dev ocl-icd-opencl-dev libtorch-dev python3 python3-matplotlib)
if [ "$install" = 1 ] && command -v dpkg >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
      say "installing: ${missing[*]}"
      export DEBIAN_FRONTEND=noninteractive
      apt-get update
      apt-get install -y "${missing[@]}"
    else
      echo "run_bench.sh: missing packages (${missing[*]}); not root, so not installing them" >&2
    fi
  fi
fi

# 2. Build (Release, only the benchmark).
jobs="$(nproc 2>/dev/null || echo 2)"
case "$build" in /*) ;; *) build="$here/$build" ;; esac
case "$out" in /*) ;; *) out="$(pwd)/$out" ;; esac
say "building smax_bench in $build"
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSMAX_BUILD_TESTS=OFF -DSMAX_BUILD_EXAMPLES=OFF \
  -DSMAX_BUILD_BENCH=ON -DSMAX_INSTALL=OFF >/dev/null
targets=(smax_bench)
case "$(uname -m)" in x86_64|amd64) targets+=(smax_pass_profile) ;; esac
cmake --build "$build" --target "${targets[@]}" -j "$jobs"
bench="$build/bench/smax_bench"
profile="$build/bench/smax_pass_profile"

# 3. What to run. The best ISA this CPU has picks the ISA of the other
# families' default entries.
best_isa=$("$bench" --smax_isas | cut -d, -f1)
[ -n "$best_isa" ] || best_isa=sse2
sizes='(4096|65536|1048576|16777216|67108864)'
run_profile=0
if [ -z "$filter" ]; then
  run_profile=1
  if [ "$full" = 1 ]; then
    filter='.'
  else
    # softmax (every algorithm and ISA), the peers and the roofline at five
    # sizes from L1 to DRAM; every other kernel family (and its baselines) on
    # the best ISA at 64K and 16M; the batched API (64M floats per call, wall
    # clock): `automatic` at 2048x32768 on 1 thread on every ISA, on the best
    # ISA at every shape (2048x32768, 16384x1024, 64x1M, one 64M row) on 1 and
    # 2 threads, the peers' batched operators at the three batch shapes on 1
    # and 2 threads, and the 64M rooflines on 1 and 2 threads.
    filter="^(softmax/[a-z_]+|log_softmax|[a-z]+/softmax|roofline/rw2)/f32/[a-z0-9]+/$sizes\$"
    filter+="|^softmax_batched/automatic/f32/[a-z0-9]+/2048/32768/threads:1/real_time\$"
    filter+="|^softmax_batched/automatic/f32/$best_isa/[0-9]+/[0-9]+/threads:[12]/real_time\$"
    filter+="|^[a-z]+/softmax_batched/f32/native/(2048/32768|16384/1024|64/1048576)/threads:[12]/real_time\$"
    filter+="|^roofline/(rw2|copy)/f32/[a-z0-9]+/1/67108864/threads:[12]/real_time\$"
    filter+="|^[^/]+(/[^/]+)*/f32/($best_isa|native|baseline)/(65536|16777216)\$"
    # logits that reach the subnormal band, default FP environment beside
    # FTZ/DAZ (bench_subnormal.cpp), and the peers on the same logits
    filter+="|^subnormal/(softmax/automatic|log_softmax|softmax_backward)/(ieee|ftz)/f32/$best_isa/(65536|67108864)\$"
    filter+="|^subnormal/softmax_batched/(ieee|ftz)/f32/$best_isa/2048/32768/threads:1/real_time\$"
    filter+="|^[a-z]+/softmax(_batched)?_wide/f32/native/(65536|67108864|2048/32768/threads:1/real_time)\$"
  fi
fi
[ -n "$reps" ] || reps=$([ "$full" = 1 ] && echo 5 || echo 3)
[ -n "$min_time" ] || min_time=$([ "$full" = 1 ] && echo 0.2 || echo 0.1)

mkdir -p "$out"
total=$("$bench" --benchmark_filter="$filter" --benchmark_list_tests | wc -l)
[ "$total" -gt 0 ] || { echo "run_bench.sh: no benchmark matches $filter" >&2; exit 1; }
say "running $total benchmarks x $reps repetitions (min time ${min_time}s each), interleaved"

# 4. Run: one line of progress per finished repetition.
export OMP_NUM_THREADS=1
"$bench" --benchmark_filter="$filter" \
  --benchmark_repetitions="$reps" --benchmark_min_time="$min_time" \
  --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out/results.json" --benchmark_out_format=json \
  --benchmark_color=false --benchmark_counters_tabular=false "${extra[@]}" 2>&1 |
  tee "$out/console.txt" |
  awk -v total="$((total * reps))" '
    /^[a-z0-9_]+\/.*\/([0-9]+|real_time) / && !/_(mean|median|stddev|cv) / { done++; printf "[%d/%d] %s\n", done, total, $0; fflush(); next }
    /_(mean|median|stddev|cv) / { next }
    { print; fflush() }'

# 5. Where the time goes: the passes one by one (x86-64, not for --filter).
if [ "$run_profile" = 1 ] && [ -x "$profile" ]; then
  say "smax_pass_profile (64M floats, the passes one by one)"
  "$profile" --isa "$([ "$full" = 1 ] && echo all || echo best)" | tee "$out/passes.md"
fi

# 6. Report.
say "report"
# The Debian python3 has python3-matplotlib; a python3 earlier on PATH
# (pyenv, venv) may not.
py=""
for cand in python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import matplotlib' >/dev/null 2>&1; then py="$cand"; break; fi
done
if [ -z "$py" ]; then
  py=python3
  [ "$plots" = 1 ] && echo "run_bench.sh: no python3 with matplotlib (apt-get install python3-matplotlib): no plots" >&2
  plots=0
fi
if [ "$plots" = 1 ]; then
  "$py" "$here/tools/report.py" "$out/results.json" "$out"
else
  "$py" "$here/tools/report.py" "$out/results.json" "$out" --no-plots
fi
if [ -s "$out/passes.md" ]; then
  { echo; cat "$out/passes.md"; } >>"$out/report.md"
fi
echo
echo "run_bench.sh: results in $out (report.md, results.json, *.png)"
