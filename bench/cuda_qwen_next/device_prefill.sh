#!/usr/bin/env bash
# Issue #22 for Qwen3.8 Flash Next on the H200 in one call, from binaries built here with the
# cuda preset (sm_90a, CUDA 13 as on the H200 image) and carried in BIN:
#   1. test_qwen_next_cuda ROOT: items 1-7 (exact path: chunk = decode steps bit for bit, now
#      with one exact 300-row prefill chunk), 8 (tensor-core chunk vs CPU), 9 (delta_rule_rows
#      at 128-wide heads);
#   2. bench_qwen_next_cuda synthetic-full --prefill=$LENGTHS --old-max=$OLD_MAX
#      --prefill-rows=$ROWS [--exact-max=$EXACT_MAX]: the old 16-row path and the tensor-core
#      path in the same process, the copy-bandwidth probe, the GPU canary, a phase profile;
#   3. test_qwen_next_mtp_cuda ROOT --quick (the MTP head: its states keep 16-row chunks).
# Usage, from the tree root (ROOT: the tree holding tests/data and models/default):
#   BIN=DIR [ROOT=.] [LENGTHS=2048,8192,32768] [OLD_MAX=2048] [ROWS=512] [EXACT_MAX=0]
#   [TEST_S=50] [BENCH_S=100] [MTP_S=25] bench/cuda_qwen_next/device_prefill.sh OUTDIR
set -u
out=${1:?usage: BIN=DIR bench/cuda_qwen_next/device_prefill.sh OUTDIR}
bin=$(cd "${BIN:?set BIN}" && pwd)
root=${ROOT:-.}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
log() { echo "== $(date +%T) $*" | tee -a "$out/log.txt"; }
log "start $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$out/log.txt"
rc=0
run() {  # name timeout args...
  local name=$1 t=$2
  shift 2
  log "$name $*"
  timeout "$t" "$bin/$name" "$@" >"$out/$name.txt" 2>&1
  local r=$?
  log "$name exit $r (124 = timed out)"
  [ $r -eq 0 ] || rc=1
}
run test_qwen_next_cuda "${TEST_S:-50}" "$root"
grep -E "FAIL|FATAL|tensor cores|delta_rule_rows|300|PASSED" "$out/test_qwen_next_cuda.txt" | head -30 | tee -a "$out/log.txt"
args="synthetic-full --prefill=${LENGTHS:-2048,8192,32768} --old-max=${OLD_MAX:-2048} --prefill-rows=${ROWS:-512}"
[ "${EXACT_MAX:-0}" -gt 0 ] && args="$args --exact-max=$EXACT_MAX"
# shellcheck disable=SC2086
run bench_qwen_next_cuda "${BENCH_S:-100}" $args
grep -vE "^\s*$" "$out/bench_qwen_next_cuda.txt" | tee -a "$out/log.txt" | tail -60
run test_qwen_next_mtp_cuda "${MTP_S:-25}" "$root" --quick
grep -E "FAIL|FATAL|PASSED" "$out/test_qwen_next_mtp_cuda.txt" | head -20 | tee -a "$out/log.txt"
log "done"
exit $rc
