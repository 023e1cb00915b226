#!/usr/bin/env bash
# Session 23 call 4 (~5 min, guarded): Qwen's QSA attention of tensor-core chunks on tensor cores
# (qsa_tc.cu: test_qwen_decode_kernels_cuda's chunk cases; the prefill with DS4_QSA_TC=1 / 0); Qwen's and GLM's tensor-core chunks with their exact
# products (router logits, indexer inputs) as FP32 cuBLAS GEMMs (matmul_rows_f32; Qwen's new
# CudaModelOptions::fp32_gemms, GLM's mgemv_exact): test_qwen_next_cuda / test_glm5_cuda (item 8:
# the tensor-core chunk's bound vs the CPU model), the 2K prefill profiles again (call 3 ran them
# before this change, same bench and commands). Also test_deepseek_v4_actq_cuda (item 9's
# criterion: no farther from the CPU act model than item 8) and test_cuda_hc_fused (4 rows per
# block again). Carry .devwork/ds23c.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds23c.tar.xz
one test_qwen_decode_kernels_cuda
one test_qwen_next_cuda .
one test_glm5_cuda .
one test_deepseek_v4_actq_cuda .
one test_cuda_hc_fused
late 150 || one test_qwen_next_batch_cuda .
late 170 || one test_qwen_next_verify_batch_cuda .
grep -E "FAIL|FATAL|item 8" $OUT/tests.txt | head -20
late 250 && exit 0
for tc in 1 0; do  # the QSA attention of tensor-core chunks on tensor cores (qsa_tc.cu) or the group kernel
  late 300 && break
  t0=$(date +%s)
  DS4_QSA_TC=$tc timeout 70 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048 --old-max=0 --fp32-ab > $OUT/qwen_prefill_tc$tc.txt 2>&1
  echo "qwen prefill DS4_QSA_TC=$tc exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  grep -E "^\| *2048 \||^\| (moe_in_proj|qsa_in_proj|qsa_attend) " $OUT/qwen_prefill_tc$tc.txt | head -8
done
late 380 && exit 0
t0=$(date +%s)
timeout 100 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048 --old 0 > $OUT/glm_prefill.txt 2>&1
echo "glm prefill exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *2048 \||^\| (mla proj|moe proj)" $OUT/glm_prefill.txt | head -6
