#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: debug build (ASan + UBSan) of all targets,
# a compile of the CUDA targets with a run of their host-only tests (the GEMV decoders' unit
# layouts and integer sums against the CPU's dot products, the MMA fragment maps: no GPU needed;
# the GPU tests run on the device machine, docs/device-runbook.md) and the SASS check of the
# PDL-launched kernels (tools/device/pdl_sass_check_all.sh), then ctest.
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
  for t in test_gemv_decode test_gemv_act_host test_grouped_mma_frag test_grouped_mma_stage; do
    build/cuda/bin/$t >/tmp/ds4_$t.log 2>&1 || { tail -20 /tmp/ds4_$t.log; echo "$t failed" >&2; exit 1; }
    echo "$t: passed (host-only)"
  done
  # PDL safety without a GPU: no programmatic dependent touches its inputs before its wait (SASS).
  bash tools/device/pdl_sass_check_all.sh >/tmp/ds4_pdl_sass.log 2>&1 || { cat /tmp/ds4_pdl_sass.log; echo "pdl_sass_check_all failed" >&2; exit 1; }
  echo "pdl_sass_check_all: passed ($(grep -c ': 0 with' /tmp/ds4_pdl_sass.log) sources)"
fi
ctest --preset debug
