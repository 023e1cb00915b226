#!/usr/bin/env bash
# Session 25 call 6 (H200, ~2 min): issue #22 / #23's Qwen figures (full-size synthetic): decode with its
# per-op table at 2K, prefill 2K / 8K / 32K in 1024-row chunks. Carry .devwork/ds25f.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/ds25f.tar.xz
t0=$(date +%s)
timeout 100 $B/bench_qwen_next_cuda synthetic-full 32 2048 --profile > $OUT/qwen_decode.txt 2>&1
echo "qwen decode exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *2048 \|' $OUT/qwen_decode.txt | tail -1)" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 120 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=1024 --old-max=0 > $OUT/qwen_prefill.txt 2>&1
echo "qwen prefill exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/qwen_prefill.txt | tail -3 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "canary" $OUT/qwen_prefill.txt | cut -c1-200 | head -2
