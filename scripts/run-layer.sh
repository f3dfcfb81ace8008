#!/usr/bin/env bash
# The main job: compile one DeepSeek-V2-Lite decode layer with mla-opt.
# Today this runs the compiler half (mla-decode-pipeline: extract, eliminate,
# fuse, schedule, verify) and prints the IR; compiling to an artifact and
# running it on the CPU runtime arrive with mla-translate / mla-run.
#   scripts/run-layer.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}

bash "$root/scripts/build.sh" "$build" >/dev/null
"$build/bin/mla-opt" "$root/examples/deepseek-v2-lite-decode-layer.mlir" \
  -mla-decode-pipeline
