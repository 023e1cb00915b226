#!/usr/bin/env bash
# Session 23 call 3 (~8 min, guarded): test_grouped_mma_int8 (two Q8_K planes: grouped_mma_int8_planes,
# quantize_act_planes) and bench_cuda_grouped_mma 5 1024 (its int8 table has the planes column); then int8 dense products in DeepSeek's tensor-core chunks
# (CudaModelOptions::int8_dense / DS4_INT8_DENSE, grouped_mma_int8_dense). test_deepseek_v4_actq_cuda
# (item 9: the int8-dense chunk vs the CPU act model within the tensor-core criterion) and the other
# DeepSeek CUDA tests with DS4_INT8_DENSE=1 (whether it can be the default), then the 30-layer
# Flash prefill at 2K / 8K in 1024-row chunks with DS4_INT8_DENSE=0 and =1 (one process each, same
# machine), each with --profile (per-op table of a 512-row chunk after the 8K prefill).
# hc_fused.cu at 8 rows per products block (was 4): test_cuda_hc_fused, the per-op hc_pre rows.
# Then GLM and Qwen prefill profiles (below). Carry .devwork/ds23b.tar.xz (cuda-pack, stripped: test_cuda_hc_fused, six DeepSeek CUDA tests, bench_glm5_cuda, bench_qwen_next_cuda, bench_deepseek_v4_cuda,
# ds4-convert; one xz -9e stream).
set -u
mkdir -p /tmp/d && tar -C /tmp/d -xJf .devwork/ds23b.tar.xz || exit 3
B=/tmp/d
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
T0=$(date +%s)
late() { [ $(( $(date +%s) - T0 )) -gt $1 ]; }
one() { local n=$1; shift; local t0=$(date +%s); echo "=== $n" >> $OUT/tests.txt; timeout 90 $B/$n "$@" >> $OUT/tests.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
[ -s /dev/shm/f.gguf ] || ( timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_grouped_mma_int8
one test_cuda_hc_fused
one test_deepseek_v4_actq_cuda .
export DS4_INT8_DENSE=1
one test_deepseek_v4_cuda .
one test_deepseek_v4_mtp_cuda .
one test_deepseek_v4_dspark_cuda .
one test_deepseek_v4_verify_batch_cuda .
late 100 || one test_deepseek_v4_batch_cuda .
grep -E "FAIL|FATAL|int8 dense|item 9" $OUT/tests.txt | head -20
late 150 || { t0=$(date +%s); timeout 100 $B/bench_cuda_grouped_mma 5 1024 > $OUT/grouped.txt 2>&1; echo "grouped bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
grep -A12 "^grouped_mma_int8 (quantized" $OUT/grouped.txt | grep -E "GLM|DeepSeek" | cut -c1-60,200-400 | head -8
wait
for d in 0 1; do
  late 300 && exit 0
  t0=$(date +%s)
  DS4_INT8_DENSE=$d timeout 110 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill 2048,8192 --prefill-rows 1024 --old-max 0 --profile > $OUT/prefill_dense$d.txt 2>&1
  echo "prefill DS4_INT8_DENSE=$d exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  grep -E "^\| *(2048|8192) \||^\| (attn_out|attn_q|attn_in_proj|moe_in_proj|shared_expert|experts_gate_up|total) " $OUT/prefill_dense$d.txt | head -24
done
# GLM 5.x Flash (160 of 288 Q2_K experts, 45 layers: what fits the H100) and Qwen3.8 Flash Next
# full-size synthetic prefill at 2K on tensor cores with one 512-row chunk's per-op profile (their
# first measurement since session 9; decode_tokens 0 skips the context tables).
unset DS4_INT8_DENSE
rm -f /dev/shm/f.gguf
late 440 && exit 0
t0=$(date +%s)
timeout 100 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048 --old 0 > $OUT/glm_prefill.txt 2>&1
echo "glm prefill exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *2048 \|" $OUT/glm_prefill.txt | head -4
late 500 && exit 0
t0=$(date +%s)
timeout 70 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048 --old-max=0 > $OUT/qwen_prefill.txt 2>&1
echo "qwen prefill exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *2048 \|" $OUT/qwen_prefill.txt | head -4
