#!/usr/bin/env bash
# Configures and builds MLA into a build directory.
#   scripts/build.sh [BUILD_DIR] [extra CMake arguments...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
shift || true

bash "$root/scripts/setup.sh"

launcher=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$root
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# Debian's Python: the one its pybind11, NumPy and pytest packages are for
# (a pyenv or venv python3 earlier on PATH may lack them).
cmake -S "$root" -B "$build" -G Ninja \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
  -DLLVM_USE_LINKER=lld -DPython_EXECUTABLE=/usr/bin/python3 \
  "${launcher[@]}" "$@" >/dev/null
cmake --build "$build"
