#!/usr/bin/env bash
# Session 22 call 2 (model level; ~8 min): 30-layer synthetic DeepSeek V4 Flash (IQ2_XXS experts):
# the decode under each gemv_act decoder and its batch tables with and without the lane tables
# (--act-variants --lt-ab), the prefill at 2K / 8K with BF16 experts, int8 experts
# (DS4_INT8_EXPERTS=1) and int8 staged (+ DS4_GROUPED_MMA_INT8_STAGED=1), per-op tables of a
# 512-row chunk at positions 64 and 9216 (--profile) for BF16 and int8 staged, then the DeepSeek /
# GLM / Qwen batch and model tests on this build. Carry as call 1.
set -u
tar -C /tmp -xJf .devwork/s21c.tar.xz || exit 3
B=/tmp/serve/bin
export LD_LIBRARY_PATH=/tmp/serve/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
T0=$(date +%s)
late() { [ $(( $(date +%s) - T0 )) -gt $1 ]; }
one() { local n=$1; shift; local t0=$(date +%s); echo "=== $n" >> $OUT/tests.txt; timeout 120 $B/$n "$@" >> $OUT/tests.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
t0=$(date +%s)
timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1
echo "convert exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 110 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --act-variants --batch 1,16 --batch-steps 8 --batch-rows 8,16 --lt-ab > $OUT/flash30.txt 2>&1
echo "flash30 exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(1|16) \||lane tables|default \(4" $OUT/flash30.txt | head -20
for v in "0 0 --profile" "1 0" "1 1 --profile"; do
  set -- $v
  late 360 && break
  t0=$(date +%s)
  DS4_INT8_EXPERTS=$1 DS4_GROUPED_MMA_INT8_STAGED=$2 timeout 90 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill 2048,8192 --prefill-rows 1024 --old-max 0 ${3:-} > $OUT/prefill_i8_$1_st_$2.txt 2>&1
  echo "prefill int8_experts=$1 staged=$2 exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  grep -E "^\| *(2048|8192) \|" $OUT/prefill_i8_$1_st_$2.txt | head -4
done
for t in test_deepseek_v4_batch_cuda test_deepseek_v4_cuda test_glm5_batch_cuda test_qwen_next_batch_cuda test_glm5_cuda test_qwen_next_cuda; do
  late 440 && break
  one $t .
done
grep -E "FAIL|FATAL" $OUT/tests.txt | head -20
