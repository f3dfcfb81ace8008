#!/bin/bash
# GPU run of the CUDA backend: tests, bench, compute-sanitizer. Logs in $OUT.
# scripts/gpu-prepare.sh fills a folder with this script and the binaries;
# run it there on the GPU machine. OUT= names the log folder; NO_BENCH=1 skips
# the benchmark, NO_SAN=1 the sanitizers; MEM_FILTER= narrows memcheck.
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/gpu-out}; mkdir -p $OUT
nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.mem --format=csv
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib $(python3 -c 'import nvidia.cublas,os;print(os.path.dirname(nvidia.cublas.__file__)+"/lib")' 2>/dev/null) $(python3 -c 'import nvidia,os;print(os.path.dirname(nvidia.__path__[0])+"/nvidia/cu13/lib")' 2>/dev/null); do
  if [ -e $d/libcublas.so.13 ]; then export LD_LIBRARY_PATH=$d:$LD_LIBRARY_PATH; break; fi
done
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
timeout ${T_TESTS:-150} ./mlart-cuda-tests > $OUT/tests.log 2>&1; echo "tests rc=$?" | tee $OUT/summary.txt
grep -E "FAILED|Failure|error|Expected|Which is|expected" $OUT/tests.log | head -40
MLART_DECODE_VARIANT=0 timeout 60 ./mlart-cuda-tests --gtest_filter='*Decode*' > $OUT/tests-v0.log 2>&1; echo "tests (decode variant 0) rc=$?" | tee -a $OUT/summary.txt
MLART_DECODE_CLUSTER=0 timeout 60 ./mlart-cuda-tests --gtest_filter='*Decode*' > $OUT/tests-nocluster.log 2>&1; echo "tests (decode cluster merge off) rc=$?" | tee -a $OUT/summary.txt
MLART_DECODE_MANY=force timeout 60 ./mlart-cuda-tests --gtest_filter="*Decode*" > $OUT/tests-many.log 2>&1; echo "tests (decode many-heads forced) rc=$?" | tee -a $OUT/summary.txt
# Many-heads kernels: 0 = cp.async, 1 = TMA (default, above), 2 = TMA with S/PV overlap.
for v in 0 2; do
MLART_DECODE_MANY=force MLART_DECODE_MANY_VARIANT=$v timeout 60 ./mlart-cuda-tests --gtest_filter="*Decode*" > $OUT/tests-many-v$v.log 2>&1; echo "tests (decode many-heads forced, variant $v) rc=$?" | tee -a $OUT/summary.txt
done
if [ -z "$NO_BENCH" ]; then
STEP_ARGS=$(for f in b64.*.mlaa; do [ -e "$f" ] && printf -- "--step=%s " "$f"; done)
timeout ${T_BENCH:-200} ./mla-bench $OUT/bench.json ${STEP_ARGS} ${BENCH_ARGS} 2>&1 | tee $OUT/bench.log; echo "bench rc=${PIPESTATUS[0]}" | tee -a $OUT/summary.txt
MLART_DECODE_CLUSTER=0 timeout 90 ./mla-bench $OUT/bench-nocluster.json --decode-only --decode-h=16 --no-ceilings 2>&1 | tee $OUT/bench-nocluster.log; echo "bench cluster merge off rc=${PIPESTATUS[0]}" | tee -a $OUT/summary.txt
MLART_DECODE_VARIANT=0 timeout 90 ./mla-bench $OUT/bench-v0.json --decode-only 2>&1 | tee $OUT/bench-v0.log; echo "bench v0 rc=${PIPESTATUS[0]}" | tee -a $OUT/summary.txt
for v in 0 1 2; do
MLART_DECODE_MANY_VARIANT=$v timeout 90 ./mla-bench $OUT/bench-many-v$v.json --decode-only --decode-h=128 --no-ceilings 2>&1 | tee $OUT/bench-many-v$v.log; echo "bench many-heads variant $v rc=${PIPESTATUS[0]}" | tee -a $OUT/summary.txt
done
fi
if [ -z "$NO_SAN" ]; then
timeout ${T_MEM:-150} compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 ./mlart-cuda-tests ${MEM_FILTER} > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?" | tee -a $OUT/summary.txt
timeout ${T_RACE:-120} compute-sanitizer --tool racecheck --error-exitcode 9 ./mlart-cuda-tests --gtest_filter='Grid/CudaDecode.MatchesCpu/0:Grid/CudaDecode.MatchesCpu/2:CudaDecodeGraph.ClusterMerge*:CudaRopeCacheUpdate.*:CudaPrefill*' > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?" | tee -a $OUT/summary.txt
MLART_DECODE_MANY=force timeout ${T_RACE:-80} compute-sanitizer --tool racecheck --error-exitcode 9 ./mlart-cuda-tests --gtest_filter='Grid/CudaDecode.MatchesCpu/5:Grid/CudaDecode.MatchesCpu/11:Grid/CudaDecode.MatchesCpu/12:CudaDecodeGraph.*' > $OUT/racecheck-many.log 2>&1; echo "racecheck (many-heads TMA) rc=$?" | tee -a $OUT/summary.txt
timeout ${T_RACE:-80} compute-sanitizer --tool racecheck --error-exitcode 9 ./mlart-cuda-tests --gtest_filter='CudaCodegen.BadIndices*:CudaCacheUpdate*' > $OUT/racecheck-codegen.log 2>&1; echo "racecheck (generated kernels, update) rc=$?" | tee -a $OUT/summary.txt
tail -5 $OUT/memcheck.log; tail -5 $OUT/racecheck.log; tail -5 $OUT/racecheck-many.log; tail -3 $OUT/racecheck-codegen.log
fi
echo "finished at $(date +%T)" | tee -a $OUT/summary.txt
echo "=== summary"; grep -E "^\[  (PASSED|FAILED) |tests? (passed|failed)" $OUT/tests.log | head; grep -E "^\[  FAILED" $OUT/tests.log | head -20; cat $OUT/summary.txt
