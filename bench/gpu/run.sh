#!/usr/bin/env bash
# The GPU verification, on a machine with an NVIDIA GPU, the driver, the CUDA
# 13 toolkit (for libcublasLt) and Python with torch, transformers, peft,
# onnx -- but no tailor build. Runs from the repo root on what
# bench/gpu/prepare.sh put in .gpu-bundle/:
#
#   bash bench/gpu/run.sh [OUT] [PART...]     parts: smi tests kernels tiny
#                                             bench profile (default: smi
#                                             tests kernels tiny bench, in
#                                             order)
#
#   smi    nvidia-smi, and whether the bundled binaries load here
#   tests  every CUDA kernel test binary with TAILOR_TEST_BACKEND=cuda
#          (each launcher against the CPU kernel, on the GPU)
#   kernels  AttentionKernelBench: the attention forward and each
#          attention_grad launch timed with CUDA events (ms, TFLOP/s) on
#          KERNEL_SHAPES (tinyllama llama7b gqa-b4) with KERNEL_ARGS
#          (--sweep: every kv_splits of the GQA group, not only the rule's)
#   tiny   the tiny Llama: tailor-train on the CPU plan and on the h100 plan,
#          LoRA and QLoRA, TINY_STEPS steps each on counting.jsonl, every
#          step's loss compared (compare_runs.py, bf16 tolerance); the f32
#          h100 plan against the CPU at a tight one; fp16 with loss
#          scaling (LoRA against the CPU's fp16 plan, QLoRA against its
#          QLoRA plan), with each side's scales and skips, and a T4 plan
#          (compute_75 PTX JIT-compiled here); the offload_param plans
#          (pinned host weights, copy stream) against the plain h100 ones,
#          exactly; tailor-embed-train (the
#          C API) on both LoRA plans, 10 steps; generation (--task
#          generate, plain, NF4, and without prefill) through the C API's
#          generator, every step's logits and greedy id against the CPU's
#   profile  TAILOR_PROFILE=1 on the 1.1B plans (PROFILE_STEPS, 3): GPU
#          time per kernel and the costliest steps (CUDA events)
#   bench  TinyLlama-1.1B: fill_weights.py, then tailor-train on the bf16
#          LoRA, NF4 QLoRA and fp16 LoRA plans and hf_peft_train.py (same weights, same
#          tokens), WARMUP + STEPS steps each; tokens/s, ms/step, peak GPU
#          memory (nvidia-smi, sampled) and the plan's own memory figure
#
# Each part runs even if an earlier one failed; the last lines are a summary
# table; the exit status is 1 if anything failed. Everything printed also
# goes to OUT/run.log, and each part's logs and results to OUT/<part>/ (OUT
# defaults to $OUT if set, else ./gpu-results). Training runs write their
# adapters and checkpoints to WORK (default a fresh /tmp dir), not to OUT.
# Env: PYTHON (default python3), WARMUP (3), STEPS (10), TINY_STEPS (30),
# WORK, TEST_TIMEOUT (300 s per test binary, and for AttentionKernelBench),
# TRAIN_TIMEOUT (300 s per run), KERNEL_SHAPES, KERNEL_ARGS,
# HF_ARGS (extra hf_peft_train.py flags, e.g. "--device cpu --seq 128" for a
# dry run of this script on a machine without a GPU).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
B="$ROOT/.gpu-bundle"
OUTDIR="${1:-${OUT:-$ROOT/gpu-results}}"
shift $(( $# > 0 ? 1 : 0 ))
PARTS=("$@")
[[ ${#PARTS[@]} -gt 0 ]] || PARTS=(smi tests kernels tiny bench)
PY="${PYTHON:-python3}"
WARMUP="${WARMUP:-3}"
STEPS="${STEPS:-10}"
TINY_STEPS="${TINY_STEPS:-30}"
TEST_TIMEOUT="${TEST_TIMEOUT:-300}"
TRAIN_TIMEOUT="${TRAIN_TIMEOUT:-300}"

if [[ ! -f "$B/MANIFEST.txt" ]]; then
  echo "run.sh: error: $B/MANIFEST.txt not found: run bench/gpu/prepare.sh on the build machine and carry .gpu-bundle" >&2
  exit 1
fi
for p in "${PARTS[@]}"; do
  case "$p" in smi|tests|kernels|tiny|bench|profile) ;; *)
    echo "run.sh: error: unknown part '$p' (expected smi, tests, kernels, tiny, bench or profile)" >&2
    exit 1 ;;
  esac
done
mkdir -p "$OUTDIR" || exit 1
OUTDIR="$(cd "$OUTDIR" && pwd)"
WORK="${WORK:-$(mktemp -d /tmp/tailor-gpu.XXXXXX)}"
mkdir -p "$WORK"
exec > >(tee -a "$OUTDIR/run.log") 2>&1
TEE_PID=$!
cd "$ROOT" || exit 1

# --- unpack what prepare.sh compressed (FILE.xz -> FILE, once) ------------
unpack() {
  local f
  while IFS= read -r -d '' f; do
    [[ -e "${f%.xz}" ]] && continue
    if command -v xz > /dev/null; then
      xz -dk "$f"
    else
      "$PY" -c 'import lzma, os, shutil, sys
src = sys.argv[1]
with lzma.open(src) as i, open(src[:-3], "wb") as o:
    shutil.copyfileobj(i, o, 1 << 20)
os.chmod(src[:-3], os.stat(src).st_mode & 0o777)' "$f"
    fi || { echo "run.sh: error: cannot unpack $f" >&2; return 1; }
  done < <(find "$B" -name '*.xz' ! -name '*.tar.xz' -print0)
}
# plans.tar.xz: the CUDA plans in one solid archive (they share device code)
if [[ -f "$B/plans.tar.xz" && ! -e "$B/tinyllama/lora-h100.tplan" ]]; then
  "$PY" -c 'import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    t.extractall(sys.argv[2])' "$B/plans.tar.xz" "$B" ||
    { echo "run.sh: error: cannot unpack $B/plans.tar.xz" >&2; exit 1; }
fi
unpack || exit 1

# --- the environment the bundled binaries need ----------------------------
# Only tailor's binaries get the bundled libraries (Python keeps its own);
# cuBLASLt (dlopen'd by name, libcublasLt.so.13) and NCCL (libnccl.so.2,
# linked by tailor-train; not carried) come from the toolkit, the system,
# or the nvidia-* wheels PyTorch installed: lib_dirs LIBRARY lists where.
lib_dirs() {
  local d
  for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/local/cuda-13*/lib64 /usr/lib/x86_64-linux-gnu; do
    [[ -e "$d/$1" ]] && echo "$d"
  done
  "$PY" - "$1" 2>/dev/null <<'EOF'
import glob, os, site, sys
for s in site.getsitepackages():
    for p in glob.glob(os.path.join(s, "nvidia", "**", sys.argv[1]), recursive=True):
        print(os.path.dirname(p))
EOF
}
CUBLAS_DIR="$(lib_dirs libcublasLt.so.13 | head -1)"
NCCL_DIR="$(lib_dirs libnccl.so.2 | head -1)"
TL_LIBS="$B/lib${CUBLAS_DIR:+:$CUBLAS_DIR}${NCCL_DIR:+:$NCCL_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TAILOR_CUDA_MODULE_DIR="$B/cuda"
tl() { LD_LIBRARY_PATH="$TL_LIBS" "$@"; }

# --- bookkeeping ----------------------------------------------------------
FAILED=0
SUMMARY=()
BENCH=()
record() { # PART STATUS DETAIL
  local line
  line="$(printf '%-34s %-5s %s' "$1" "$2" "$3")"
  SUMMARY+=("$line")
  echo "$line" >> "$OUTDIR/summary.txt"
  [[ "$2" == FAIL ]] && FAILED=$((FAILED + 1))
  return 0
}
banner() { echo; echo "=================== $* ($(date -u +%H:%M:%S))"; }
echo "# run.sh ${PARTS[*]}, $(date -u '+%Y-%m-%d %H:%M:%S UTC')" >> "$OUTDIR/summary.txt"
echo "tailor GPU run: $(sed -n 1,3p "$B/MANIFEST.txt" | tr '\n' ' ')"
echo "out: $OUTDIR, work: $WORK, parts: ${PARTS[*]}"
echo "cuBLASLt: ${CUBLAS_DIR:-not found (GEMMs will fail)}"
echo "NCCL: ${NCCL_DIR:-not found (tailor-train will not load)}"

# tailor-train RUN_NAME PLAN DATA MAX_STEPS LOGDIR: the run's directory in
# WORK, its log and metrics.jsonl copied to LOGDIR.
train() {
  local name=$1 plan=$2 data=$3 steps=$4 logdir=$5
  local dir="$WORK/$name" rc
  rm -rf "$dir"
  mkdir -p "$logdir"
  echo "+ tailor-train $(basename "$plan") --data $(basename "$data") --max-steps $steps"
  timeout "$TRAIN_TIMEOUT" env LD_LIBRARY_PATH="$TL_LIBS" "$B/bin/tailor-train" "$plan" \
    --data "$data" --max-steps "$steps" --save-steps 0 --output-dir "$dir" \
    > "$logdir/$name.log" 2>&1
  rc=$?
  cp "$dir/metrics.jsonl" "$logdir/$name.metrics.jsonl" 2>/dev/null
  awk 'NR <= 3 { print; next } { last = $0 } END { if (NR > 3) print last }' \
    "$logdir/$name.log" | cut -c1-200
  [[ $rc -eq 124 ]] && echo "  (timed out after $TRAIN_TIMEOUT s)"
  return $rc
}

# --- (a) nvidia-smi, and do the binaries load? ----------------------------
part_smi() {
  banner "smi: nvidia-smi and the bundle"
  mkdir -p "$OUTDIR/smi"
  if nvidia-smi 2>&1 | tee "$OUTDIR/smi/nvidia-smi.txt"; then
    record "nvidia-smi" PASS "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  else
    record "nvidia-smi" FAIL "nvidia-smi failed"
  fi
  local missing
  missing="$(for f in "$B"/bin/* "$B"/test/*; do [[ $f == *.xz ]] || tl ldd "$f" | sed -n "s|^\s*\(.*not found\)|$(basename "$f"): \1|p"; done)"
  if [[ -n "$missing" ]]; then
    echo "$missing"
    record "bundle libraries" FAIL "$(echo "$missing" | head -1)"
  elif ! tl "$B/bin/tailor-train" --help > "$OUTDIR/smi/preflight.txt" 2>&1; then
    cat "$OUTDIR/smi/preflight.txt"
    record "bundle libraries" FAIL "$(grep -m1 -o "version .* not found" "$OUTDIR/smi/preflight.txt")"
  else
    record "bundle libraries" PASS "tailor-train --help runs"
  fi
}

# The bundle's libstdc++ fallback when the system's is too old (GLIBCXX_*).
if ! tl "$B/bin/tailor-train" --help > /dev/null 2>&1 && [[ -d "$B/lib/fallback" ]]; then
  TL_LIBS="$B/lib:$B/lib/fallback${CUBLAS_DIR:+:$CUBLAS_DIR}${NCCL_DIR:+:$NCCL_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "note: the system's C++ runtime is too old for the bundle; using .gpu-bundle/lib/fallback"
fi

# --- (b) the kernel tests on the GPU ----------------------------------------
part_tests() {
  banner "tests: CUDA kernel tests with TAILOR_TEST_BACKEND=cuda"
  mkdir -p "$OUTDIR/tests"
  local t name log rc ran passed failed skipped
  for t in "$B"/test/*; do
    [[ $t == *.xz ]] && continue
    name="$(basename "$t")"
    log="$OUTDIR/tests/$name.log"
    TAILOR_TEST_BACKEND=cuda timeout "$TEST_TIMEOUT" env LD_LIBRARY_PATH="$TL_LIBS" \
      "$t" --gtest_color=no > "$log" 2>&1
    rc=$?
    ran="$(sed -n 's/^\[==========\] \([0-9]*\) tests\? from .* ran.*/\1/p' "$log" | tail -1)"
    passed="$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\?.*/\1/p' "$log" | tail -1)"
    failed="$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\?, listed below.*/\1/p' "$log" | tail -1)"
    skipped="$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\?, listed below.*/\1/p' "$log" | tail -1)"
    echo "$name: rc $rc, ${ran:-?} ran, ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
    grep -E '^\[  FAILED  \] [A-Za-z]' "$log" | sort -u | head -20
    if grep -q -m1 -E 'no GPU for the cuda backend|has no device code|cannot load the device code' "$log"; then
      grep -m1 -o -E '(no GPU for the cuda backend|has no device code|cannot load the device code).*' "$log"
      record "test $name" FAIL "skipped: the cuda backend did not start (see tests/$name.log)"
    elif [[ $rc -eq 0 && -n "$passed" ]]; then
      record "test $name" PASS "$passed passed${skipped:+, $skipped skipped}"
    else
      record "test $name" FAIL "rc $rc, ${failed:-?} failed of ${ran:-?}$([[ $rc -eq 124 ]] && echo ', timed out')"
    fi
  done
}

# --- (b2) the attention kernels alone ----------------------------------------
# AttentionKernelBench: per launch ms and TFLOP/s; one summary line per
# KERNELBENCH line (shape and kv_splits).
part_kernels() {
  banner "kernels: AttentionKernelBench (CUDA events per launch)"
  local d="$OUTDIR/kernels" log rc line name splits
  mkdir -p "$d"
  log="$d/attention.log"
  # shellcheck disable=SC2086  # KERNEL_ARGS and KERNEL_SHAPES are lists
  timeout "$TEST_TIMEOUT" env LD_LIBRARY_PATH="$TL_LIBS" "$B/bin/AttentionKernelBench" \
    ${KERNEL_ARGS---sweep} ${KERNEL_SHAPES:-tinyllama llama7b gqa-b4} > "$log" 2>&1
  rc=$?
  cat "$log"
  while IFS= read -r line; do
    name="$(val "$line" name)"
    splits="$(val "$line" splits)"
    record "kernels $name splits=$splits" PASS \
      "bwd $(val "$line" bwd_ms) ms (stats $(val "$line" stats_ms), kv $(val "$line" kv_ms), sum $(val "$line" kv_sum_ms), q $(val "$line" q_ms)), fwd $(val "$line" fwd_ms) ms"
  done < <(grep '^KERNELBENCH' "$log")
  if [[ $rc -ne 0 ]]; then
    record "kernels AttentionKernelBench" FAIL "rc $rc$([[ $rc -eq 124 ]] && echo ', timed out'): $(grep -m1 'AttentionKernelBench:' "$log" | cut -c1-140)"
  elif ! grep -q '^KERNELBENCH' "$log"; then
    record "kernels AttentionKernelBench" FAIL "no KERNELBENCH line (kernels/attention.log)"
  fi
}

# --- (c) the tiny Llama: CPU plan vs GPU plan ------------------------------
part_tiny() {
  banner "tiny: tiny Llama LoRA/QLoRA, CPU plan vs h100 plan, $TINY_STEPS steps"
  local d="$OUTDIR/tiny" data="$B/data/counting.jsonl" v hw ok
  mkdir -p "$d"
  # fp16 (loss scaling): LoRA against the CPU's fp16 plan; QLoRA against
  # the CPU's QLoRA plan (the CPU has no fp16 NF4 yet), both at bf16's
  # tolerance.
  # The T4 plan (compute_75 PTX, JIT-compiled here) against the CPU's fp16.
  for v in lora qlora lora-fp32 lora-fp16 qlora-fp16 lora-fp16-t4; do
    local cpu_name="${v%-fp32}" gpu_plan="$B/tiny-llama/$v-h100.tplan"
    [[ $v == qlora-fp16 ]] && cpu_name=qlora
    [[ $v == lora-fp16-t4 ]] && { cpu_name=lora-fp16; gpu_plan="$B/tiny-llama/lora-fp16-t4.tplan"; }
    local cpu_plan="$B/tiny-llama/$cpu_name-cpu.tplan"
    [[ $v == lora-fp32 ]] && gpu_plan="$B/tiny-llama/lora-h100-fp32.tplan"
    local rtol=2e-2
    [[ $v == lora-fp32 ]] && rtol=2e-3
    ok=1
    if [[ $v == lora || $v == qlora || $v == lora-fp16 ]]; then
      train "tiny-$cpu_name-cpu" "$cpu_plan" "$data" "$TINY_STEPS" "$d" ||
        { ok=0; record "tiny $v cpu" FAIL "tailor-train on the CPU plan failed (tiny/tiny-$cpu_name-cpu.log)"; }
    fi
    train "tiny-$v-h100" "$gpu_plan" "$data" "$TINY_STEPS" "$d" ||
      { ok=0; record "tiny $v h100" FAIL "tailor-train on the h100 plan failed (tiny/tiny-$v-h100.log)"; }
    [[ $ok == 1 ]] || continue
    if "$PY" "$ROOT/bench/gpu/compare_runs.py" "$d/tiny-$cpu_name-cpu.metrics.jsonl" \
        "$d/tiny-$v-h100.metrics.jsonl" --rtol "$rtol" 2>&1 | tee "$d/$v.compare.txt"; then
      record "tiny $v cpu=h100" PASS "$(grep -m1 '^worst' "$d/$v.compare.txt")"
    else
      record "tiny $v cpu=h100" FAIL "$(grep -m1 -E '^worst|^MISMATCH|error' "$d/$v.compare.txt")"
    fi
  done
  # Offload: the frozen weights (offload_param: cpu) and the saved
  # activations (enable_activation_offloading) in pinned host memory,
  # copied on the copy stream; the same kernels in the same order, so every
  # step's loss equals the plain h100 plan's exactly. AdamW on the host
  # (offload_optimizer: cpu) runs the CPU kernel on the host stream: its
  # rounding differs from the GPU's AdamW, so within 1e-5.
  local kind tol
  for v in lora qlora; do
    for kind in offload offload-activations offload-optimizer; do
      tol=0
      [[ $kind == offload-optimizer ]] && tol=1e-5
      train "tiny-$v-$kind-h100" "$B/tiny-llama/$v-h100-$kind.tplan" "$data" \
        "$TINY_STEPS" "$d" ||
        { record "tiny $v $kind" FAIL "tailor-train failed (tiny/tiny-$v-$kind-h100.log)"; continue; }
      grep -m1 '^memory' "$d/tiny-$v-$kind-h100.log"
      if "$PY" "$ROOT/bench/gpu/compare_runs.py" "$d/tiny-$v-h100.metrics.jsonl" \
          "$d/tiny-$v-$kind-h100.metrics.jsonl" --rtol "$tol" 2>&1 | tee "$d/$v-$kind.compare.txt"; then
        record "tiny $v $kind=plain" PASS "$(grep -m1 -o 'host [0-9]* B' "$d/tiny-$v-$kind-h100.log") on the host, $(grep -m1 '^worst' "$d/$v-$kind.compare.txt" || echo 'losses identical')"
      else
        record "tiny $v $kind=plain" FAIL "$(grep -m1 -E '^worst|^MISMATCH|error' "$d/$v-$kind.compare.txt")"
      fi
    done
  done
  # Host AdamW during backward (plan 1.16): no clipping, so the offloaded
  # plan's host updates are CUDA host functions on the host stream inside
  # train_step, beside backward; within 1e-5 of the plain plan without
  # clipping (the CPU kernel's rounding), and its inspect shows where they
  # run.
  for v in lora qlora; do
    train "tiny-$v-noclip-h100" "$B/tiny-llama/$v-h100-noclip.tplan" "$data" \
      "$TINY_STEPS" "$d" ||
      { record "tiny $v noclip" FAIL "tailor-train failed (tiny/tiny-$v-noclip-h100.log)"; continue; }
    train "tiny-$v-offload-optimizer-backward-h100" \
      "$B/tiny-llama/$v-h100-offload-optimizer-backward.tplan" "$data" \
      "$TINY_STEPS" "$d" ||
      { record "tiny $v host AdamW in backward" FAIL "tailor-train failed (tiny/tiny-$v-offload-optimizer-backward-h100.log)"; continue; }
    if "$PY" "$ROOT/bench/gpu/compare_runs.py" "$d/tiny-$v-noclip-h100.metrics.jsonl" \
        "$d/tiny-$v-offload-optimizer-backward-h100.metrics.jsonl" --rtol 1e-5 2>&1 |
        tee "$d/$v-offload-optimizer-backward.compare.txt"; then
      record "tiny $v host AdamW in backward=plain" PASS "$(grep -m1 'host launches' "$B/tiny-llama/$v-h100-offload-optimizer-backward.inspect.txt" 2>/dev/null), $(grep -m1 '^worst' "$d/$v-offload-optimizer-backward.compare.txt" || echo 'losses identical')"
    else
      record "tiny $v host AdamW in backward=plain" FAIL "$(grep -m1 -E '^worst|^MISMATCH|error' "$d/$v-offload-optimizer-backward.compare.txt")"
    fi
  done
  # Generation through the C API's generator (the Python binding): the
  # CPU's greedy ids fed to both plans, every step's logits compared
  # (test/tools/Inputs/generate_gpu_vs_cpu.py), and a reset rerun.
  local g
  # gen-t4: the T4's fp16 plan, its compute_75 PTX JIT-compiled here.
  for g in gen:gen gen-nf4:gen-nf4 gen:gen-h100-chunk1 gen:gen-t4; do
    local cpu_gen="$B/tiny-llama/${g%%:*}-cpu.tplan" gpu_gen="$B/tiny-llama/${g#*:}.tplan"
    [[ ${g#*:} != *chunk1 && ${g#*:} != *t4 ]] && gpu_gen="$B/tiny-llama/${g#*:}-h100.tplan"
    echo "+ generate_gpu_vs_cpu.py $(basename "$cpu_gen") $(basename "$gpu_gen")"
    if timeout "$TRAIN_TIMEOUT" env LD_LIBRARY_PATH="$TL_LIBS" PYTHONPATH="$ROOT/python" \
        TAILOR_RUNTIME_LIBRARY="$B/lib/libtailor_runtime.so.0" \
        "$PY" "$ROOT/test/tools/Inputs/generate_gpu_vs_cpu.py" "$cpu_gen" "$gpu_gen" \
        > "$d/generate-${g#*:}.log" 2>&1; then
      record "tiny generate ${g#*:} cpu=h100" PASS "$(grep -m1 '^logits' "$d/generate-${g#*:}.log")"
    else
      record "tiny generate ${g#*:} cpu=h100" FAIL "$(tail -1 "$d/generate-${g#*:}.log" | cut -c1-160)"
    fi
    cat "$d/generate-${g#*:}.log"
  done
  # The C API from a C program (examples/embed/train.c): same plans, 10 steps.
  local hw rc=0
  for hw in cpu h100; do
    echo "+ tailor-embed-train lora-$hw.tplan 10"
    timeout "$TRAIN_TIMEOUT" env LD_LIBRARY_PATH="$TL_LIBS" "$B/bin/tailor-embed-train" \
      "$B/tiny-llama/lora-$hw.tplan" 10 > "$d/embed-$hw.log" 2>&1 || rc=1
    awk '/^step / { printf "{\"step\":%s,\"loss\":%s}\n", $2, $4 }' "$d/embed-$hw.log" \
      > "$d/embed-$hw.metrics.jsonl"
    tail -1 "$d/embed-$hw.log"
  done
  if [[ $rc -ne 0 ]]; then
    record "tiny embed cpu=h100" FAIL "tailor-embed-train failed (tiny/embed-*.log)"
  elif "$PY" "$ROOT/bench/gpu/compare_runs.py" "$d/embed-cpu.metrics.jsonl" \
      "$d/embed-h100.metrics.jsonl" 2>&1 | tee "$d/embed.compare.txt"; then
    record "tiny embed cpu=h100" PASS "$(grep -m1 '^worst' "$d/embed.compare.txt")"
  else
    record "tiny embed cpu=h100" FAIL "$(grep -m1 -E '^worst|^MISMATCH|error' "$d/embed.compare.txt")"
  fi
}

# --- (d) TinyLlama-1.1B: tailor vs PyTorch + PEFT ---------------------------
SAMPLER=
start_sampler() {
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$1" 2>/dev/null &
  SAMPLER=$!
}
stop_sampler() {
  [[ -n "$SAMPLER" ]] && { kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null; }
  SAMPLER=
}
peak_mib() { sort -n "$1" 2>/dev/null | tail -1; }

# The seeded TinyLlama-1.1B weights into its data file, once: a warm machine
# keeps the filled file between calls (a new carry of the bundle replaces
# it, stamp included). LOGDIR gets fill_weights.log.
fill_weights() {
  local d=$1 json="$B/tinyllama/tinyllama.json"
  local stamp="$B/tinyllama/tinyllama.onnx.data.filled"
  if [[ -f "$stamp" && -f "${stamp%.filled}" ]]; then
    echo "weights: filled by an earlier run ($(cat "$stamp"))"
    return 0
  fi
  echo "+ fill_weights.py (the seeded TinyLlama-1.1B into tinyllama.onnx.data)"
  if ! "$PY" "$ROOT/bench/gpu/fill_weights.py" "$json" 2>&1 | tee "$d/fill_weights.log"; then
    record "fill_weights" FAIL "see $(basename "$d")/fill_weights.log"
    return 1
  fi
  date -u '+%H:%M:%S UTC' > "$stamp"
  record "fill_weights" PASS "$(grep -m1 -o '[0-9.]* GiB' "$d/fill_weights.log") written"
}

# --- (e) where the GPU time goes ---------------------------------------------
# TAILOR_PROFILE=1 (CUDA events around every step) on the 1.1B plans,
# PROFILE_STEPS steps: GPU time per kernel family and the costliest steps.
part_profile() {
  banner "profile: TinyLlama-1.1B plans, GPU time per kernel (TAILOR_PROFILE=1)"
  local d="$OUTDIR/profile" v
  mkdir -p "$d"
  fill_weights "$d" || return
  for v in lora qlora; do
    TAILOR_PROFILE=1 train "profile-$v" "$B/tinyllama/$v-h100.tplan" \
      "$B/data/tokens-2048.bin" "${PROFILE_STEPS:-3}" "$d"
    local rc=$?
    sed -n '/^tailor profile/,$p' "$d/profile-$v.log" | head -60
    if [[ $rc -ne 0 ]] || ! grep -q '^tailor profile' "$d/profile-$v.log"; then
      record "profile $v" FAIL "rc $rc, see profile/profile-$v.log"
    else
      record "profile $v" PASS "$(grep -m1 -o '[0-9.]* s in kernels' "$d/profile-$v.log") over ${PROFILE_STEPS:-3} steps"
    fi
  done
}

part_bench() {
  banner "bench: TinyLlama-1.1B, batch 1 x 2048, $WARMUP warmup + $STEPS timed steps"
  local d="$OUTDIR/bench" json="$B/tinyllama/tinyllama.json" tokens="$B/data/tokens-2048.bin"
  local n=$((WARMUP + STEPS)) base v plan_mem peak stats
  mkdir -p "$d"
  fill_weights "$d" || return
  base="$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)"
  echo "GPU memory in use before the runs: ${base:-?} MiB"
  for v in lora qlora lora-fp16; do
    local plan="$B/tinyllama/$v-h100.tplan"
    [[ -f "$plan" ]] || { record "bench tailor $v" FAIL "no $plan in the bundle"; continue; }
    plan_mem="$(tl "$B/bin/tailor-run" "$plan" --list 2>&1 | grep -m1 '^memory:' | sed 's/^memory: *//')"
    echo "plan memory ($v, tailor-run --list): ${plan_mem:-?}"
    sed -n '/^memory:/,/^  total/p' "$B/tinyllama/$v-h100.inspect.txt" 2>/dev/null | sed 's/^/  tailor inspect: /'
    start_sampler "$d/$v.gpu-mem.txt"
    train "tinyllama-$v" "$plan" "$tokens" "$n" "$d"
    local rc=$?
    stop_sampler
    peak="$(peak_mib "$d/$v.gpu-mem.txt")"
    if [[ $rc -ne 0 ]]; then
      record "bench tailor $v" FAIL "tailor-train failed (bench/tinyllama-$v.log): $(tail -1 "$d/tinyllama-$v.log" | cut -c1-120)"
      continue
    fi
    stats="$("$PY" "$ROOT/bench/gpu/step_stats.py" "$d/tinyllama-$v.metrics.jsonl" \
      --warmup "$WARMUP" --name "tailor-$v" --json "$d/tailor-$v.json")"
    echo "$stats"
    record "bench tailor $v" PASS "$(echo "$stats" | grep -o 'tokens_per_s=[0-9.]*')"
    BENCH+=("tailor $v|$(val "$stats" tokens_per_s)|$(val "$stats" ms_per_step)|${peak:-?}|${plan_mem%% (*}|$(val "$stats" loss_step1)")
  done
  echo "+ hf_peft_train.py (PyTorch + PEFT, bf16, sdpa)"
  start_sampler "$d/hf.gpu-mem.txt"
  # shellcheck disable=SC2086  # HF_ARGS is a list of flags
  timeout "$TRAIN_TIMEOUT" "$PY" "$ROOT/bench/gpu/hf_peft_train.py" --weights "$json" \
    --data "$tokens" --warmup "$WARMUP" --steps "$STEPS" --json "$d/hf.json" ${HF_ARGS:-} \
    > "$d/hf.log" 2>&1
  local rc=$?
  stop_sampler
  peak="$(peak_mib "$d/hf.gpu-mem.txt")"
  grep -E '^(HF_PEFT_RESULT|device:)|[Ee]rror' "$d/hf.log" | tail -5
  if [[ $rc -ne 0 ]]; then
    record "bench hf+peft" FAIL "rc $rc (bench/hf.log)"
    return
  fi
  stats="$(grep -m1 '^HF_PEFT_RESULT' "$d/hf.log")"
  record "bench hf+peft" PASS "$(echo "$stats" | grep -o 'tokens_per_s=[0-9.]*')"
  BENCH+=("pytorch+peft lora|$(val "$stats" tokens_per_s)|$(val "$stats" ms_per_step)|${peak:-?}|alloc $(val "$stats" max_allocated_mib) MiB, reserved $(val "$stats" max_reserved_mib) MiB|$(val "$stats" loss_step1)")
  # Same weights, same first batch, LoRA B = 0: the step-1 losses agree.
  if [[ -f "$d/tailor-lora.json" ]]; then
    if "$PY" - "$d/tailor-lora.json" "$d/hf.json" <<'EOF' | tee "$d/loss_step1.txt"; then
import json, sys
t, h = (json.load(open(p))["loss_step1"] for p in sys.argv[1:])
rel = abs(t - h) / abs(h)
print(f"step-1 loss: tailor {t:.5f}, PyTorch {h:.5f}, relative difference {rel:.2e}"
      f" -> {'ok' if rel <= 2e-2 else 'MISMATCH'}")
sys.exit(0 if rel <= 2e-2 else 1)
EOF
      record "bench step-1 loss" PASS "$(cut -d, -f1-2 "$d/loss_step1.txt")"
    else
      record "bench step-1 loss" FAIL "$(cat "$d/loss_step1.txt")"
    fi
  fi
}
val() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }

for p in "${PARTS[@]}"; do
  "part_$p"
done
stop_sampler

# --- (f) summary ------------------------------------------------------------
banner "summary"
printf '%s\n' "${SUMMARY[@]}"
if [[ ${#BENCH[@]} -gt 0 ]]; then
  echo
  {
    echo "run|tokens/s|ms/step|peak GPU MiB (nvidia-smi)|memory (plan / torch)|step-1 loss"
    printf '%s\n' "${BENCH[@]}"
  } | awk -F'|' '{ printf "%-18s %10s %9s %26s  %-44s %s\n", $1, $2, $3, $4, $5, $6 }' |
    tee "$OUTDIR/bench-table.txt"
fi
echo
echo "$FAILED failed; results in $OUTDIR"
# Let tee write the last lines before the exit status goes back.
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null
[[ $FAILED -eq 0 ]]
