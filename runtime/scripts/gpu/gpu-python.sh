#!/bin/bash
# On the GPU machine, from the repository root, with the folder that
# scripts/gpu-prepare-python.sh filled as $1: builds mla.runtime (the
# runtime alone, CUDA on) for the machine's python3, runs
# test/python/test_cuda.py (torch tensors, the caller's stream,
# torch.cuda.graph capture, the ops against the CPU kernels), once more
# under compute-sanitizer memcheck and racecheck (the threads and the
# capture), the torch-graph benchmark against
# mla-run --graph, and checks mla-bench's JSON with a JSON parser. Logs in $OUT.
set -o pipefail
prep=$(cd "$1" && pwd)
OUT=${OUT:-/tmp/gpu-python}; mkdir -p "$OUT"
sum=$OUT/summary.txt
nvidia-smi -L | tee "$sum"
for d in $(python3 -c 'import nvidia,os;print(os.path.dirname(nvidia.__path__[0])+"/nvidia/cu13/lib")' 2>/dev/null) /usr/local/cuda/lib64; do
  if [ -e "$d/libcublas.so.13" ]; then export LD_LIBRARY_PATH=$d:$LD_LIBRARY_PATH; break; fi
done
python3 -c 'import pytest' 2>/dev/null || export PYTHONPATH=$prep/pysite
python3 -c 'import sys, sysconfig; print(sys.version.split()[0], sysconfig.get_paths()["include"])' | tee -a "$sum"
start=$(date +%s)
cmake -S runtime -B /tmp/rt -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DPython_EXECUTABLE="$(command -v python3)" \
  -Dpybind11_DIR="$prep/pybind11/share/cmake/pybind11" \
  -DMLART_DLPACK_INCLUDE_DIR="$prep/include" \
  -DMLART_BUILD_TESTS=OFF -DMLART_BUILD_BENCHMARKS=OFF > "$OUT/build.log" 2>&1 &&
  cmake --build /tmp/rt --target mlart_python -j16 >> "$OUT/build.log" 2>&1
echo "build rc=$? ($(( $(date +%s) - start )) s)" | tee -a "$sum"
tail -3 "$OUT/build.log"
export PYTHONPATH=/tmp/rt/python_packages${PYTHONPATH:+:$PYTHONPATH}
export MLA_CUDA_ARTIFACTS=$prep PYTHONUNBUFFERED=1
timeout 150 python3 -m pytest -q -rs -p no:cacheprovider test/python/test_cuda.py > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?" | tee -a "$sum"; tail -15 "$OUT/pytest.log"
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -k "capture or concat" test/python/test_cuda.py > "$OUT/memcheck.log" 2>&1
echo "memcheck rc=$?" | tee -a "$sum"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -3
# Every hazard is printed, so that the log says which kernels they are in
# (cuBLAS's nvjet kernels report hazards racecheck cannot model; excluding
# them by name made the sanitizer itself fail).
timeout 120 compute-sanitizer --tool racecheck --print-limit 100000 --error-exitcode 9 python3 -m pytest -q -p no:cacheprovider -k "threads or capture" test/python/test_cuda.py > "$OUT/racecheck.log" 2>&1
echo "racecheck rc=$?" | tee -a "$sum"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" "$OUT/racecheck.log" | tail -3
echo "racecheck hazards by kernel:" | tee -a "$sum"
grep -E "^========= Error: Race reported" "$OUT/racecheck.log" | sed -E 's/.*access at ([A-Za-z0-9_]+).*/\1/; s/^nvjet.*/nvjet (cuBLAS)/' | sort | uniq -c | tee -a "$sum"
timeout 100 python3 runtime/bench/python/torch_graph_step.py "$prep/b64.cg.mlaa" --mla-run "$prep/mla-run" --json "$OUT/torch-graph.json" > "$OUT/torch-graph.log" 2>&1
echo "torch graph bench rc=$?" | tee -a "$sum"; cat "$OUT/torch-graph.log"
timeout 90 "$prep/mla-bench" --output="$OUT/mla-bench.json" --step-only --quick --step="$prep/b64.cg.mlaa" > "$OUT/mla-bench.log" 2>&1
echo "mla-bench rc=$?" | tee -a "$sum"
python3 -c 'import json,sys; rows=json.load(open(sys.argv[1])); print("mla-bench JSON parses:", type(rows).__name__, len(rows))' "$OUT/mla-bench.json" 2>&1 | tee -a "$sum"
tail -12 "$OUT/mla-bench.log"
echo "=== summary"; cat "$sum"
