#!/usr/bin/env bash
# Times the ONNX import + raise of a 32-layer Llama-2-7B-shaped model.
#
#   bench/import_7b.sh [BUILD_DIR]        (BUILD_DIR defaults to <repo>/build)
#
# (a) generates BUILD_DIR/bench/llama7b/llama7b.onnx (+ a sparse 25 GiB
#     llama7b.onnx.data, ~0 blocks on disk) with bench/gen_llama7b_onnx.py
#     if absent (about 1.5 min, 1.4 GB RAM; GEN_FLAGS adds flags, e.g.
#     GEN_FLAGS=--no-packed-mask, which needs a fresh BUILD_DIR/bench/llama7b);
# (b) runs  tailor compile MODEL --compile-to=graph --emit=mlir --batch 1
#     --seq 2048 -o OUT.mlir  under /usr/bin/time -v (or, without it, a
#     python wrapper reading getrusage(RUSAGE_CHILDREN));
# (c) prints "import+raise 7B: X.XX s, peak RSS Y MiB" and the number of
#     lines in OUT.mlir holding tg.linear, tg.attention, tg.rms_norm,
#     tg.rope, tg.embedding (grep -c). For the 7B graph one expects linear
#     225 (7 per layer + lm_head), attention 32, rms_norm 65, embedding 1,
#     rope 32 or 64 (per layer, or per q and k).
#
# Env: PYTHON (generator interpreter; default <repo>/.venv/bin/python, else
# python3), TIME_BIN (default /usr/bin/time; a missing path selects the
# python wrapper), GEN_FLAGS.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${1:-$ROOT/build}"
BUILD_DIR="$(cd "$BUILD_DIR" && pwd)"
MODEL_DIR="$BUILD_DIR/bench/llama7b"
MODEL="$MODEL_DIR/llama7b.onnx"
DATA="$MODEL_DIR/llama7b.onnx.data"
OUT="$MODEL_DIR/llama7b.graph.mlir"
TAILOR="$BUILD_DIR/bin/tailor"
TIME_BIN="${TIME_BIN:-/usr/bin/time}"

if [[ -n "${PYTHON:-}" ]]; then
  PY="$PYTHON"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then
  PY="$ROOT/.venv/bin/python"
else
  PY=python3
fi

# (a) the model
if [[ ! -f "$MODEL" || ! -f "$DATA" ]]; then
  echo "generating $MODEL"
  # shellcheck disable=SC2086
  "$PY" "$ROOT/bench/gen_llama7b_onnx.py" -o "$MODEL_DIR" ${GEN_FLAGS:-}
fi

if [[ ! -x "$TAILOR" ]]; then
  echo "error: $TAILOR not found (build tailor first)" >&2
  exit 1
fi

# (b) import + raise, timed
CMD=("$TAILOR" compile "$MODEL" --compile-to=graph --emit=mlir
     --batch 1 --seq 2048 -o "$OUT")
rm -f "$OUT"
echo "running: ${CMD[*]}"
REPORT="$(mktemp)"
trap 'rm -f "$REPORT"' EXIT
set +e
if [[ -x "$TIME_BIN" ]]; then
  start=$(date +%s.%N)
  "$TIME_BIN" -v -o "$REPORT" "${CMD[@]}"
  rc=$?
  end=$(date +%s.%N)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
  rss_kb=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$REPORT")
else
  "$PY" - "$REPORT" "${CMD[@]}" <<'EOF'
import resource, subprocess, sys, time
start = time.perf_counter()
rc = subprocess.call(sys.argv[2:])
secs = time.perf_counter() - start
rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
with open(sys.argv[1], "w") as f:
    f.write(f"{secs:.2f} {rss_kb}\n")
sys.exit(rc)
EOF
  rc=$?
  read -r secs rss_kb < "$REPORT"
fi
set -e
if [[ $rc -ne 0 ]]; then
  echo "error: tailor compile exited with status $rc" >&2
  exit "$rc"
fi

# (c) figures
rss_mib=$(awk -v k="${rss_kb:-0}" 'BEGIN { printf "%.0f", k / 1024 }')
echo "import+raise 7B: ${secs} s, peak RSS ${rss_mib} MiB"
counts=""
for op in linear attention rms_norm rope embedding; do
  n=$(grep -cE "\\btg\\.${op}\\b" "$OUT" || true)
  counts+="tg.${op} ${n}, "
done
echo "ops in $(basename "$OUT"): ${counts%, }"
