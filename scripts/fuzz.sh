#!/usr/bin/env bash
# Runs every libFuzzer target of a build configured with
# -DMLA_ENABLE_SANITIZERS=ON -DMLA_ENABLE_FUZZERS=ON for SECONDS each, on
# seed corpora built here from test/, examples/ and artifacts the build's
# own tools compile (docs/fuzzing.md). Exits non-zero when a target finds
# a crash; the reproducer is left in WORK_DIR/crashes.
#   scripts/fuzz.sh BUILD_DIR [SECONDS] [WORK_DIR]
# MLA_FUZZ_IR_SECONDS overrides SECONDS for mla-ir-fuzzer (0: run its seeds
# once, no mutation).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?usage: scripts/fuzz.sh BUILD_DIR [SECONDS] [WORK_DIR]}" && pwd)
seconds=${2:-20}
work=${3:-$build/fuzz}
bin=$build/bin
for target in mla-ir-fuzzer mlart-artifact-fuzzer mlart-step-fuzzer mlart-npy-fuzzer; do
  [[ -x $bin/$target ]] || { echo "fuzz: $bin/$target is missing (configure with -DMLA_ENABLE_FUZZERS=ON)" >&2; exit 2; }
done
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

seeds=$work/seeds
rm -rf "$seeds"
mkdir -p "$seeds"/{ir,artifact,step,npy} "$work"/crashes
python3 "$root/test/fuzz/make-seeds.py" --root "$root" --bin "$bin" --out "$seeds"
# What the long campaign found beyond those seeds (docs/fuzzing.md).
tar xJf "$root/test/fuzz/campaign-corpus.tar.xz" -C "$seeds"

run() {
  local target=$1 corpus=$2 seconds=$3; shift 3
  # The first directory receives what the run finds; the seeds stay as built.
  mkdir -p "$work/corpus/$target"
  echo "=== $target ($seconds s; 0: the corpus once) ==="
  local budget=(-max_total_time="$seconds")
  [[ $seconds == 0 ]] && budget=(-runs=0)
  if ! "$bin/$target" "${budget[@]}" -timeout=20 -rss_limit_mb=3072 \
      -print_final_stats=1 -artifact_prefix="$work/crashes/$target-" "$@" \
      "$work/corpus/$target" "$corpus" 2>"$work/$target.log"; then
    tail -40 "$work/$target.log" >&2
    echo "fuzz: $target failed; reproducer in $work/crashes" >&2
    return 1
  fi
  grep -E "^stat::number_of_executed_units|^Done" "$work/$target.log" || true
}
status=0
# The MLIR libraries are not instrumented, but LLVM's inline allocator code
# in ours poisons memory they later reuse: user poisoning off, or ASan
# reports MLIR's own arena reuse as use-after-poison.
ASAN_OPTIONS="$ASAN_OPTIONS:allow_user_poisoning=0" \
  run mla-ir-fuzzer "$seeds/ir" "${MLA_FUZZ_IR_SECONDS:-$seconds}" -dict="$root/test/fuzz/mla-ir.dict" -max_len=65536 || status=1
run mlart-artifact-fuzzer "$seeds/artifact" "$seconds" -max_len=1048576 || status=1
run mlart-step-fuzzer "$seeds/step" "$seconds" -max_len=1048576 || status=1
run mlart-npy-fuzzer "$seeds/npy" "$seconds" -max_len=65536 || status=1
exit $status
