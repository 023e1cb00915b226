#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: debug build (ASan + UBSan) of all targets,
# a compile of the CUDA targets (nothing runs them here), then ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash tools/setup.sh
# ccache hits across checkouts in other folders (CI clones afresh each time).
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
cmake --preset debug >/dev/null
cmake --build --preset debug -j2
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  cmake --preset cuda >/dev/null
  cmake --build --preset cuda -j2 --target ds4_cuda_targets
fi
ctest --preset debug
