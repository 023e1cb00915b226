#!/usr/bin/env bash
# Session 25 call 8 (~5 min): DeepSeek's served prefill chunks now 1024 rows (prefill_chunk_rows: halved
# while they do not fit), GLM's halving through the same helper: the DeepSeek CUDA tests and test_glm5_cuda;
# then the chunk sizes of the other two families' served defaults (512) against the bench's (Qwen 1024,
# GLM 2048 at 160 experts), 2K / 8K, and DeepSeek 512 / 1024 in one process (30-layer synthetic Flash).
# Carry .devwork/ds25h.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds25h.tar.xz
( timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
for t in test_deepseek_v4_cuda test_deepseek_v4_actq_cuda test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda test_deepseek_v4_mtp_cuda test_deepseek_v4_dspark_cuda; do one $t; done
one test_glm5_cuda .
grep -E "FAIL" $OUT/tests.txt | head
for r in 512 1024; do
  t0=$(date +%s); echo "=== qwen rows $r" >> $OUT/qwen.txt
  timeout 60 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192 --prefill-rows=$r --old-max=0 >> $OUT/qwen.txt 2>&1
  echo "qwen rows $r exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/qwen.txt | tail -2 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
wait
t0=$(date +%s)
timeout 90 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill 2048,8192 --prefill-rows 1024,512 --old-max 0 > $OUT/ds.txt 2>&1
echo "deepseek rows 1024,512 exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(2048|8192) \|" $OUT/ds.txt | cut -c1-150 | tee -a $OUT/summary.txt
late 400 && exit 0
for r in 512 2048; do
  t0=$(date +%s); echo "=== glm rows $r" >> $OUT/glm.txt
  timeout 60 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048,8192 --old 0 --prefill-rows $r >> $OUT/glm.txt 2>&1
  echo "glm rows $r exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/glm.txt | tail -2 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
