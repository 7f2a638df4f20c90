#!/usr/bin/env bash
# replay.sh TAILOR: runs `tailor compile` on every fuzzer seed and past crash
# input in test/fuzz/corpus, and `tailor inspect` on those in
# test/fuzz/plan-corpus. Each must end in success or a diagnostic (exit 0
# or 1), never a signal or a hang, so a fixed fuzzer finding stays fixed.
set -uo pipefail
tailor=$1
corpus=$(cd "$(dirname "${BASH_SOURCE[0]}")/corpus" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
count=0
for input in "$corpus"/*; do
  # A hang is a finding too (a mask walk over 2^31 diagonals was one).
  timeout 120 "$tailor" compile "$input" --compile-to=graph --batch 1 --seq 4 \
    -o "$out/out.mlir" >/dev/null 2>"$out/err"
  rc=$?
  count=$((count + 1))
  if [ $rc -eq 124 ]; then
    echo "FAIL: $(basename "$input") did not finish in 120 s"
    status=1
  elif [ $rc -gt 1 ]; then
    echo "FAIL: $(basename "$input") exited $rc"
    tail -5 "$out/err"
    status=1
  fi
done
# Plans: every seed and past crash must load or be refused, never crash.
for input in "$corpus"/../plan-corpus/*; do
  "$tailor" inspect "$input" >/dev/null 2>"$out/err"
  rc=$?
  count=$((count + 1))
  if [ $rc -gt 1 ]; then
    echo "FAIL: plan $(basename "$input") exited $rc"
    tail -5 "$out/err"
    status=1
  fi
done
echo "replayed $count corpus inputs"
exit $status
