#!/usr/bin/env bash
# Session 20 call 4: GLM and Qwen served with tensor-core prefill chunks from 17 rows
# (kServedTensorCoreRows; 64 before): their prefill tables per prompt length (old 16-row path vs
# the tensor-core path at the new default), and the GLM / Qwen / DeepSeek model, MTP, batch and
# verify-batch tests plus test_admission_cuda on this build (every test's log in tests.txt).
set -u
tar -C /tmp -xJf .devwork/serve.tar.xz || exit 3
B=/tmp/serve/bin
export LD_LIBRARY_PATH=/tmp/serve/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); echo "=== $n" >> $OUT/tests.txt; timeout 150 $B/$n "$@" >> $OUT/tests.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
L=17,24,32,48,64,128,512
t0=$(date +%s)
timeout 150 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill $L --old 17,32,48 > $OUT/glm_prefill.txt 2>&1
echo "glm exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 150 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=$L --old-max=48 > $OUT/qwen_prefill.txt 2>&1
echo "qwen exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
one test_glm5_cuda .
one test_glm5_mtp_cuda .
one test_glm5_batch_cuda .
one test_qwen_next_cuda .
one test_qwen_next_mtp_cuda .
one test_qwen_next_batch_cuda .
one test_qwen_next_verify_batch_cuda .
one test_deepseek_v4_cuda .
one test_admission_cuda .
grep -E "FAIL|FATAL" $OUT/tests.txt | head -20
grep -E "^\| *[0-9]+ \|" $OUT/glm_prefill.txt $OUT/qwen_prefill.txt | head -40
