#!/usr/bin/env bash
# Session 24 call 7 (~1.5 min): Qwen decode's hc_down with 1, 2 (before) or 4 rows per thread group
# (DS4_HC_DOWN_ROWS; ncu in call 6: 15.5 us per call at 1.2 blocks per SM, 7.7 % achieved occupancy):
# test_qwen_hyper_fused_cuda (fused == the five-launch sequence bit for bit) and the decode at 2K with
# its per-op table for each. Carry .devwork/ds24g.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds24g.tar.xz
for r in 2 1 4; do
  export DS4_HC_DOWN_ROWS=$r
  one test_qwen_hyper_fused_cuda
  echo "=== DS4_HC_DOWN_ROWS=$r" >> $OUT/decode.txt
  timeout 60 $B/bench_qwen_next_cuda synthetic-full 32 2048 --profile >> $OUT/decode.txt 2>&1
  echo "rows $r exit $?: $(grep -E '^\| *2048 \|' $OUT/decode.txt | tail -1 | cut -d'|' -f7,8) hc_read $(grep -E '^\| hc_read ' $OUT/decode.txt | tail -1)" | tee -a $OUT/summary.txt
done
grep -E "FAIL" $OUT/tests.txt | head
