#!/usr/bin/env bash
# Session 24 call 8 (H200 only, ~2 min): issue #22's GLM table at its real 288 experts (the H100 holds 160)
# and Qwen's prefill at 2048-row chunks (the H100's admission keeps 1361; needs kMaxPrefillRows raised to 2048 in
# src/models/qwen_next/cuda/step_layout.h first), 2K / 8K / 32K, this session's
# defaults. Carry .devwork/ds24h.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds24h.tar.xz
t0=$(date +%s)
timeout 60 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=2048 --old-max=0 > $OUT/qwen.txt 2>&1
echo "qwen 2048 rows exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/qwen.txt | tail -3 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 100 $B/bench_glm5_cuda synthetic-full 0 2048 --prefill 2048,8192,32768 --old 0 --prefill-rows 2048 > $OUT/glm.txt 2>&1
echo "glm 288 experts exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/glm.txt | tail -3 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "canary" $OUT/glm.txt $OUT/qwen.txt | cut -c1-200
