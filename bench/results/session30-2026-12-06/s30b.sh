#!/usr/bin/env bash
# Session 30's call 2 (~9 min; session 29's s29c.sh, unrun there): issue #22 / #23's GLM (288 experts) and Qwen figures at this
# session's defaults (GLM's FP16 MLA attend), as session 28's s28c.sh: decode at 2K with the per-op
# table, prefill 2K / 8K / 32K (GLM in 2048-row chunks, Qwen in QROWS, default 2048: an H200 admits
# them). Carry .devwork/s30a.tar.xz.
set -u
QROWS=${QROWS:-2048}
. bench/device_call_lib.sh
call_start .devwork/s30a.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
step() {  # name, timeout, grep pattern, command...
  local n=$1 to=$2 pat=$3 t0=$(date +%s) left; shift 3
  left=$(( 585 - $(date +%s) + T0 ))
  [ $left -lt 30 ] && { echo "$n not run (time)" | tee -a $OUT/summary.txt; return; }
  [ $to -gt $left ] && to=$left
  timeout $to "$@" > $OUT/$n.txt 2>&1
  echo "$n exit $? in $(( $(date +%s) - t0 )) s: $(grep -E "$pat" $OUT/$n.txt | cut -d'|' -f2-6 | tr '\n' ' ')" | tee -a $OUT/summary.txt
  grep -E "canary" $OUT/$n.txt | cut -c1-200 | head -2 >> $OUT/summary.txt
}
step glm_prefill 150 '^\| *(2048|8192|32768) \|' $B/bench_glm5_cuda synthetic-full 0 2048 --prefill 2048,8192,32768 --old 0 --prefill-rows 2048
step qwen_prefill 120 '^\| *(2048|8192|32768) \|' $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=$QROWS --old-max=0
step glm_decode 100 '^\| *2048 \|' $B/bench_glm5_cuda synthetic-full 16 2048 --profile
step qwen_decode 90 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048 --profile
# Qwen's QSA attention in 4-row blocks (DS4_QSA_TC_ROWS=1, unrun before this session) against the
# default rows above, if time is left (test_qwen_decode_kernels_cuda checks its values in call 1).
DS4_QSA_TC_ROWS=1 step qwen_prefill_rows 60 '^\| *(2048|8192) \|' $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192 --prefill-rows=$QROWS --old-max=0
