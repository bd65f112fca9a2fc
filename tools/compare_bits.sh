#!/usr/bin/env bash
# Checks that a change moves no output bit (issue 16's rule for refactors):
#
#   bash tools/compare_bits.sh [REV]     (default REV: HEAD)
#
# compiles tools/bit_hashes.cpp against REV's include/ and against the work
# tree's, runs both (every single-row function of the family, float and
# double, AVX-512 / AVX2 / SSE2, sizes 1 .. 2^20, ordinary, wide, special,
# flat and sorted inputs, with the batched, attention-row and 16-bit softmax
# paths: about 37000 hashes) and diffs them. x86-64 with
# AVX-512 only (the AVX-512 kernels are among those compared). Exit status
# 0 when every hash matches. About eight CPU minutes (two compiles of the
# whole family, two runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rev="${1:-HEAD}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/old"
git archive "$rev" include | tar -x -C "$work/old"
# -ffp-contract=off: g++ contracts a * b + c into an FMA by default in C++
# (-ffp-contract=fast, also across xsimd's operators) wherever its inlining
# happens to put them together, so an unrelated edit can move a last bit of
# the default build (seen: softpick_backward, AVX2, f64); with it off, "same
# bits" says the arithmetic written is the same. SMAX_COMPARE_CONTRACT=1
# compares the default (contracted) builds instead.
flags=(-std=c++17 -O2 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mavx2 -mf16c)
[ "${SMAX_COMPARE_CONTRACT:-0}" = 1 ] || flags+=(-ffp-contract=off)
g++ "${flags[@]}" -I"$work/old/include" tools/bit_hashes.cpp -o "$work/old_bits" &
old_pid=$!
g++ "${flags[@]}" -Iinclude tools/bit_hashes.cpp -o "$work/new_bits"
wait "$old_pid"
"$work/old_bits" > "$work/old.txt"
"$work/new_bits" > "$work/new.txt"
if diff "$work/old.txt" "$work/new.txt" > "$work/diff.txt"; then
  echo "same bits: $(wc -l < "$work/new.txt") hashes against $rev"
else
  echo "outputs differ from $rev (old < > new):"
  head -40 "$work/diff.txt"
  exit 1
fi
