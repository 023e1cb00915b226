#!/usr/bin/env bash
# Session 22 call 1 (kernels; <= ~7 min, guarded): the int8 expert MMA with weights staged through shared
# memory (test_grouped_mma_int8: == dot_act bit for bit, staged and not; bench_cuda_grouped_mma:
# staged vs unstaged vs BF16; ncu on one launch of each of the three kernels), then session 21's
# lane-table IQ2_XXS decoder / Q2_K aligned loads (test_gemv_act, the --act sweep, the routed
# decode-batch table with and without them) and session 20's gemv_rows decode-once (test_cuda_ops).
# Carry: .devwork/s21c.tar.xz (EXTRA="test_gemv_act test_cuda_ops bench_cuda_gemv ds4-convert
# test_deepseek_v4_batch_cuda test_deepseek_v4_cuda test_glm5_batch_cuda test_qwen_next_batch_cuda
# test_glm5_cuda test_qwen_next_cuda" tools/device/make_bundle.sh build/cuda-pack/bin/bench_deepseek_v4_cuda)
# and .devwork/gm.tar.xz (cuda-pack bench_cuda_grouped_mma + test_grouped_mma_int8, stripped).
set -u
tar -C /tmp -xJf .devwork/s21c.tar.xz || exit 3
mkdir -p /tmp/g && tar -C /tmp/g -xJf .devwork/gm.tar.xz || exit 3
B=/tmp/serve/bin
export LD_LIBRARY_PATH=/tmp/serve/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
T0=$(date +%s)
late() { [ $(( $(date +%s) - T0 )) -gt $1 ]; }
one() { local b=$1 n=$2; shift 2; local t0=$(date +%s); echo "=== $n" >> $OUT/tests.txt; timeout 120 $b/$n "$@" >> $OUT/tests.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
one /tmp/g test_grouped_mma_int8
t0=$(date +%s)
timeout 90 /tmp/g/bench_cuda_grouped_mma 5 1024 > $OUT/grouped.txt 2>&1
echo "grouped exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -A14 "^grouped_mma_int8 " $OUT/grouped.txt | cut -c1-400
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
for k in grouped_mma_int8_staged_kernel grouped_mma_int8_kernel; do
  late 200 && break
  t0=$(date +%s)
  timeout 45 $NCU --clock-control none --kernel-name regex:$k --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats \
    --section InstructionStats /tmp/g/bench_cuda_grouped_mma 3 512 > $OUT/ncu_$k.txt 2>&1
  echo "ncu $k exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  grep -E "Duration|Memory Throughput|DRAM Throughput|L1/TEX Hit|Issue Slots Busy|Warp Cycles Per Issued|Achieved Occupancy|Registers Per" $OUT/ncu_$k.txt | head -12
done
one $B test_gemv_act
one $B test_cuda_ops
grep -E "FAIL|FATAL" $OUT/tests.txt | head -20
if ! late 320; then
  t0=$(date +%s)
  timeout 70 $B/bench_cuda_gemv --act 5 > $OUT/act.txt 2>&1
  echo "act exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
fi
for lt in "" "--lane-tables --q2k-aligned"; do
  late 390 && break
  t0=$(date +%s)
  timeout 35 $B/bench_cuda_gemv --routed 5 $lt > "$OUT/routed${lt:+_lt}.txt" 2>&1
  echo "routed $lt exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
done
