#!/usr/bin/env bash
# Assembles .gpu-bundle/ (repo root, git-ignored): everything bench/gpu/run.sh
# needs on a GPU machine that has no LLVM, no compiler build and no Debian
# dev packages. Runs on the build machine, after a CUDA-enabled build:
#
#   bench/gpu/prepare.sh [BUILD_DIR]       (default /work/main/build)
#
#   bin/    tailor-run, tailor-train, tailor-embed-train (runtime only), and
#           AttentionKernelBench (times the attention kernels; run.sh kernels)
#   lib/    libtailor_runtime.so.0 and every non-system library they load
#           (openblas, gfortran, quadmath, ...); lib/fallback/ holds this
#           machine's libstdc++ and libgcc_s, used by run.sh only if the GPU
#           machine's are too old
#   test/   the CUDA kernel tests (the binaries of ctest's gpu.* tests)
#   cuda/   the device code the kernel tests load (cubins, PTX)
#   tiny-llama/  the tiny Llama of examples/demo.sh with its weights, and
#           LoRA and QLoRA plans for cpu and h100 (+ a fp32 h100 LoRA plan,
#           fp16 LoRA plans for both and an fp16 QLoRA h100 plan)
#   tinyllama/   the TinyLlama-1.1B graph (bench/gen_llama7b_onnx.py
#           --preset tinyllama, no weights: run.sh fills them with
#           bench/gpu/fill_weights.py) and its h100 plans: bf16 LoRA and NF4
#           QLoRA, r=16 on all linear layers, batch 1 x seq 2048
#   data/   examples/data/counting.jsonl, seeded uint16 tokens for the bench
#   MANIFEST.txt  sizes, the build's commit, glibc/libstdc++ versions needed
#
# Files over 1 MiB (binaries, libraries, plans with their device code) are
# stored as FILE.xz, 3-10x smaller; run.sh unpacks them next to themselves.
#
# Slow steps are cached in CACHE (default BUILD_DIR/bench/gpu): the tiny
# export (~40 s) and the 1.1B graph (~90 s). Fails if the bundle exceeds
# MAX_MIB (default 60): a device call carries at most 64 MiB.
# Env: PYTHON (default <repo>/.venv/bin/python, else python3), CACHE, MAX_MIB.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$(cd "${1:-/work/main/build}" && pwd)"
BUNDLE="$ROOT/.gpu-bundle"
CACHE="${CACHE:-$BUILD/bench/gpu}"
MAX_MIB="${MAX_MIB:-60}"
TAILOR="$BUILD/bin/tailor"
if [[ -n "${PYTHON:-}" ]]; then
  PY="$PYTHON"
elif [[ -x "$ROOT/.venv/bin/python" ]]; then
  PY="$ROOT/.venv/bin/python"
else
  PY=python3
fi

die() { echo "prepare.sh: error: $*" >&2; exit 1; }
step() { echo; echo "== $*"; }

# --- what the build must have --------------------------------------------
step "checking $BUILD"
grep -q '^TAILOR_ENABLE_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null ||
  die "$BUILD is not a CUDA-enabled build (TAILOR_ENABLE_CUDA=ON in its CMakeCache.txt)"
for b in tailor tailor-run tailor-train tailor-embed-train; do
  [[ -x "$BUILD/bin/$b" ]] || die "$BUILD/bin/$b is missing (build it first)"
done
[[ -f "$BUILD/lib/libtailor_runtime.so" ]] || die "$BUILD/lib/libtailor_runtime.so is missing"
KERNEL_BENCH="$BUILD/test/bench/AttentionKernelBench"
[[ -x "$KERNEL_BENCH" ]] || die "$KERNEL_BENCH is missing (ninja -C $BUILD AttentionKernelBench)"
"$TAILOR" compile --help 2>&1 | grep -q -- '--hardware' ||
  die "$TAILOR has no --hardware option (stale build?)"
# The binaries behind ctest's `gpu.*` tests (test/runtime/cuda/CMakeLists.txt
# names them: Cuda<Name> where a CPU test owns <Name>).
mapfile -t tests < <(ctest --test-dir "$BUILD" -N -L gpu 2>/dev/null |
  sed -n 's/^ *Test *#[0-9]*: gpu\.//p')
