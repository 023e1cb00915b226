#!/usr/bin/env bash
# Session 24 call 3 (~6 min, guarded): the row-parallel conv1d chunk kernel (test_cuda_ops, the Qwen chunk = steps
# tests) and the staged delta-rule prefill kernel (test_qwen_next_cuda item 9, test_glm5_cuda's KDA chunks); kF16 with each weight tile's scale measured once (kept per
# workspace), at the chunk sizes the server takes (Qwen 1024, now up to 2048; GLM 2048; DeepSeek 1024):
# test_cuda_matmul, bench_cuda_matmul_rows, then Qwen / GLM / DeepSeek (30-layer) prefill with
# DS4_MATMUL_F16=0 and 1. Carry .devwork/ds24c.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds24c.tar.xz
( timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_cuda_matmul
one test_cuda_ops
one test_qwen_next_cuda .
one test_qwen_next_verify_batch_cuda .
one test_glm5_cuda .
grep -E "FAIL|conv1d|delta_rule_rows" $OUT/tests.txt | head -12
for n in 512 1024; do
  timeout 60 $B/bench_cuda_matmul_rows $n 10 >> $OUT/matmul.txt 2>&1; echo "matmul rows $n exit $?" | tee -a $OUT/summary.txt
done
grep -E "^\| (Qwen|DeepSeek|GLM)" $OUT/matmul.txt | cut -d'|' -f2,4,7,8,9,10,13 | head -12
for r in 1024 2048; do for f in 0 1; do
  t0=$(date +%s); echo "=== qwen rows $r DS4_MATMUL_F16=$f" >> $OUT/qwen.txt
  DS4_MATMUL_F16=$f timeout 60 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192 --prefill-rows=$r --old-max=0 >> $OUT/qwen.txt 2>&1
  echo "qwen rows $r f16 $f exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/qwen.txt | tail -2 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
done; done
late 250 && exit 0
for r in 1024 2048; do for f in 0 1; do
  t0=$(date +%s); echo "=== glm rows $r DS4_MATMUL_F16=$f" >> $OUT/glm.txt
  DS4_MATMUL_F16=$f timeout 60 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048 --old 0 --prefill-rows $r >> $OUT/glm.txt 2>&1
  echo "glm rows $r f16 $f exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *2048 \|' $OUT/glm.txt | tail -1 | cut -d'|' -f2,4)" | tee -a $OUT/summary.txt
done; done
wait
late 420 && exit 0
for f in 0 1; do
  t0=$(date +%s); echo "=== deepseek DS4_MATMUL_F16=$f" >> $OUT/ds.txt
  DS4_MATMUL_F16=$f timeout 70 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill 2048,8192 --prefill-rows 1024 --old-max 0 >> $OUT/ds.txt 2>&1
  echo "deepseek f16 $f exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/ds.txt | tail -2 | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
