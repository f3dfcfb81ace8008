#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine needs to build and test MLA:
# MLIR/LLVM 22, clang-22 (with its sanitizer runtimes), lld, ninja, GoogleTest,
# Google Benchmark, clang-format-22 + clang-tidy-22 for
# scripts/check-style.sh, and what the Python package builds and tests with
# (Debian's Python, pybind11, the DLPack header, NumPy, pytest).
# Idempotent: does nothing when everything is present.
set -euo pipefail

packages=(ninja-build cmake libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
          clang-22 lld-22 libclang-rt-22-dev ccache libgtest-dev libbenchmark-dev
          python3 clang-format-22 clang-tidy-22
          python3-dev pybind11-dev libdlpack-dev python3-numpy python3-pytest
          xz-utils)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
