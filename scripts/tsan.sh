#!/usr/bin/env bash
# Builds the runtime on its own (no MLIR, no CUDA) with ThreadSanitizer and
# runs its unit tests, the concurrency tests among them (docs/runtime.md,
# "Thread safety"). Exits non-zero on a test failure or a reported race.
#   scripts/tsan.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-tsan}
cmake -S "$root/runtime" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DMLART_ENABLE_TSAN=ON -DMLART_ENABLE_CUDA=OFF -DMLART_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build "$build" --target mlart-unittests
# halt_on_error: the first race fails the run instead of scrolling past.
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1} \
  "$build/test/mlart-unittests" --gtest_brief=1
