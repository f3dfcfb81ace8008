#!/bin/bash
# On the GPU machine, in the folder scripts/gpu-prepare.sh filled: A/B of
# the runtime's performance switches on the DeepSeek-V2-Lite step (B=64,
# L=4096) and on the kernels each switch touches. Each switch is an
# environment knob (MLART_SKINNY_GEMM defaults to off, the others to on); the row with the knob at 0 is the
# old path, measured in the same call. OUT= names the log folder.
#   MLART_PDL             programmatic dependent launch between kernels
#   MLART_SKINNY_GEMM     split-K weight-streaming GEMM for M <= 64
#   MLART_DECODE_CLUSTER  decode splits merged in a thread-block cluster
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/gpu-out}; mkdir -p $OUT
export MLART_CODEGEN_ARTIFACT=$PWD/codegen-kernels.mlaa
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -e $d/libcublas.so.13 ] && export LD_LIBRARY_PATH=$d:$LD_LIBRARY_PATH && break
done
bench() { # bench NAME ENV... -- ARGS...
  local name=$1; shift; local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  echo "=== $name: ${envs[*]}" | tee -a $OUT/ab.log
  env "${envs[@]}" timeout 120 ./mla-bench $OUT/$name.json "$@" 2>&1 |
    grep -E "^\| [a-z]" | tee -a $OUT/ab.log
}
bench step-all-on  -- --step=b64.cg.mlaa --step=b64.lib.mlaa --step-only
bench step-pdl0    MLART_PDL=0 -- --step=b64.cg.mlaa --step-only --no-ceilings
bench step-skinny MLART_SKINNY_GEMM=1 -- --step=b64.cg.mlaa --step-only --no-ceilings
bench step-clus0   MLART_DECODE_CLUSTER=0 -- --step=b64.cg.mlaa --step-only --no-ceilings
bench step-all-off MLART_PDL=0 MLART_SKINNY_GEMM=0 MLART_DECODE_CLUSTER=0 -- --step=b64.cg.mlaa --step-only --no-ceilings
bench update-on    -- --cache-only --update-t=65536
bench update-pdl0  MLART_PDL=0 -- --cache-only --update-t=65536 --no-ceilings
bench codegen-on   -- --codegen-only --no-ceilings
bench codegen-pdl0 MLART_PDL=0 -- --codegen-only --no-ceilings
