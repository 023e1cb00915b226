#!/usr/bin/env bash
# Session 19 call 2: main at fee0eef: the DeepSeek batch / verify / actq tests with the batch_rows 16
# default (706cc4d) and the Q8_0 split; GLM batch table (200 of 288 experts: the full 288 need
# 104 GB, more than an H100) at batch_rows 8 / 16 with seq launches on / off.
set -u
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s19b.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 60 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -8 | tee -a $OUT/summary.txt; }
one test_deepseek_v4_batch_cuda .
one test_deepseek_v4_verify_batch_cuda .
one test_deepseek_v4_actq_cuda .
t0=$(date +%s)
timeout 300 $B/bench_glm5_cuda synthetic-full:q2_k:200 16 2048 --batch 1,4,16 --batch-rows 8,16 --seq-ab > $OUT/glm_batch.txt 2>&1
echo "glm bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
