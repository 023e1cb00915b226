#!/usr/bin/env bash
# Session 27 call 2 (~4 min): the BF16-x expert kernel (now the default) compiled for two blocks per
# SM at 4 entries (DS4_GROUPED_MMA_OCC=2: <= 128 registers; call 1's ncu: 2 warps per scheduler,
# latency-bound). test_cuda_matmul (memcmp of every form incl. occ 2), the GLM / Qwen model tests
# with occ 2, bench_cuda_grouped_mma's new "occ 2" column, GLM (160 experts on an H100, 288 on an
# H200; 2048-row chunks) and Qwen (1024-row chunks) prefill with occ 1 / 2 alternating, two reps.
# Carry .devwork/cudabins.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/cudabins.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
E=160; grep -q H200 $OUT/gpu.txt && E=288
one test_cuda_matmul
DS4_GROUPED_MMA_OCC=2 one test_glm5_cuda .
DS4_GROUPED_MMA_OCC=2 one test_qwen_next_cuda .
for rep in 1 2; do
  for o in 1 2; do
    t0=$(date +%s)
    DS4_GROUPED_MMA_OCC=$o timeout 60 $B/bench_glm5_cuda synthetic-full:q2_k:$E 0 2048 --prefill 2048,8192 --old 0 --prefill-rows 2048 > $OUT/glm_o$o.txt 2>&1
    echo "glm $E occ=$o rep $rep exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/glm_o$o.txt | cut -d'|' -f2-4 | tr '\n' ' ') $(grep -E 'experts' $OUT/glm_o$o.txt | head -2 | tr -s ' ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
    t0=$(date +%s)
    DS4_GROUPED_MMA_OCC=$o timeout 90 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048 --prefill-rows=1024 --old-max=0 > $OUT/qwen_o$o.txt 2>&1
    echo "qwen occ=$o rep $rep exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *2048 \|' $OUT/qwen_o$o.txt | tail -1 | cut -d'|' -f2-4) $(grep -E '^\| experts' $OUT/qwen_o$o.txt | head -2 | tr -s ' ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
  done
done
t0=$(date +%s)
timeout 150 $B/bench_cuda_grouped_mma 10 2048 > $OUT/mma.txt 2>&1
echo "bench_cuda_grouped_mma exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
