#!/usr/bin/env bash
# Checks the C, C++ and CUDA lines changed since BASE against .clang-format
# (clang-format-22) and the .cpp lines changed since BASE against .clang-tidy
# (clang-tidy-22, warnings are errors). Lines nobody changed are never
# checked, so the tree as it was at BASE needs no reformatting.
#   scripts/check-style.sh [--format-only | --tidy-only | --fix]
#                          [--build-dir DIR] [BASE]
# --fix reformats the changed lines in place (clang-format only) and exits.
#
# BASE defaults to the commit recorded in .ci/style-base: the point after
# which the style rules apply. CI runs on a fresh clone of main, where
# "changed since the last commit" would miss everything but the newest
# commit and "changed since origin/main" means nothing, so the check covers
# every line written since the rules were adopted. Moving .ci/style-base
# forward to a commit whose CI passed keeps the clang-tidy step short (it
# tidies every .cpp file changed since BASE); moving it never hides an
# unchecked line as long as CI passed there. For a branch, pass its fork
# point: scripts/check-style.sh "$(git merge-base origin/main HEAD)".
# The comparison is BASE against the working tree, uncommitted edits
# included (untracked files are not seen until they are git-added).
#
# Renames are followed (git diff -M), so a moved file only has its edited
# lines checked. (git clang-format --diff BASE uses git diff-index without
# rename detection and would check every line of a moved file.)
#
# clang-tidy needs DIR/compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS
# is on in the top-level CMakeLists.txt) and a finished build of DIR, for
# the generated headers; DIR defaults to build/. Without the database the
# clang-tidy part is skipped with a message. Changed .cpp files that DIR does
# not compile (a disabled option, CUDA tests without CUDA) are listed and
# skipped. CUDA sources are formatted but never tidied (nvcc compiles them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
caller=$PWD
cd "$root"

usage() {
  echo "usage: scripts/check-style.sh [--format-only | --tidy-only | --fix]" \
    "[--build-dir DIR] [BASE]" >&2
  exit 2
}

mode=all
build=$root/build
base=
while [ $# -gt 0 ]; do
  case $1 in
  --format-only) mode=format ;;
  --tidy-only) mode=tidy ;;
  --fix) mode=fix ;;
  --build-dir)
    [ $# -ge 2 ] || usage
    build=$2
    shift
    ;;
  --build-dir=*) build=${1#--build-dir=} ;;
  -h | --help) usage ;;
  -*) usage ;;
  *)
    [ -z "$base" ] || usage
    base=$1
    ;;
  esac
  shift
done

# A relative DIR is the caller's; clang-tidy-diff runs from the root.
case $build in /*) ;; *) build=$caller/$build ;; esac

die() {
  echo "check-style: $*" >&2
  exit 2
}

given_base=$base # for the --fix hint
if [ -z "$base" ]; then
  [ -f .ci/style-base ] || die "no .ci/style-base; pass BASE"
  # The first word that is not in a comment.
  base=$(sed -e 's/#.*//' .ci/style-base | awk 'NF { print $1; exit }')
  [ -n "$base" ] || die ".ci/style-base names no commit"
fi
base_commit=$(git rev-parse --verify --quiet "$base^{commit}") ||
  die "BASE '$base' is not a commit here (a shallow clone? fetch more history)"

# No optional locks: the check only reads, and must not take index.lock
# from someone working in the same tree.
git_diff() {
  git --no-optional-locks -c core.quotePath=false diff --no-ext-diff \
    --no-color --src-prefix=a/ --dst-prefix=b/ -U0 -M --diff-filter=d \
    "$base_commit" "$@"
}

# Pathspecs by pattern, so that both sides of a rename match them and git
# can pair them up.
sources=('*.c' '*.h' '*.cc' '*.cpp' '*.cxx' '*.hpp' '*.cu' '*.cuh')
short=$(git rev-parse --short "$base_commit")
status=0

# clang-format on the changed lines of the changed sources; extra arguments
# go to clang-format-diff (-i: in place).
format_changed() {
  local patch
  patch=$(git_diff -- "${sources[@]}") || return 2
  clang-format-diff-22 -p1 -binary clang-format-22 \
    -iregex '.*\.(c|h|cc|cpp|cxx|hpp|cu|cuh)' "$@" <<<"$patch"
}

if [ "$mode" != tidy ]; then
  command -v clang-format-diff-22 >/dev/null ||
    die "no clang-format-diff-22 (scripts/setup.sh installs clang-format-22)"
fi

if [ "$mode" = fix ]; then
  format_changed -i
  echo "check-style: reformatted the lines changed since $short"
  exit 0
fi

if [ "$mode" != tidy ]; then
  echo "check-style: clang-format on lines changed since $short"
  if out=$(format_changed); then
    echo "check-style: clang-format: OK"
  else
    printf '%s\n' "$out"
    echo "check-style: clang-format: the lines above need formatting;" \
      "scripts/check-style.sh --fix${given_base:+ $given_base} applies it" >&2
    status=1
  fi
fi

if [ "$mode" != format ]; then
  db=$build/compile_commands.json
  if [ ! -f "$db" ]; then
    echo "check-style: clang-tidy skipped: no $db" \
      "(build first: bash scripts/build.sh $build)"
  else
    echo "check-style: clang-tidy on .cpp lines changed since $short ($build)"
    tidy_diff=$(command -v clang-tidy-diff-22.py ||
      dpkg -L clang-tidy-22 2>/dev/null | grep -m1 '/clang-tidy-diff\.py$' ||
      true)
    [ -n "$tidy_diff" ] ||
      die "no clang-tidy-diff-22.py (scripts/setup.sh installs clang-tidy-22)"
    # The changed .cpp files the build compiles, as one anchored regex for
    # clang-tidy-diff (which matches the diff's relative paths); the others
    # are named and left out.
    mapfile -t changed < <(git_diff --name-only -- '*.cpp')
    regex=$(python3 - "$db" "$root" "${changed[@]}" <<'EOF'
import json, os, re, sys
db, root, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(db) as f:
    compiled = {os.path.realpath(os.path.join(e.get("directory", ""),
                                              e["file"]))
                for e in json.load(f) if "file" in e}
keep = []
for name in names:
    if os.path.realpath(os.path.join(root, name)) in compiled:
        keep.append(re.escape(name))
    else:
        # stderr: stdout is the regex.
        print("check-style: clang-tidy: not in the build, skipped: " + name,
              file=sys.stderr)
print("|".join(keep))
EOF
)
    if [ -z "$regex" ]; then
      echo "check-style: clang-tidy: no changed .cpp file to check"
    else
      jobs=$(nproc 2>/dev/null || echo 2)
      patch=$(git_diff -- '*.cpp') || die "git diff failed"
      if python3 "$tidy_diff" -p1 -path "$build" -regex "($regex)" \
        -j "$jobs" -clang-tidy-binary clang-tidy-22 -quiet -hide-progress \
        -warnings-as-errors='*' <<<"$patch"; then
        echo "check-style: clang-tidy: OK"
      else
        echo "check-style: clang-tidy: findings above (fix them, or justify" \
          "one with // NOLINT(check-name))" >&2
        status=1
      fi
    fi
  fi
fi

exit $status
