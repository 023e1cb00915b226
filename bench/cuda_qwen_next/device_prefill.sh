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
# shellcheck source=../device_lib.sh
. "$(dirname "$0")/../device_lib.sh"
grep_pat="FAIL|FATAL|tensor cores|delta_rule_rows|300|PASSED" device_run test_qwen_next_cuda "${TEST_S:-50}" "$root"
args="synthetic-full --prefill=${LENGTHS:-2048,8192,32768} --old-max=${OLD_MAX:-2048} --prefill-rows=${ROWS:-512}"
[ "${EXACT_MAX:-0}" -gt 0 ] && args="$args --exact-max=$EXACT_MAX"
# shellcheck disable=SC2086
grep_pat="FAIL|FATAL" device_run bench_qwen_next_cuda "${BENCH_S:-100}" $args
grep -vE "^\s*$" "$out/bench_qwen_next_cuda.txt" | tee -a "$out/log.txt" | tail -60
grep_pat="FAIL|FATAL|PASSED" device_run test_qwen_next_mtp_cuda "${MTP_S:-25}" "$root" --quick
log "done"
exit $rc
