#!/usr/bin/env bash
# Installs the runtime from BUILD into a temporary prefix, then builds the
# consumer of test/runtime/install against it twice -- with
# find_package(tailor) and with pkg-config -- and runs both.
# Usage: CheckInstall.sh BUILD_DIR SOURCE_DIR VERSION
set -euo pipefail
build=$1 source=$2 version=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
header=$prefix/include/tailor/runtime.h
[[ -f $header ]] || { echo "no $header"; exit 1; }
library=$(find "$prefix" -name "libtailor_runtime.so.${version%%.*}" | head -1)
[[ -n $library ]] || { echo "no versioned libtailor_runtime in $prefix"; exit 1; }
soname=$(objdump -p "$library" | awk '$1 == "SONAME" { print $2 }')
[[ $soname == "libtailor_runtime.so.${version%%.*}" ]] ||
  { echo "SONAME is '$soname'"; exit 1; }
libdir=$(dirname "$library")

# find_package(tailor) -> tailor::runtime
cmake -S "$source/test/runtime/install" -B "$work/cmake-build" \
  -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log"
cmake --build "$work/cmake-build" > "$work/build.log"
"$work/cmake-build/consumer" "$version"

# pkg-config tailor
export PKG_CONFIG_PATH=$libdir/pkgconfig
[[ $(pkg-config --modversion tailor) == "$version" ]] ||
  { echo "pkg-config says $(pkg-config --modversion tailor)"; exit 1; }
cc -std=c99 -o "$work/consumer-pc" "$source/test/runtime/install/consumer.c" \
  $(pkg-config --cflags --libs tailor)
LD_LIBRARY_PATH=$libdir "$work/consumer-pc" "$version"
echo "installed: $(cd "$prefix" && find . -type f | sort | tr '\n' ' ')"
