#!/usr/bin/env bash
# Session 19 call 13: write_row_shifts (models/cuda_batching.h) shared by the DeepSeek and GLM
# decode batches: their batch and verify-batch tests.
set -u
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s19n.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 120 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -12 | tee -a $OUT/summary.txt; }
one test_deepseek_v4_batch_cuda .
one test_deepseek_v4_verify_batch_cuda .
one test_glm5_batch_cuda .
one test_glm5_verify_batch_cuda .
