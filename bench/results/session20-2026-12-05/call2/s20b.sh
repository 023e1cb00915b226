#!/usr/bin/env bash
# Session 20 call 2: ncu on DeepSeek's decode expert products on quantized activations
# (bench_cuda_gemv --act-profile: IQ2_XXS gate|up x6, Q2_K down x6, Q8_0 4096x4096, one launch
# each; cuda preset build, line info), where the IQ2_XXS launch loses its time (~28 % of copy);
# then the --act table for the same shapes' timings in this run.
set -u
mkdir -p /tmp/g && xz -dc .devwork/gemv.xz > /tmp/g/bench_cuda_gemv && chmod +x /tmp/g/bench_cuda_gemv
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" | tee $OUT/summary.txt
t0=$(date +%s)
timeout 300 $NCU --clock-control none --kernel-name regex:gemv_act --launch-count 3 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats \
  --section InstructionStats --section SourceCounters \
  /tmp/g/bench_cuda_gemv --act-profile > $OUT/ncu.txt 2>&1
echo "ncu exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "Memory Throughput|DRAM Throughput|Duration|Warp Cycles Per Issued|Issue Slots Busy|Stall|No Eligible|Achieved Occupancy|Registers Per|Executed Ipc|gemv_act" $OUT/ncu.txt | head -60
t0=$(date +%s)
timeout 120 /tmp/g/bench_cuda_gemv --act 20 > $OUT/act.txt 2>&1
echo "act exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
