#!/usr/bin/env bash
# Builds MLA and runs every test: the lit suite and the unit tests (CTest).
#   scripts/test.sh [BUILD_DIR] [extra CMake arguments...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true

bash "$root/scripts/build.sh" "$build" "$@"
ctest --test-dir "$build" --output-on-failure -j2
