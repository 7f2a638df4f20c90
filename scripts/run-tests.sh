#!/usr/bin/env bash
# run-tests.sh BUILD_DIR: runs every test through ctest (lit as one entry,
# each GoogleTest case as its own) and ends with one summary line counting
# lit files and unit tests separately. Exit status: ctest's.
set -uo pipefail

build=${1:-build}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
junit=$build/test/ctest-results.xml
litxml=$build/test/lit-results.xml
rm -f "$junit" "$litxml"

ctest --test-dir "$build" -j "$(nproc)" --output-on-failure --output-junit "$(cd "$build" && pwd)/test/ctest-results.xml"
status=$?

python3 "$root/scripts/summarize-tests.py" "$junit" "$litxml" || status=1
exit $status
