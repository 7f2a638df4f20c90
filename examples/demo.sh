#!/usr/bin/env bash
# demo.sh BUILD_DIR: what `make demo` runs on the bundled example.
#
# Today: verify the tiny Llama forward graph in tg, canonicalize it, print its
# parameter inventory, and check that the printed IR parses back to the same
# text. It grows with each stage of the compiler.
set -euo pipefail

build=${1:-build}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$build/bin
out=$build/demo
mkdir -p "$out"
model=$root/examples/tiny-llama/forward.mlir

echo "== tailor --version"
"$bin/tailor" --version

echo
echo "== tailor-opt: verify, canonicalize and inventory $(basename "$model")"
"$bin/tailor-opt" "$model" --canonicalize --tailor-summarize-params=largest=3 \
  -o "$out/forward.mlir"

echo
echo "== round trip"
"$bin/tailor-opt" "$out/forward.mlir" -o "$out/forward.again.mlir"
if ! cmp -s "$out/forward.mlir" "$out/forward.again.mlir"; then
  echo "round trip changed the IR: diff $out/forward.mlir $out/forward.again.mlir" >&2
  exit 1
fi
ops=$(grep -c ' = tg\.' "$out/forward.mlir")
layers=$(grep -o 'tg.layer = [0-9]*' "$out/forward.mlir" | sort -u | wc -l)
echo "printed IR parses back identically: $ops tg ops over $layers layers -> $out/forward.mlir"
