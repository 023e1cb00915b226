#!/usr/bin/env bash
# Issue #22 for GLM 5.x Flash on the H200 in one call, from binaries built here with the cuda
# preset (sm_90a, CUDA 13 as on the H200 image), carried in BIN:
#   1. test_glm5_cuda (exact path bit-identical as before, 300-row exact prefill chunk = steps,
#      item 8: the tensor-core chunk vs the CPU model within its stated tolerance),
#   2. bench_glm5_cuda synthetic-full 0 2048 --prefill $LENGTHS --old $OLD
#      --prefill-rows $ROWS --gemm-rows $GEMM: the full-size synthetic GLM 5.x Flash (Q2_K routed
#      experts, Q8_0 rest, generated on the GPU), copy-bandwidth probe, the old 16-row path and
#      the tensor-core path in the same process, the canary during a tensor-core prefill, the
#      sections of one tensor-core chunk,
#   3. test_glm5_mtp_cuda (the draft head and verify windows stay on the exact path).
# Usage, from the tree root: BIN=DIR [LENGTHS=2048,8192,32768] [OLD=512] [ROWS=512] [GEMM=64]
#   [FP32=1 (the tensor-core path with fp32_gemms)] [TEST_S=45] [BENCH_S=125] [MTP_S=20]
#   bench/cuda_glm5/device_prefill.sh OUTDIR
set -u
out=${1:?usage: BIN=DIR bench/cuda_glm5/device_prefill.sh OUTDIR}
bin=$(cd "${BIN:?set BIN}" && pwd)
grep_pat="FAIL|FATAL|ALL PASSED|tensor-core|bit-identical|^\||prefill|canary|bandwidth|profile|weights"
# shellcheck source=../device_lib.sh
. "$(dirname "$0")/../device_lib.sh"
device_run test_glm5_cuda "${TEST_S:-45}" .
device_run bench_glm5_cuda "${BENCH_S:-125}" synthetic-full 0 2048 --prefill "${LENGTHS:-2048,8192,32768}" \
  --old "${OLD:-512}" --prefill-rows "${ROWS:-512}" --gemm-rows "${GEMM:-64}" ${FP32:+--fp32-gemms}
device_run test_glm5_mtp_cuda "${MTP_S:-20}" .
log "done"
exit $rc
