#!/usr/bin/env bash
# Compile-time benchmark (not a test): how long mla-opt takes on whole decode
# steps that mla-gen generates, for growing layer counts.
#
#   bench/compile-time.sh [BUILD_DIR]      (default: ./build, or $MLA_BUILD_DIR)
#
# For each model/layer count it generates one decode step (batch 8, bf16) and
# times the decode pipeline against plain `-canonicalize -cse`, best of 3
# wall-clock runs, and prints a Markdown table.
set -euo pipefail

build_dir=${1:-${MLA_BUILD_DIR:-build}}
gen=$build_dir/bin/mla-gen
opt=$build_dir/bin/mla-opt
for tool in "$gen" "$opt"; do
  [[ -x $tool ]] || { echo "error: $tool not found (build first)" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The decode pipeline if this checkout has it, else the passes it runs.
if "$opt" --help 2>/dev/null | grep -c -- '--mla-decode-pipeline' >/dev/null; then
  pipeline=(-mla-decode-pipeline)
  pipeline_note="-mla-decode-pipeline"
else
  pipeline=(-mla-extract-kv-update -mla-fuse-rope-kv-update -mla-lift-q-prep
            -mla-schedule-kv-updates -canonicalize -cse)
  pipeline_note="fallback pass list (no -mla-decode-pipeline in this checkout): ${pipeline[*]}"
fi

# Smaller of two decimal numbers.
min() { awk -v a="$1" -v b="$2" 'BEGIN{print (b == "" || a < b) ? a : b}'; }

# Best (minimum) wall-clock seconds of 3 runs of "$@"; a failing run aborts.
best_of_3() {
  local best="" t
  for _ in 1 2 3; do
    t=$( { TIMEFORMAT=%3R; time "$@" >/dev/null 2>"$work/err"; } 2>&1 ) ||
      { echo "error: $* failed:" >&2; cat "$work/err" >&2; exit 1; }
    best=$(min "$t" "$best")
  done
  echo "$best"
}

# Best of 3 of the time mla-opt spends in process (parse, passes, print:
# -mlir-timing's total), i.e. without process start-up.
best_in_process_of_3() {
  local best="" t
  for _ in 1 2 3; do
    t=$("$opt" "$@" -o /dev/null -mlir-timing -mlir-timing-display=list 2>&1 |
        awk '/Total Execution Time:/ {print $4}')
    best=$(min "$t" "$best")
  done
  echo "$best"
}

echo "pipeline: $pipeline_note"
echo "host: $(nproc) cores, $(uname -m), $(date -u +%Y-%m-%d)"
empty=$work/empty.mlir
echo 'module {}' >"$empty"
echo "mla-opt start-up (empty module): $(best_of_3 "$opt" "$empty") s"
echo
echo "wall: best of 3 wall-clock seconds of the whole process;"
echo "in-process: best of 3 of -mlir-timing's total (no process start-up)."
echo
printf '| %-16s | %6s | %5s | %6s | %9s | %10s | %10s | %10s | %10s |\n' \
  model layers ops "IR KiB" "mla-gen s" "pipeline s" "in-process s" \
  "canon+cse s" "in-process s"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' ------------------ -------- ------- \
  -------- ----------- ------------ ------------ ------------ ------------
for spec in deepseek-v2-lite:1 deepseek-v2-lite:8 deepseek-v2-lite:27 \
            deepseek-v3:61; do
  model=${spec%%:*}
  n=${spec##*:}
  file=$work/$model-$n.mlir
  gen_s=$(best_of_3 "$gen" --model="$model" --layers="$n" --batch=8 -o "$file")
  ops=$(grep -cE '^ +(%[^ ]+ = )?[a-z_]+\.[a-z_]+' "$file" || true)
  kib=$(( $(wc -c <"$file") / 1024 ))
  pipe_s=$(best_of_3 "$opt" "$file" "${pipeline[@]}")
  pipe_in=$(best_in_process_of_3 "$file" "${pipeline[@]}")
  canon_s=$(best_of_3 "$opt" "$file" -canonicalize -cse)
  canon_in=$(best_in_process_of_3 "$file" -canonicalize -cse)
  printf '| %-16s | %6s | %5s | %6s | %9s | %10s | %10s | %10s | %10s |\n' \
    "$model" "$n" "$ops" "$kib" "$gen_s" "$pipe_s" "$pipe_in" "$canon_s" \
    "$canon_in"
done