[[ ${#tests[@]} -gt 0 ]] || die "ctest lists no gpu.* tests in $BUILD (configure the tests)"
for name in "${tests[@]}"; do
  [[ -x "$BUILD/test/unit/$name" ]] || die "$BUILD/test/unit/$name is missing (build the kernel tests)"
done
shopt -s nullglob
# (Not the T4's sm_75 cubins and compute_75 PTX: the GPUs this runs on are
# newer; the T4 plans carry their own, and half_mma_sm75 is its PTX alone.)
device_code=()
for f in "$BUILD"/codegen/cuda/*.cubin "$BUILD"/codegen/cuda/*.ptx; do
  case "$f" in
    *half_mma_sm75*) device_code+=("$f") ;;
    *.sm_75.cubin|*.compute_75.ptx) ;;
    *) device_code+=("$f") ;;
  esac
done
shopt -u nullglob
[[ ${#device_code[@]} -gt 0 ]] || die "no cubin or PTX in $BUILD/codegen/cuda"
echo "ok: tailor, runtime binaries, ${#tests[@]} kernel tests, ${#device_code[@]} device code files"

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"/{bin,lib/fallback,test,cuda,tiny-llama,tinyllama,data} "$CACHE"

# --- binaries, libraries, device code --------------------------------------
step "binaries and the libraries they load"
for b in tailor-run tailor-train tailor-embed-train; do
  cp "$BUILD/bin/$b" "$BUNDLE/bin/"
done
cp "$KERNEL_BENCH" "$BUNDLE/bin/"
# Under its SONAME: the binaries ask for libtailor_runtime.so.0.
cp -L "$BUILD/lib/libtailor_runtime.so" "$BUNDLE/lib/libtailor_runtime.so.0"
for t in "${tests[@]}"; do
  cp "$BUILD/test/unit/$t" "$BUNDLE/test/"
done
cp "${device_code[@]}" "$BUNDLE/cuda/"
# Symbols only: the build is Release (no debug info); this trims the rest.
strip --strip-unneeded "$BUNDLE"/bin/* "$BUNDLE"/test/* "$BUNDLE"/lib/*.so* 2>/dev/null || true

# The GPU machine has the C/C++ runtime, zlib, the driver and the CUDA toolkit
# (cuBLASLt is loaded with dlopen), and NCCL in PyTorch's nvidia-nccl wheel
# (run.sh finds it; at 208 MiB it could not be carried); everything else
# comes along.
system_re='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libz|libcuda|libnccl|libtailor_runtime)\.'
for elf in "$BUNDLE"/bin/* "$BUNDLE"/test/* "$BUNDLE"/lib/libtailor_runtime.so.0; do
  if ldd "$elf" | grep -q 'not found'; then
    ldd "$elf" | grep 'not found' >&2
    die "$elf has unresolved libraries here"
  fi
  ldd "$elf" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r soname path; do
  if [[ ! "$soname" =~ $system_re && ! -e "$BUNDLE/lib/$soname" ]]; then
    cp -L "$path" "$BUNDLE/lib/$soname"
    echo "  $soname <- $(readlink -f "$path")"
  fi
done
for lib in libstdc++.so.6 libgcc_s.so.1; do
  path="$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ { print $NF; exit }')"
  [[ -n "$path" ]] && cp -L "$path" "$BUNDLE/lib/fallback/$lib"
done

# --- the tiny Llama: model, data, plans -----------------------------------
step "tiny Llama (test/generators/export_hf.py --family llama, as examples/demo.sh)"
tiny_cache="$CACHE/tiny-llama/model.onnx"
if [[ ! -f "$tiny_cache" ]]; then
  mkdir -p "$(dirname "$tiny_cache")"
  "$PY" "$ROOT/test/generators/export_hf.py" --family llama \
    --exporter torchscript --opset 17 --external-data -o "$tiny_cache" | tail -1
else
  echo "(cached) $tiny_cache"
fi
cp "$tiny_cache" "$tiny_cache.data" "$BUNDLE/tiny-llama/"
chmod 644 "$BUNDLE/tiny-llama/model.onnx.data"
cp "$ROOT/examples/data/counting.jsonl" "$BUNDLE/data/"

# Plans sit next to their model so their parameter sources are relative
# paths (the plan writer makes paths below the plan's directory relative).
compile() { # MODEL OUT HARDWARE RECIPE [key=value...]
  local model=$1 out=$2 hw=$3 recipe=$4
  shift 4
  local start=$EPOCHREALTIME
  if ! "$TAILOR" compile "$model" --recipe "$recipe" --hardware "$hw" "$@" \
      -o "$out" > "$out.log" 2>&1; then
    cat "$out.log" >&2
    die "tailor compile for $hw failed: $(basename "$out")"
  fi
  "$TAILOR" inspect "$out" > "${out%.tplan}.inspect.txt" 2>&1 || true
  rm -f "$out.log"
  awk -v s="$start" -v e="$EPOCHREALTIME" -v o="$(basename "$out")" \
    -v b="$(stat -c %s "$out")" \
    'BEGIN { printf "  %-26s %7.2f MiB  (%.1f s)\n", o, b / 2^20, e - s }'
}
tiny_recipe="$BUNDLE/tiny-llama/lora.yaml"
cp "$ROOT/examples/tiny-llama/lora.yaml" "$tiny_recipe"
for hw in cpu h100; do
  compile "$BUNDLE/tiny-llama/model.onnx" "$BUNDLE/tiny-llama/lora-$hw.tplan" "$hw" "$tiny_recipe"
  compile "$BUNDLE/tiny-llama/model.onnx" "$BUNDLE/tiny-llama/qlora-$hw.tplan" "$hw" "$tiny_recipe" adapter=qlora
done
# Offload: the frozen weights in pinned host memory (exact match expected),
# the saved activations (exact), AdamW on the host stream (the CPU kernel:
# close to the GPU's AdamW, not bit-equal).
for v in lora qlora; do
  for kind in offload offload-activations offload-optimizer; do
    case $kind in
      offload) args=(offload_param=cpu) ;;
      offload-activations) args=(enable_activation_offloading=true) ;;
      offload-optimizer) args=(offload_optimizer=cpu) ;;
    esac
    [[ $v == qlora ]] && args+=(adapter=qlora)
    compile "$BUNDLE/tiny-llama/model.onnx" "$BUNDLE/tiny-llama/$v-h100-$kind.tplan" h100 \
      "$tiny_recipe" "${args[@]}"
  done
done
# Host AdamW during backward (plan 1.16: the host stream as CUDA host
# functions): without clipping, the offloaded plan's updates run in
# train_step a layer at a time; compared with the plain plan without
# clipping.
for v in lora qlora; do
  args=(max_grad_norm=0)
  [[ $v == qlora ]] && args+=(adapter=qlora)
  compile "$BUNDLE/tiny-llama/model.onnx" "$BUNDLE/tiny-llama/$v-h100-noclip.tplan" h100 \
    "$tiny_recipe" "${args[@]}"
  compile "$BUNDLE/tiny-llama/model.onnx" "$BUNDLE/tiny-llama/$v-h100-offload-optimizer-backward.tplan" h100 \
    "$tiny_recipe" "${args[@]}" offload_optimizer=cpu
done
# The GPU in f32: compared with the CPU plan at a tight tolerance.
compile "$BUNDLE/tiny-llama/model.onnx" "$BUNDLE/tiny-llama/lora-h100-fp32.tplan" h100 \
  "$tiny_recipe" mixed_precision=fp32
# fp16 with GradScaler's loss scaling (the T4's precision): the CPU's fp16
# emulation against the GPU's fp16 tensor cores, LoRA; QLoRA (NF4
# dequantized to fp16) against the CPU's f32 QLoRA plan. A first scale of
# 1024 that grows every 10 clean steps, so both sides see growth.
fp16_args=(fp16=true init_scale=1024 growth_interval=10)
compile "$BUNDLE/tiny-llama/model.onnx" "$BUNDLE/tiny-llama/lora-fp16-cpu.tplan" cpu \
  "$tiny_recipe" "${fp16_args[@]}"
compile "$BUNDLE/tiny-llama/model.onnx" "$BUNDLE/tiny-llama/lora-fp16-h100.tplan" h100 \
  "$tiny_recipe" "${fp16_args[@]}"
compile "$BUNDLE/tiny-llama/model.onnx" "$BUNDLE/tiny-llama/qlora-fp16-h100.tplan" h100 \
  "$tiny_recipe" "${fp16_args[@]}" adapter=qlora
# A T4 plan (sm_75 cubins and compute_75 PTX, which the driver JITs on a
# newer GPU): the T4's code paths (fp16 mma as two m16n8k8) on this GPU.
compile "$BUNDLE/tiny-llama/model.onnx" "$BUNDLE/tiny-llama/lora-fp16-t4.tplan" t4 \
  "$tiny_recipe" "${fp16_args[@]}"
# Generation (--task generate): the KV cache decode and prefill entries on
# the CPU and on the GPU, plain and with NF4 weights, and a GPU plan with no
# prefill entry (the prompt a token at a time).
compile_generate() { # OUT HARDWARE [flag or key=value...]
  local out=$1 hw=$2
  shift 2
  if ! "$TAILOR" compile "$BUNDLE/tiny-llama/model.onnx" --task generate \
      --max-seq-len 64 --hardware "$hw" "$@" -o "$out" > "$out.log" 2>&1; then
    cat "$out.log" >&2
    die "tailor compile --task generate for $hw failed: $(basename "$out")"
  fi
  rm -f "$out.log"
  echo "  $(basename "$out")"
}
for hw in cpu h100; do
  compile_generate "$BUNDLE/tiny-llama/gen-$hw.tplan" "$hw" --prefill-chunk 8
  compile_generate "$BUNDLE/tiny-llama/gen-nf4-$hw.tplan" "$hw" --prefill-chunk 8 quantization=nf4
done
compile_generate "$BUNDLE/tiny-llama/gen-h100-chunk1.tplan" h100 --prefill-chunk 1
# The T4's generation plan (fp16, compute_75 PTX JIT-compiled on the GPU).
compile_generate "$BUNDLE/tiny-llama/gen-t4.tplan" t4 --prefill-chunk 8

# --- TinyLlama-1.1B: graph, layout, plans ----------------------------------
step "TinyLlama-1.1B graph (bench/gen_llama7b_onnx.py --preset tinyllama, sparse weights)"
big_cache="$CACHE/tinyllama"
if [[ ! -f "$big_cache/tinyllama.json" || ! -f "$big_cache/tinyllama.onnx" ]]; then
  "$PY" "$ROOT/bench/gen_llama7b_onnx.py" --preset tinyllama -o "$big_cache" | tail -1
else
  echo "(cached) $big_cache/tinyllama.onnx"
fi
cp "$big_cache/tinyllama.onnx" "$big_cache/tinyllama.json" "$BUNDLE/tinyllama/"
data_bytes="$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["data_bytes"])' \
  "$BUNDLE/tinyllama/tinyllama.json")"
# A sparse stand-in while compiling (no bytes on disk); removed below, as a
# carried copy would be 4 GiB: fill_weights.py writes the real one there.
truncate -s "$data_bytes" "$BUNDLE/tinyllama/tinyllama.onnx.data"
cat > "$BUNDLE/tinyllama/lora.yaml" <<'EOF'
# TinyLlama-1.1B, LoRA r=16 on every linear layer but lm_head, bf16 on the
# GPU, batch 1 x 2048; the settings bench/gpu/hf_peft_train.py uses. The
# weights are filled in on the GPU machine: never compare embedding and
# lm_head values here (a sparse file would read as tied).
adapter: lora
lora_r: 16
lora_alpha: 32
lora_dropout: 0.0
lora_target_modules: all-linear
tie_word_embeddings: never
mixed_precision: bf16
sequence_len: 2048
micro_batch_size: 1
gradient_accumulation_steps: 1
optimizer: adamw
learning_rate: 2.0e-4
weight_decay: 0.0
lr_scheduler: constant
warmup_steps: 0
max_steps: 1000
max_grad_norm: 1.0
save_steps: 0
shuffle: false
seed: 0
EOF
compile "$BUNDLE/tinyllama/tinyllama.onnx" "$BUNDLE/tinyllama/lora-h100.tplan" h100 \
  "$BUNDLE/tinyllama/lora.yaml"
compile "$BUNDLE/tinyllama/tinyllama.onnx" "$BUNDLE/tinyllama/qlora-h100.tplan" h100 \
  "$BUNDLE/tinyllama/lora.yaml" adapter=qlora
# fp16 with loss scaling (what a T4 would run), timed beside bf16.
compile "$BUNDLE/tinyllama/tinyllama.onnx" "$BUNDLE/tinyllama/lora-fp16-h100.tplan" h100 \
  "$BUNDLE/tinyllama/lora.yaml" fp16=true
rm -f "$BUNDLE/tinyllama/tinyllama.onnx.data"

# 64 sequences of 2048 seeded random tokens (nanoGPT uint16 .bin): what both
# tailor-train (shuffle off: in file order) and hf_peft_train.py read.
"$PY" -c '
import numpy as np, sys
np.random.default_rng(1).integers(0, 32000, 64 * 2048).astype(np.uint16).tofile(sys.argv[1])
' "$BUNDLE/data/tokens-2048.bin"

# --- manifest, compression, size ------------------------------------------
step "manifest"
needs() { # the newest versioned symbol of PREFIX any ELF needs
  for f in "$BUNDLE"/bin/* "$BUNDLE"/test/* "$BUNDLE"/lib/*.so*; do
    objdump -T "$f" 2>/dev/null | grep -o "$1[0-9.]*" || true
  done | sort -uV | tail -1
}
listing() { # SIZE PATH per file, then the total
  (cd "$BUNDLE" && find . -type f ! -name MANIFEST.txt -printf '%s %P\n' | sort -k2 |
    awk '{ printf "%12d  %s\n", $1, $2; total += $1 }
         END { printf "%12d  total (%.1f MiB)\n", total, total / 2^20 }')
}
unpacked="$(listing)"
echo "plans:"
for p in "$BUNDLE"/tiny-llama/*.tplan "$BUNDLE"/tinyllama/*.tplan; do
  printf '  %8.2f MiB  %s\n' "$(awk -v b="$(stat -c %s "$p")" 'BEGIN { print b / 2^20 }')" \
    "${p#"$BUNDLE"/}"
done
echo "largest files:"
echo "$unpacked" | awk '$2 != "total"' | sort -rn | head -10 |
  awk '{ printf "  %8.2f MiB  %s\n", $1 / 2^20, $2 }'
echo "unpacked: $(echo "$unpacked" | tail -1 | sed 's/^ *[0-9]*  //')"

# Binaries, libraries and plans (device code) shrink 3-10x with xz; run.sh
# unpacks every FILE.xz next to itself (xz, or Python's lzma).
step "xz for files over 1 MiB (run.sh unpacks them)"
# The CUDA plans each embed the same device code (cubins for every SM, PTX),
# which xz alone cannot see across files: one solid archive (one xz block,
# 64 MiB dictionary) stores it once. run.sh extracts plans.tar.xz first.
(cd "$BUNDLE" && find tiny-llama tinyllama -name '*.tplan' -size +1M -print0 |
  tar --null -T - -cf - --remove-files | xz -T1 -9 > plans.tar.xz)
find "$BUNDLE" -type f -size +1M ! -name '*.onnx' ! -name '*.json' ! -name '*.xz' -print0 |
  xargs -0 -r -n1 xz -T2 -6
{
  echo "tailor GPU bundle, made $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n)"
  echo "source: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
       "$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -q . && echo '(with uncommitted changes)')"
  echo "build: $BUILD"
  echo "needs: $(needs GLIBC_) $(needs GLIBCXX_) $(needs CXXABI_) (this machine: glibc $(ldd --version | head -1 | awk '{ print $NF }'))"
  echo
  echo "unpacked:"
  echo "$unpacked"
  echo
  echo "as carried (FILE.xz unpacked by run.sh):"
  listing
} > "$BUNDLE/MANIFEST.txt"
sed -n '1,4p' "$BUNDLE/MANIFEST.txt"
total=$(du -sb "$BUNDLE" | cut -f1)
total_mib=$(awk -v b="$total" 'BEGIN { printf "%.1f", b / 2^20 }')
if (( total > MAX_MIB * 1024 * 1024 )); then
  die "the bundle is $total_mib MiB, over MAX_MIB=$MAX_MIB"
fi
echo
echo "bundle: $BUNDLE, $total_mib MiB as carried (limit $MAX_MIB MiB)"
echo "on the GPU machine: bash bench/gpu/run.sh [OUT]   (carry .gpu-bundle)"
