#!/usr/bin/env bash
# Paired before/after timing of single kernels (docs/tuning.md, "Paired runs").
#   tools/paired/paired_run.sh REV [ROUNDS] [ISAS]
# builds tools/paired/paired.cpp against REV's include/ and the work tree's,
# for each ISA (avx512 avx2 sse2), then runs the binaries alternately
# (order rotated each round) at SIZES (default "4096 65536 1048576") and
# prints, per kernel and size, the median ns/element of each and their ratio
# (work tree / REV).
set -euo pipefail
rev=${1:?usage: paired_run.sh REV [ROUNDS] [ISAS]}
rounds=${2:-5}
isas=${3:-"avx512 avx2 sse2"}
sizes=${SIZES:-"4096 65536 1048576"}
root=$(git rev-parse --show-toplevel)
# Pinned to one CPU: unpinned runs on the 2-vCPU VMs went bimodal (1.7x)
# when the scheduler moved the process mid-run.
pin=""
if command -v taskset >/dev/null; then pin="taskset -c $(($(nproc) - 1))"; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$root" archive "$rev" include | tar -x -C "$work" && mv "$work/include" "$work/old_include"
flags() {
  case $1 in
    avx512) echo "-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512dq -mavx512vl -DTAG=xsimd::avx512bw" ;;
    avx2) echo "-mavx2 -mfma -mf16c -DTAG=xsimd::fma3<xsimd::avx2>" ;;
    sse2) echo "-DTAG=xsimd::sse2" ;;
  esac
}
for isa in $isas; do
  # shellcheck disable=SC2046
  g++ -O2 -std=c++17 $(flags "$isa") -I"$work/old_include" "$root/tools/paired/paired.cpp" -o "$work/old_$isa" &
  old_pid=$!
  # shellcheck disable=SC2046
  g++ -O2 -std=c++17 $(flags "$isa") -I"$root/include" "$root/tools/paired/paired.cpp" -o "$work/new_$isa"
  wait "$old_pid"
done
for isa in $isas; do
  for n in $sizes; do
    for ((r = 0; r < rounds; ++r)); do
      if ((r % 2)); then order="new old"; else order="old new"; fi
      for v in $order; do $pin "$work/${v}_$isa" "$n" | sed "s/^/$v $r /" >> "$work/log_${isa}_$n"; done
    done
    python3 - "$work/log_${isa}_$n" "$isa" "$n" <<'PY'
import sys, statistics, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    v, r, k, ns = line.split()
    t[(k, v)].append(float(ns))
kernels = list(dict.fromkeys(k for k, _ in t))
for k in kernels:
    o, n = statistics.median(t[(k, 'old')]), statistics.median(t[(k, 'new')])
    print(f"{sys.argv[2]:7s} {sys.argv[3]:>8s} {k:28s} old {o:7.4f} new {n:7.4f} ratio {n / o:5.3f}")
PY
  done
done
