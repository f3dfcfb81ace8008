#!/usr/bin/env bash
# Prepares a folder to carry to the GPU machine (the device tool): the CUDA
# test and bench binaries, mla-run, the codegen fixture, the run scripts and
# DeepSeek-V2-Lite decode- and prefill-step artifacts compiled here (the GPU machine has
# no MLIR).
#   scripts/gpu-prepare.sh BUILD_DIR OUT_DIR
# Then on the GPU machine: OUT_DIR/gpu-all.sh (see that script).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
bin=$build/bin
cp "$build/runtime/test/mlart-cuda-tests" "$build/runtime/bench/mla-bench" \
   "$bin/mla-run" "$build/test/codegen-kernels.mlaa" "$out/"
# mla-bench --timeline links CUPTI when it was found: the same library goes
# along (mla-bench looks next to itself first, $ORIGIN).
cupti=$(ldd "$build/runtime/bench/mla-bench" | awk '/libcupti/ {print $3}')
if [ -n "$cupti" ] && [ -e "$cupti" ]; then cp -L "$cupti" "$out/"; fi
cp "$root"/runtime/scripts/gpu/gpu-{run,step,ab,all}.sh "$out/"

gen() { "$bin/mla-gen" --model=deepseek-v2-lite "$@"; }
compile() { # compile IN.mlir OUT.mlaa [pipeline options]
  "$bin/mla-opt" "$1" -mla-decode-pipeline="target=cuda-sm90 $3" |
    "$bin/mla-translate" --mla-to-artifact -o "$2"
}
unopt='eliminate=false fuse-quant=false fuse-rope=false lift-q-prep=false fuse-projections=false schedule=none kernels=library'
tmp=$(mktemp -d)
# 1 layer, B=8: correctness against the float64 reference and the unoptimized compile.
gen --layers=1 --batch=8 --max-blocks-per-seq=4 --max-position=1024 -o "$tmp/l1.mlir"
compile "$tmp/l1.mlir" "$out/l1.cg.mlaa" "kernels=codegen"
compile "$tmp/l1.mlir" "$out/l1.lib.mlaa" "kernels=library"
compile "$tmp/l1.mlir" "$out/l1.ref.mlaa" "$unopt"
# All 27 layers, B=4 (with per-layer outputs for the per-layer check).
gen --batch=4 --max-blocks-per-seq=4 --max-position=512 --layer-outputs -o "$tmp/l27.mlir"
compile "$tmp/l27.mlir" "$out/l27.cg.mlaa" "kernels=codegen"
compile "$tmp/l27.mlir" "$out/l27.ref.mlaa" "$unopt"
# The timed step: 1 layer, B=64, L~4096.
gen --layers=1 --batch=64 --max-blocks-per-seq=65 --max-position=8192 -o "$tmp/b64.mlir"
compile "$tmp/b64.mlir" "$out/b64.cg.mlaa" "kernels=codegen"
compile "$tmp/b64.mlir" "$out/b64.lib.mlaa" "kernels=library"
# The same step with the update folded into the decode (one launch stores
# and attends), and its pair without the fold; the rope stays separate in
# both (the fold takes a plain update).
compile "$tmp/b64.mlir" "$out/b64.norope.mlaa" "kernels=codegen fuse-rope=false"
compile "$tmp/b64.mlir" "$out/b64.fused.mlaa" "kernels=codegen fuse-rope=false fuse-into-attention=true"
# Prefill (chunked, with cached context: --context on the GPU machine).
compilePrefill() { # compilePrefill IN.mlir OUT.mlaa
  "$bin/mla-opt" "$1" -mla-prefill-pipeline="target=cuda-sm90" |
    "$bin/mla-translate" --mla-to-artifact -o "$2"
}
# 1 layer, 4 requests of 75 new tokens: correctness against float64.
gen --layers=1 --phase=prefill --tokens=300 --requests=4 --max-blocks-per-seq=8 --max-position=1024 -o "$tmp/p1.mlir"
compilePrefill "$tmp/p1.mlir" "$out/p1.cg.mlaa"
# The timed prefill: 1 layer, 4 x 1024 new tokens a step after 2048 cached
# ones (3 steps fill the 5120-token block table).
gen --layers=1 --phase=prefill --tokens=4096 --requests=4 --max-blocks-per-seq=80 --max-position=8192 -o "$tmp/p4k.mlir"
compilePrefill "$tmp/p4k.mlir" "$out/p4k.cg.mlaa"
rm -rf "$tmp"
ls -la "$out"
