#!/usr/bin/env bash
# Prepares a folder to carry to the GPU machine for the Python package's
# CUDA checks (runtime/scripts/gpu/gpu-python.sh): pybind11 and the DLPack
# header from this machine's Debian packages (the GPU machine has neither,
# and builds mla.runtime for its own python3 there), pytest for a python3
# that lacks it, mla-run and mla-bench, and the artifacts compiled here (the
# GPU machine has no MLIR).
#   scripts/gpu-prepare-python.sh BUILD_DIR OUT_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
out=$2
mkdir -p "$out/include/dlpack" "$out/pysite"
cp -rL /usr/lib/python3/dist-packages/pybind11 "$out/"
cp /usr/include/dlpack/dlpack.h "$out/include/dlpack/"
for p in pytest _pytest pluggy iniconfig attr attrs packaging; do
  cp -rL "/usr/lib/python3/dist-packages/$p" "$out/pysite/"
done
find "$out" -name __pycache__ -prune -exec rm -rf {} +
for tool in "$build/bin/mla-run" "$build/runtime/bench/mla-bench"; do
  strip --strip-debug -o "$out/$(basename "$tool")" "$tool"
done
cp "$root/runtime/scripts/gpu/gpu-python.sh" "$out/"
bin=$build/bin
compile() { # compile OUT.mlaa [mla-gen options]
  local name=$1; shift
  "$bin/mla-gen" --model=deepseek-v2-lite --layers=1 "$@" |
    "$bin/mla-opt" -mla-decode-pipeline="target=cuda-sm90 kernels=codegen" |
    "$bin/mla-translate" --mla-to-artifact -o "$out/$name"
}
# test/python/test_cuda.py's step, and the timed one (B=64, L~4096).
compile l1.cg.mlaa --batch=8 --max-blocks-per-seq=4 --max-position=1024
compile b64.cg.mlaa --batch=64 --max-blocks-per-seq=65 --max-position=8192
du -sh "$out"
