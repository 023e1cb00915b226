#!/usr/bin/env bash
# Issue #24 (continuous batching, DeepSeek V4 on CUDA) on the H200 in one call, from binaries
# built here with the cuda preset (sm_90a, CUDA 13 as on the H200 image; carried in BIN with the
# release ds4-convert):
#   1. test_deepseek_v4_batch_cuda (decode_batch rows = each state's own step bit for bit,
#      joining / cancelling, per-state captured windows), then the DeepSeek tests it touches:
#      test_deepseek_v4_cuda, test_deepseek_v4_mtp_cuda, test_deepseek_v4_dspark_cuda;
#   2. the synthetic full-size Flash (`ds4-convert --synthetic deepseek_v4_flash --quant-experts
#      IQ2_XXS --expert-holes`, ds4's q2 layout, routed experts as zero holes) in /dev/shm;
#   3. bench_deepseek_v4_cuda MODEL $PROMPT $DECODE --batch $STREAMS: single-stream decode, then
#      aggregate tok/s and per-stream TPOT at each stream count, batched vs unbatched, same run.
# Usage, from the tree root: BIN=DIR [PROMPT=1024] [DECODE=32] [STREAMS=1,4,16,64] [STEPS=16] [ROWS=2,4,8,16,64]
#   [SKIP_TESTS=1] [BENCH_S=150] bench/cuda_deepseek_v4/device_batch.sh OUTDIR
set -u
out=${1:?usage: BIN=DIR bench/cuda_deepseek_v4/device_batch.sh OUTDIR}
bin=$(cd "${BIN:?set BIN}" && pwd)
grep_pat="FAIL|FATAL|ALL PASSED|passed|failed"
# shellcheck source=../device_lib.sh
. "$(dirname "$0")/../device_lib.sh"
if [ -z "${SKIP_TESTS:-}" ]; then
  device_run test_deepseek_v4_batch_cuda 60 .
  device_run test_deepseek_v4_cuda 60 .
  device_run test_deepseek_v4_mtp_cuda 45 .
  device_run test_deepseek_v4_dspark_cuda 45 .
fi
# shellcheck source=flash_bench.sh
. "$(dirname "$0")/flash_bench.sh"
# shellcheck disable=SC2086
BENCH_S=${BENCH_S:-150} flash_bench "^\||decode|batching|copy bandwidth|model |FATAL" ${PROMPT:-1024} ${DECODE:-32} \
  --batch ${STREAMS:-1,4,16,64} --batch-steps ${STEPS:-16}${ROWS:+ --batch-rows $ROWS}
log "done"
exit $rc
