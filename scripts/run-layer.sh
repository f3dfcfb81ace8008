#!/usr/bin/env bash
# The main job: compile a DeepSeek-V2-Lite decode layer and run it on the CPU.
#   mla-gen        the layer's IR (monolithic mla.attention, as engines had it)
#   mla-opt        -mla-decode-pipeline: extract, eliminate, fuse, schedule, verify
#   mla-translate  the optimized IR as a runtime artifact
#   mla-run        3 decode steps over a paged cache with 100 tokens of context,
#                  checked against the same layer compiled without optimizations
#                  and against a float64 non-absorbed reference (outputs layer
#                  by layer, and the rows each step wrote into the cache)
#   scripts/run-layer.sh [BUILD_DIR] [extra mla-gen options, e.g. --layers=27]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true
bin=$build/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bash "$root/scripts/build.sh" "$build" >/dev/null

"$bin/mla-gen" --model=deepseek-v2-lite --layers=1 --batch=8 \
  --max-blocks-per-seq=4 --max-position=1024 --layer-outputs "$@" \
  -o "$work/step.mlir"
"$bin/mla-opt" "$work/step.mlir" -mla-decode-pipeline -o "$work/step.opt.mlir"
echo "== optimized IR (mla ops) =="
sed -nE 's/^ *(%[^=]*= )?((mla|arith)\.[a-z_]+).*/  \2/p' "$work/step.opt.mlir"
"$bin/mla-translate" --mla-to-artifact "$work/step.opt.mlir" -o "$work/step.mlaa"
"$bin/mla-opt" "$work/step.mlir" \
  -mla-decode-pipeline='eliminate=false fuse-quant=false fuse-rope=false lift-q-prep=false fuse-projections=false schedule=none' |
  "$bin/mla-translate" --mla-to-artifact -o "$work/reference.mlaa"
echo "== mla-run on the CPU =="
"$bin/mla-run" "$work/step.mlaa" --reference "$work/reference.mlaa" \
  --naive --softmax-scale 0.1147214 --steps 3 --context 100
