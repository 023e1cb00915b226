#!/usr/bin/env bash
# Session 26 call 3 (~2 min): call 2's hyper-connection read with hc_up_combine at 256 threads x 3
# blocks per SM (call 2's 512-thread blocks ran the 320 blocks in 3 waves) and the opt-in above 46 KB
# of dynamic shared memory (DS4_HC_DOWN_ROWS=2 failed its launch at exactly 48 KB). Per-kernel
# device times (ncu, first 14 launches of test_qwen_hyper_fused_cuda: the full-size MLX q4 case) of
# old (14b237b) and new, then the decode A/B as in call 2. Carry .devwork/s26c.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/s26c.tar.xz
for r in 4 2 1; do DS4_HC_DOWN_ROWS=$r one test_qwen_hyper_fused_cuda; done
for v in old new; do
  t=$B/test_qwen_hyper_fused_cuda; [ $v = old ] && t=$B/old/test_qwen_hyper_fused_cuda
  for r in 4 2; do
    echo "=== ncu $v DS4_HC_DOWN_ROWS=$r" >> $OUT/ncu.txt
    DS4_HC_DOWN_ROWS=$r timeout 90 ncu --clock-control none --launch-count 14 --metrics gpu__time_duration.sum $t >> $OUT/ncu.txt 2>&1
    echo "ncu $v $r exit $?: $(grep -E '^  [a-z_]+.*\(|gpu__time_duration' $OUT/ncu.txt | tail -28 | grep -E 'hc_down|hc_up' -A1 | grep -E 'duration' | awk '{print $NF}' | head -4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
  done
done
for rep in 1 2; do
  for v in old 4 2; do
    b=$B/new/bench_qwen_next_cuda; [ $v = old ] && b=$B/old/bench_qwen_next_cuda
    echo "=== $v rep $rep" >> $OUT/decode.txt
    DS4_HC_DOWN_ROWS=$([ $v = old ] && echo 4 || echo $v) timeout 60 $b synthetic-full 32 2048 --profile >> $OUT/decode.txt 2>&1
    echo "$v rep $rep exit $?: $(grep -E '^\| *2048 \|' $OUT/decode.txt | tail -1 | cut -d'|' -f7,8) hc_read $(grep -E '^\| hc_read ' $OUT/decode.txt | tail -1)" | tee -a $OUT/summary.txt
  done
done
