#!/usr/bin/env bash
# Session 19 call 9 (cuda-pack binaries at HEAD: the tensor-core gemv_act_rows of call 5 with call
# 6's defaults): what no earlier call of the session ran on the final code -- test_gemv_act at the
# final defaults, the DeepSeek actq / DSpark / fused-quant tests, test_admission_cuda -- and GLM's
# batch table (160 of 288 experts: the 288 need 104 GB) at batch_rows 8 / 16, seq launches on / off.
set -u
root=$(pwd)
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s19j.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 120 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -12 | tee -a $OUT/summary.txt; }
one test_gemv_act
one test_deepseek_v4_batch_cuda .
one test_deepseek_v4_verify_batch_cuda .
one test_deepseek_v4_actq_cuda .
one test_deepseek_v4_dspark_cuda .
one test_deepseek_v4_fused_quant_cuda .
one test_admission_cuda "$root"
one test_glm5_batch_cuda .
t0=$(date +%s)
timeout 280 $B/bench_glm5_cuda synthetic-full:q2_k:160 16 2048 --batch 1,4,16 --batch-rows 8,16 --seq-ab > $OUT/glm_batch.txt 2>&1
echo "glm bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(1|4|16) \||batch_rows|seq_launches|FATAL" $OUT/glm_batch.txt | head -30
