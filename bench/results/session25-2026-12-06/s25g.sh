#!/usr/bin/env bash
# Session 25 call 7 (~3 min): (1) ncu of the mHC decode kernel (DeepSeek's MoE hc_post form, 16
# column blocks, F16 fn: 12.25 us a call in call 1) with the warp-state and scheduler sections, to
# see what its ~6.5 us floor waits on; (2) DeepSeek prefill at the served default of 512-row chunks
# vs the bench's 1024 (30-layer synthetic Flash, same process build). Carry .devwork/ds25g.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/ds25g.tar.xz
( timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis"
t0=$(date +%s)
timeout 80 ncu --clock-control none --kernel-name regex:"hc_fused_kernel" --launch-count 2 $S \
  $B/bench_cuda_hc_fused 1 1 4096 4 f16 16 0 > $OUT/ncu.txt 2>&1
echo "ncu hc exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "Duration|Stall|Warp Cycles|Issued|Eligible|Active Warps" $OUT/ncu.txt | head -30
wait
for r in 512 1024; do
  t0=$(date +%s); echo "=== prefill rows $r" >> $OUT/ds.txt
  timeout 80 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill 2048,8192 --prefill-rows $r --old-max 0 >> $OUT/ds.txt 2>&1
  echo "deepseek rows $r exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/ds.txt | tail -2 | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
