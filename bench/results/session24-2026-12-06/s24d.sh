#!/usr/bin/env bash
# Session 24 call 4 (~5 min, guarded): delta_rule_column with every rounding spelled out (call 3: the
# staged prefill kernel's rows left the single steps), kF16 the models' default: the Qwen / GLM /
# DeepSeek model tests, then Qwen prefill at 1024 / 1344 rows (the H100's admission keeps 1361 of 2048)
# and GLM at 2048 rows, 2K / 8K / 32K, and DeepSeek (30-layer) at 2K / 8K / 32K with 1024-row chunks.
# Carry .devwork/ds24d.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds24d.tar.xz
( timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_qwen_next_cuda .
one test_qwen_next_verify_batch_cuda .
one test_qwen_next_mtp_cuda .
one test_glm5_cuda .
one test_cuda_matmul
one test_deepseek_v4_cuda .
grep -E "FAIL|delta_rule_rows" $OUT/tests.txt | head -12
for r in 1024 1344; do
  t0=$(date +%s); echo "=== qwen rows $r" >> $OUT/qwen.txt
  timeout 80 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=$r --old-max=0 >> $OUT/qwen.txt 2>&1
  echo "qwen rows $r exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/qwen.txt | tail -3 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
grep -E "^\| (gdn_recurrence|gdn_conv_prep|experts_gate_up) " $OUT/qwen.txt | head -4
late 200 && exit 0
t0=$(date +%s); echo "=== glm rows 2048" >> $OUT/glm.txt
timeout 120 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048,8192,32768 --old 0 --prefill-rows 2048 >> $OUT/glm.txt 2>&1
echo "glm rows 2048 exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/glm.txt | tail -3 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
wait
late 380 && exit 0
t0=$(date +%s)
timeout 120 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill 2048,8192,32768 --prefill-rows 1024 --old-max 0 > $OUT/ds.txt 2>&1
echo "deepseek exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/ds.txt | tail -3 | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
