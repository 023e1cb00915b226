#!/usr/bin/env bash
# Session 28 call 3, reduced to the device time left (~4 min; s28f.sh did not get a machine).
# Carry .devwork/s28f.tar.xz. First the tests this session's last changes touch (attend_tc's FP16
# cases and timings, the long-prompt band check, the 2048-slack window ring under MTP / DSpark),
# then DeepSeek 30 layers' prefill in 2048-row chunks with DS4_ATTEND_TC_F16 1 and 0 (per-op
# chunk table), then the rest of the CUDA suite while time is left (220 s in all).
set -u
. bench/device_call_lib.sh
call_start .devwork/s28f.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
for t in test_deepseek_v4_cuda test_deepseek_v4_mtp_cuda test_deepseek_v4_dspark_cuda; do one $t .; done
grep -h "info attend\|FAIL" $OUT/tests.txt | cut -c1-220 | head -8 | tee -a $OUT/summary.txt
timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
for f in 1 0; do
  late 150 && { echo "f16=$f not run (time)" | tee -a $OUT/summary.txt; continue; }
  t0=$(date +%s)
  DS4_ATTEND_TC_F16=$f timeout 60 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --profile --prefill 2048,8192 --prefill-rows 2048 --old-max 0 > $OUT/ds_f16_$f.txt 2>&1
  echo "f16=$f exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/ds_f16_$f.txt | cut -d'|' -f2-4 | tr '\n' ' ') $(grep -E '^\| attend \|' $OUT/ds_f16_$f.txt | head -2 | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
for t in test_cuda_matmul test_grouped_mma_int8 test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda test_deepseek_v4_actq_cuda test_deepseek_v4_fused_quant_cuda test_cuda_ops test_glm5_cuda test_qwen_next_cuda; do
  late 215 && { echo "$t not run (time)" >> $OUT/summary.txt; continue; }
  case $t in test_cuda_*|test_grouped_*) one $t ;; *) one $t . ;; esac
done
cd $OUT && xz -9 tests.txt
