#!/usr/bin/env bash
# Session 24 call 6 (~5 min, guarded): the DeepSeek MTP / DSpark / batch / verify-batch and admission tests
# with kF16 the default; ncu (hardware counters, --clock-control none) on the decode hyper-connection
# kernels (Qwen hc_down / hc_up_combine: hc_read is 26 % of a Qwen decode token; DeepSeek hc_fused_kernel
# 15 %) and the DeepSeek chunk's hc_products / hc_tail kernels, on small synthetic models; then the
# 30-layer Flash prefill 2K / 8K / 32K and decode with this session's defaults.
# Carry .devwork/ds24f.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds24f.tar.xz
( timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash_6_layers.json /dev/shm/f6.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert 6 exit $?" >> $OUT/summary.txt
  timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes >> $OUT/convert.txt 2>&1; echo "convert 30 exit $?" >> $OUT/summary.txt ) &
one test_deepseek_v4_mtp_cuda .
one test_deepseek_v4_dspark_cuda .
one test_deepseek_v4_batch_cuda .
one test_deepseek_v4_verify_batch_cuda .
one test_admission_cuda .
grep -E "FAIL|FATAL" $OUT/tests.txt | head -10
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis"
t0=$(date +%s)
timeout 80 ncu --clock-control none --kernel-name regex:"hc_down_kernel|hc_up_combine_kernel" --launch-count 4 $S \
  $B/bench_qwen_next_cuda synthetic-full:64:4 4 2048 > $OUT/ncu.txt 2>&1
echo "ncu qwen exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^  [a-z_]+kernel|Duration|Memory Throughput|Achieved Occupancy|Registers Per" $OUT/ncu.txt | head -24
while [ ! -s /dev/shm/f6.gguf ] || ! grep -q "convert 6" $OUT/summary.txt; do sleep 2; late 200 && break; done
t0=$(date +%s)
timeout 60 ncu --clock-control none --kernel-name regex:"hc_fused_kernel" --launch-skip 20 --launch-count 3 $S \
  $B/bench_deepseek_v4_cuda /dev/shm/f6.gguf 64 4 >> $OUT/ncu.txt 2>&1
echo "ncu deepseek decode exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 60 ncu --clock-control none --kernel-name regex:"hc_products_kernel|hc_tail_kernel" --launch-skip 4 --launch-count 4 $S \
  $B/bench_deepseek_v4_cuda /dev/shm/f6.gguf 64 4 --prefill 1024 --prefill-rows 512 --old-max 0 >> $OUT/ncu.txt 2>&1
echo "ncu deepseek chunk exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^  [a-z_]+kernel|Duration|Memory Throughput" $OUT/ncu.txt | tail -18
rm -f /dev/shm/f6.gguf
wait
late 330 && exit 0
t0=$(date +%s)
timeout 150 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --prefill 2048,8192,32768 --prefill-rows 1024 --old-max 0 > $OUT/ds.txt 2>&1
echo "deepseek exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/ds.txt | tail -3 | cut -d'|' -f2-4 | tr '\n' ' ') $(grep -E '^decode:' $OUT/ds.txt)" | tee -a $OUT/summary.txt
