#!/usr/bin/env bash
# fuzz.sh FUZZ_DIR SECONDS: builds the libFuzzer targets with clang-22
# (ASan + UBSan) in FUZZ_DIR and runs each for SECONDS -- the ONNX importer
# fuzzer, the plan loader fuzzer, then the fuzzer of the files users write
# (recipes, hardware and cluster files, safetensors, tokenizer.json) --
# starting from the checked-in seed corpora. Exit status: non-zero if the
# fuzzer found a crash (the input is kept in FUZZ_DIR/crashes/).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-build-fuzz}
seconds=${2:-60}
llvm=/usr/lib/llvm-22

if [ ! -f "$dir/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$dir" \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMLIR_DIR=$llvm/lib/cmake/mlir -DLLVM_EXTERNAL_LIT=$llvm/bin/lit \
    -DTAILOR_FUZZ=ON -DTAILOR_WERROR=OFF -DTAILOR_ENABLE_CUDA=OFF >/dev/null
fi
cmake --build "$dir" --target tailor-onnx-fuzzer tailor-plan-fuzzer \
  tailor-files-fuzzer -j "$(nproc)"

# The corpus grows in the build tree; the seeds stay read-only.
mkdir -p "$dir/fuzz-corpus" "$dir/crashes"
echo "fuzz: running the ONNX importer fuzzer for ${seconds}s"
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$dir/bin/tailor-onnx-fuzzer" -max_total_time="$seconds" -max_len=65536 \
  -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
  -artifact_prefix="$dir/crashes/" \
  "$dir/fuzz-corpus" "$root/test/fuzz/corpus"

mkdir -p "$dir/plan-fuzz-corpus"
echo "fuzz: running the plan loader fuzzer for ${seconds}s"
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$dir/bin/tailor-plan-fuzzer" -max_total_time="$seconds" -max_len=65536 \
  -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
  -artifact_prefix="$dir/crashes/plan-" \
  "$dir/plan-fuzz-corpus" "$root/test/fuzz/plan-corpus"

mkdir -p "$dir/files-fuzz-corpus"
echo "fuzz: running the user files fuzzer for ${seconds}s"
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$dir/bin/tailor-files-fuzzer" -max_total_time="$seconds" -max_len=65536 \
  -rss_limit_mb=4096 -timeout=20 -print_final_stats=1 \
  -artifact_prefix="$dir/crashes/files-" \
  "$dir/files-fuzz-corpus" "$root/test/fuzz/files-corpus"
