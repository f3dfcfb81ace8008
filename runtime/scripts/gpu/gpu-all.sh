#!/bin/bash
# On the GPU machine: everything that checks the CUDA backend, in one call
# (the device tool's runs are limited to 10 minutes; the benchmark is a
# separate call: NO_BENCH=1 is set here). Logs go to $OUT as one tarball
# (the tool returns at most 8 files).
cd "$(dirname "$0")"
export OUT_FINAL=${OUT:-/tmp/gpu-final}
export OUT=/tmp/gpu-logs; mkdir -p $OUT
export MLART_CODEGEN_ARTIFACT=$PWD/codegen-kernels.mlaa
NO_BENCH=1 ./gpu-run.sh
./gpu-step.sh
tar czf $OUT_FINAL/logs.tgz -C $OUT .
cp $OUT/summary.txt $OUT_FINAL/ 2>/dev/null
