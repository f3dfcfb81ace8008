#!/bin/bash
# On the GPU machine, in the folder scripts/gpu-prepare.sh filled: the
# compiled DeepSeek-V2-Lite decode and prefill steps on the H200 — correctness against
# the float64 reference and the unoptimized compile (1 and 27 layers,
# generated and library cache kernels, eager and CUDA graph), step times at
# B=64 L~4096, and compute-sanitizer on the 1-layer graph run.
# OUT= names the log folder.
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/gpu-out}; mkdir -p $OUT
s=0.1147214
log=$OUT/step.log
run() { echo "=== $*" | tee -a $log; timeout 300 "$@" >> $log 2>&1; rc=$?; echo "rc=$rc" | tee -a $log;
        grep -E "relative error|vs reference|naive|step time|median|layer .* worst|OK|MISMATCH|error" $log | tail -n 6 | sed 's/^/   /'; }
run ./mla-run l1.cg.mlaa --device cuda --reference l1.ref.mlaa --naive --softmax-scale $s --steps 3 --context 100 --seed 11
run ./mla-run l1.cg.mlaa --device cuda --reference l1.lib.mlaa --graph --steps 4 --context 100 --seed 12
run ./mla-run l1.lib.mlaa --device cuda --naive --softmax-scale $s --graph --steps 3 --context 100 --seed 13
run ./mla-run l27.cg.mlaa --device cuda --reference l27.ref.mlaa --naive --softmax-scale $s --steps 2 --context 100 --seed 14 --no-per-op
# Chunked prefill (tensor-core attention over new tokens and cached context).
run ./mla-run p1.cg.mlaa --device cuda --naive --softmax-scale $s --steps 2 --context 100 --seed 15
run ./mla-run p1.cg.mlaa --device cuda --naive --softmax-scale $s --graph --steps 3 --context 100 --seed 16
run ./mla-run p4k.cg.mlaa --device cuda --steps 3 --context 2048 --seed 17
run ./mla-run p4k.cg.mlaa --device cuda --steps 3 --context 2048 --seed 17 --graph
for k in cg lib; do
  run ./mla-run b64.$k.mlaa --device cuda --steps 20 --context 4090 --seed 3
  run ./mla-run b64.$k.mlaa --device cuda --steps 20 --context 4090 --seed 3 --graph
done
# One graph replay laid out per kernel and stream (CUPTI; docs/performance.md).
run ./mla-bench --step=b64.cg.mlaa --timeline=$OUT/timeline.txt
if [ -z "$NO_SAN" ]; then
  run compute-sanitizer --tool memcheck --error-exitcode 9 ./mla-run l1.cg.mlaa --device cuda --graph --steps 3 --context 100
  run compute-sanitizer --tool memcheck --error-exitcode 9 ./mla-run p1.cg.mlaa --device cuda --steps 2 --context 100
fi
