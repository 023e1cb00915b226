#!/usr/bin/env bash
# Session 24 call 2 (~9 min, guarded): the dequant kernel's coalesced stores and MatmulPrecision::kF16
# (power-of-two scaled FP16 operands, DS4_MATMUL_F16=1): test_cuda_matmul, bench_cuda_matmul_rows,
# then Qwen / GLM 2K prefill with kF16 off and on (same process build, same machine), the model tests
# with kF16 (their tensor-core items vs the CPU model), and ncu on Qwen's decode hc_read kernels.
# Carry .devwork/ds24b.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds24b.tar.xz
one test_cuda_matmul
grep -E "FAIL|f16" $OUT/tests.txt | head -30
for n in 512 1024; do
  timeout 60 $B/bench_cuda_matmul_rows $n 10 >> $OUT/matmul.txt 2>&1; echo "matmul rows $n exit $?" | tee -a $OUT/summary.txt
done
cat $OUT/matmul.txt
for f in 0 1; do
  t0=$(date +%s)
  DS4_MATMUL_F16=$f timeout 70 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048 --old-max=0 > $OUT/qwen_prefill_f16_$f.txt 2>&1
  echo "qwen prefill DS4_MATMUL_F16=$f exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  grep -E "^\| *2048 \|" $OUT/qwen_prefill_f16_$f.txt | head -2
done
late 300 && exit 0
for f in 0 1; do
  t0=$(date +%s)
  DS4_MATMUL_F16=$f timeout 80 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048 --old 0 > $OUT/glm_prefill_f16_$f.txt 2>&1
  echo "glm prefill DS4_MATMUL_F16=$f exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  grep -E "^\| *2048 \|" $OUT/glm_prefill_f16_$f.txt | head -2
done
export DS4_MATMUL_F16=1
late 400 || one test_qwen_next_cuda .
late 430 || one test_glm5_cuda .
late 460 || one test_deepseek_v4_cuda .
grep -E "FAIL|FATAL" $OUT/tests.txt | head -10
unset DS4_MATMUL_F16
late 500 && exit 0
t0=$(date +%s)
timeout 90 ncu --clock-control none --kernel-name regex:"hc_down|hc_up_combine" --launch-skip 400 --launch-count 4 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
  $B/bench_qwen_next_cuda synthetic-full 8 2048 > $OUT/ncu_hc.txt 2>&1
echo "ncu exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "Duration|Memory Throughput|Achieved Occupancy|hc_" $OUT/ncu_hc.txt | head -20
