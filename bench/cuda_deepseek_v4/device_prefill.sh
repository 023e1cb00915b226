#!/usr/bin/env bash
# Issue #22 on the H200 in one call, from binaries built here with the cuda preset (sm_90a,
# CUDA 13 as on the H200 image; carried in BIN with our release ds4-convert):
#   1. test_cuda_matmul (dequant_bf16 / matmul_rows / moe_group split vs host references),
#   2. test_deepseek_v4_cuda (exact path bit-identical as before + the tensor-core items),
#   3. the synthetic full-size Flash (`ds4-convert --synthetic deepseek_v4_flash --quant-experts
#      IQ2_XXS --expert-holes`, ds4's q2 layout, routed experts as zero holes) in /dev/shm,
#   4. bench_deepseek_v4_cuda MODEL 64 8 --prefill $LENGTHS --old-max $OLD_MAX --prefill-rows $ROWS
#      [--profile]: the old 16-row path and the tensor-core path (default options), same run,
#      canary during the new 2k prefill, per-op profiles with PROFILE=1;
#   5. test_deepseek_v4_mtp_cuda, test_deepseek_v4_dspark_cuda when present.
# Usage, from the tree root: BIN=DIR [LENGTHS=2048,8192,32768] [OLD_MAX=2048] [ROWS=512[,1024]]
#   [PROFILE=1] [SKIP_TESTS=1] [BENCH_S=240] bench/cuda_deepseek_v4/device_prefill.sh OUTDIR
set -u
out=${1:?usage: BIN=DIR bench/cuda_deepseek_v4/device_prefill.sh OUTDIR}
bin=$(cd "${BIN:?set BIN}" && pwd)
grep_pat="FAIL|FATAL|ALL PASSED|tensor cores|tensor-core|gemm"
# shellcheck source=../device_lib.sh
. "$(dirname "$0")/../device_lib.sh"
if [ -z "${SKIP_TESTS:-}" ]; then
  device_run test_cuda_matmul 60
  device_run test_deepseek_v4_cuda ${TEST_S:-120} .
fi
# shellcheck source=flash_bench.sh
. "$(dirname "$0")/flash_bench.sh"
# shellcheck disable=SC2086
flash_bench "^\||prefill|canary|copy bandwidth|model |per-op|FATAL" 64 8 --prefill ${LENGTHS:-2048,8192,32768} \
  --old-max ${OLD_MAX:-2048} --prefill-rows ${ROWS:-512}${PROFILE:+ --profile}
if [ -z "${SKIP_TESTS:-}" ]; then  # the draft-head tests last (they run the exact path)
  device_run test_deepseek_v4_mtp_cuda 45 .
  device_run test_deepseek_v4_dspark_cuda 45 .
fi
log "done"
exit $rc
