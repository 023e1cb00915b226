#!/usr/bin/env bash
# Session 25 call 4 (H200, ~3 min): issue #22 / #23's GLM figures at the real 288 experts with this
# session's kernels (bundle ds25c): decode with its per-op table at 2K, prefill 2K / 8K / 32K in
# 2048-row chunks. Carry .devwork/ds25c.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/ds25c.tar.xz
t0=$(date +%s)
timeout 100 $B/bench_glm5_cuda synthetic-full 16 2048 --profile > $OUT/glm_decode.txt 2>&1
echo "glm 288 decode exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *2048 \|' $OUT/glm_decode.txt | tail -1)" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 150 $B/bench_glm5_cuda synthetic-full 0 2048 --prefill 2048,8192,32768 --old 0 --prefill-rows 2048 > $OUT/glm_prefill.txt 2>&1
echo "glm 288 prefill exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/glm_prefill.txt | tail -3 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "canary" $OUT/glm_prefill.txt | cut -c1-200 | head -3
