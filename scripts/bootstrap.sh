#!/usr/bin/env bash
# bootstrap.sh: installs everything tailor needs on a fresh Debian 12 machine.
#
# Idempotent: it installs only what is missing, runs `apt-get update` at most
# once, and leaves an existing virtual environment alone unless the pinned
# requirements changed. Called by the Makefile before every build, so it must
# be fast when there is nothing to do.
#
#   scripts/bootstrap.sh            system packages + Python environment
#   scripts/bootstrap.sh --system   system packages only
#   scripts/bootstrap.sh --python   Python environment only
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${TAILOR_VENV:-$root/.venv}
requirements=$root/scripts/requirements.txt

do_system=1
do_python=1
case "${1:-}" in
  --system) do_python=0 ;;
  --python) do_system=0 ;;
  "") ;;
  *) echo "bootstrap: unknown option '$1' (expected --system or --python)" >&2; exit 1 ;;
esac

log() { printf 'bootstrap: %s\n' "$*" >&2; }

# Debian packages the build, the tests and the benchmarks use.
system_packages=(
  # compilers and build tools
  g++ cmake ninja-build ccache make pkg-config
  # LLVM / MLIR 22 (shared libraries, tblgen, FileCheck, lit)
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  # ONNX protos, parser, checker and shape inference
  libonnx-dev libprotobuf-dev protobuf-compiler
  # the plan format
  flatbuffers-compiler libflatbuffers-dev
  # JSON in the runtime (checkpoints, metrics, safetensors headers)
  nlohmann-json3-dev
  # zlib: GPU plans store their device code compressed
  zlib1g-dev
  # tokenizers for tailor generate: SentencePiece tokenizer.model, and ICU
  # for tokenizer.json's regexes and NFC
  libsentencepiece-dev libicu-dev
  # CPU collectives (MPI under mpirun, Gloo under torchrun), BLAS
  openmpi-bin libopenmpi-dev libgloo-dev libopenblas-dev
  # unit tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # libFuzzer targets (`make fuzz`): clang and its sanitizer runtimes
  clang-22 libclang-rt-22-dev
  # the reference Python stack lives in a venv
  python3 python3-venv
)

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

install_system() {
  local missing=()
  local pkg
  for pkg in "${system_packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Picks the Python interpreter for the venv: python3 on PATH if its venv module
# works (pyenv builds include it), Debian's otherwise.
pick_python() {
  local candidate
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import venv, ensurepip' >/dev/null 2>&1; then
      command -v "$candidate"
      return 0
    fi
  done
  log "no python3 with a working venv module (install python3-venv)"
  return 1
}

install_python() {
  local stamp=$venv/.requirements.sha256
  local want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  local python
  python=$(pick_python)
  if [ ! -x "$venv/bin/python" ]; then
    log "creating virtual environment $venv with $python"
    "$python" -m venv "$venv"
  fi
  log "installing the pinned reference stack into $venv (first time: large download)"
  # Everything comes from PyPI. torch's wheel pulls its CUDA libraries (a few
  # GB): pip's download cache is kept (no --no-cache-dir) so reinstalls are cheap.
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$requirements"
  echo "$want" > "$stamp"
}

if [ $do_system -eq 1 ]; then
  install_system
fi
if [ $do_python -eq 1 ]; then
  install_python
fi
