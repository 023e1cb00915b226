#!/usr/bin/env bash
# Session 19 call 1: main at fee0eef: GLM seq launches (9886571) and the shared conv1d / delta-rule
# kernels (Qwen) never run before; test_gemv_pdl on the Q8_0 split; GLM batch table batch_rows 8 / 16,
# seq launches on / off.
set -u
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s19a.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 60 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -8 | tee -a $OUT/summary.txt; }
one test_glm5_batch_cuda .
one test_glm5_verify_batch_cuda .
one test_glm5_cuda .
one test_glm5_mtp_cuda .
one test_qwen_next_cuda .
one test_qwen_next_batch_cuda .
one test_qwen_next_verify_batch_cuda .
one test_qwen_next_mtp_cuda .
one test_gemv_pdl
t0=$(date +%s)
timeout 300 $B/bench_glm5_cuda synthetic-full 16 2048 --batch 1,4,16 --batch-rows 8,16 --seq-ab > $OUT/glm_batch.txt 2>&1
echo "glm bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
