#!/usr/bin/env bash
# The grouped expert MMA (issue #22, session 9) on the H200 in one call, from binaries built here
# (cuda preset, sm_90a, CUDA 13):
#   1. the CUDA tests of the three families (exact paths bit for bit, tensor-core criteria,
#      draft heads) and test_cuda_matmul (grouped_mma, moe_group, dequant);
#   2. bench_cuda_grouped_mma: the experts of one chunk at the three families' full-size shapes,
#      TFLOP/s vs a dense cuBLAS BF16 GEMM of the same run;
#   3. GLM 5.x Flash and Qwen3.8 Flash Next full-size synthetic prefill (generated on the GPU):
#      BEFORE's binaries (the tree before this change) at 2K, BIN's at 2K/8K/32K in 512-row
#      chunks, and (BIG=L1,L2) BIN's in 2048-row chunks; each with its canary and one chunk's
#      per-op profile.
# DeepSeek V4 Flash's full-size model is not run here (ds4-convert + a 72 s load from /dev/shm
# do not fit a 250 s call); its expert shapes run in step 2.
# Logs: OUTDIR/log.txt and OUTDIR/r.tgz (every binary's output; the device returns 8 files at
# most). Usage, from the tree root:
#   BIN=DIR [BEFORE=DIR] [BIG=2048] [LENGTHS=2048,8192,32768] bench/cuda_grouped_mma/device_run.sh OUTDIR
set -u
final=${1:?usage: BIN=DIR [BEFORE=DIR] bench/cuda_grouped_mma/device_run.sh OUTDIR}
bin=$(cd "${BIN:?set BIN}" && pwd)
out=/tmp/grouped_mma_run
rm -rf "$out"
grep_pat="FAIL|FATAL|ALL PASSED"
# shellcheck source=../device_lib.sh
. "$(dirname "$0")/../device_lib.sh"
mkdir -p "$final"
pack() { cp "$out/log.txt" "$final/log.txt"; tar -czf "$final/r.tgz" -C "$(dirname "$out")" "$(basename "$out")"; }
# bench LABEL TIMEOUT BINARY ARGS...: into OUTDIR/LABEL.txt, its tables into the log
bench() {
  local label=$1 t=$2 b=$3
  shift 3
  [ -x "$b" ] || { log "$label: $b missing"; return 0; }
  log "$label: $(basename "$b") $*"
  timeout "$t" "$b" "$@" >"$out/$label.txt" 2>&1
  log "$label exit $? (124 = timed out)"
  grep -E "^\||tok/s|TFLOP|canary|profile|FATAL" "$out/$label.txt" | head -120 >>"$out/log.txt"
  pack
}
device_run test_cuda_matmul 30
device_run test_deepseek_v4_cuda 30 .
device_run test_deepseek_v4_mtp_cuda 20 .
device_run test_deepseek_v4_dspark_cuda 20 .
device_run test_glm5_cuda 45 .
device_run test_glm5_mtp_cuda 15 .
device_run test_qwen_next_cuda 20 .
device_run test_qwen_next_mtp_cuda 15 . --quick
pack
bench grouped_mma 30 "$bin/bench_cuda_grouped_mma" 10
glm="synthetic-full 0 2048 --old 16"
qwen="synthetic-full --old-max=0"
[ -n "${BEFORE:-}" ] && bench glm_before "${GLM_BEFORE_S:-25}" "$BEFORE/bench_glm5_cuda" $glm --prefill 2048
bench glm_after "${GLM_S:-70}" "$bin/bench_glm5_cuda" $glm --prefill "${LENGTHS:-2048,8192,32768}"
[ -n "${BEFORE:-}" ] && bench qwen_before "${QWEN_BEFORE_S:-20}" "$BEFORE/bench_qwen_next_cuda" $qwen --prefill=2048
bench qwen_after "${QWEN_S:-60}" "$bin/bench_qwen_next_cuda" $qwen "--prefill=${LENGTHS:-2048,8192,32768}"
[ -n "${BIG:-}" ] && bench glm_rows2048 25 "$bin/bench_glm5_cuda" $glm --prefill "$BIG" --prefill-rows 2048
[ -n "${BIG:-}" ] && bench qwen_rows2048 25 "$bin/bench_qwen_next_cuda" $qwen "--prefill=$BIG" --prefill-rows=2048
log "done"
pack
exit $rc
