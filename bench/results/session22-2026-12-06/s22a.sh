#!/usr/bin/env bash
# Session 22 call 1 = session 21's call 3 (its bundle rebuilt at 3a44b73) plus the DeepSeek
# prefill with and without DS4_INT8_EXPERTS=1 (grouped_mma_int8 for a chunk's experts; opt-in,
# never measured in a prefill), and ncu on one launch each of grouped_mma_bf16 / grouped_mma_int8
# (DeepSeek gate|up IQ2_XXS, 512-row chunk; .devwork/gm.xz = cuda preset bench_cuda_grouped_mma,
# line info): what holds a K tile at ~2 us. Session 21's call 3: the lane-table
# IQ2_XXS decoder and Q2_K aligned loads (test_gemv_act bit for bit against the other decoders;
# the --act sweep; the routed decode-batch table with and without them; the 30-layer Flash
# decode under each decoder and its batch tables with --lt-ab), session 20's gemv_rows
# decode-once (test_cuda_ops) and the DeepSeek / GLM / Qwen batch and model tests on this build.
# Carry: .devwork/s21c.tar.xz (EXTRA="test_gemv_act test_cuda_ops bench_cuda_gemv ds4-convert
# test_deepseek_v4_batch_cuda test_deepseek_v4_cuda test_glm5_batch_cuda test_qwen_next_batch_cuda
# test_glm5_cuda test_qwen_next_cuda" tools/device/make_bundle.sh build/cuda-pack/bin/bench_deepseek_v4_cuda).
set -u
tar -C /tmp -xJf .devwork/s21c.tar.xz || exit 3
B=/tmp/serve/bin
export LD_LIBRARY_PATH=/tmp/serve/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
T0=$(date +%s)
late() { [ $(( $(date +%s) - T0 )) -gt $1 ]; }
one() { local n=$1; shift; local t0=$(date +%s); echo "=== $n" >> $OUT/tests.txt; timeout 120 $B/$n "$@" >> $OUT/tests.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
( timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_gemv_act
one test_cuda_ops
grep -E "FAIL|FATAL" $OUT/tests.txt | head -20
t0=$(date +%s)
timeout 90 $B/bench_cuda_gemv --act 5 > $OUT/act.txt 2>&1
echo "act exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
for lt in "" "--lane-tables --q2k-aligned"; do
  t0=$(date +%s)
  timeout 40 $B/bench_cuda_gemv --routed 5 $lt > "$OUT/routed${lt:+_lt}.txt" 2>&1
  echo "routed $lt exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
done
wait
t0=$(date +%s)
timeout 110 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --act-variants --batch 1,16 --batch-steps 8 --batch-rows 8,16 --lt-ab > $OUT/flash30.txt 2>&1
echo "flash30 exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(1|16) \||lane tables|default \(4" $OUT/flash30.txt | head -20
for i8 in 0 1; do
  late 300 && break
  t0=$(date +%s)
  DS4_INT8_EXPERTS=$i8 timeout 70 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill 2048,8192 --prefill-rows 1024 --old-max 0 > $OUT/prefill_int8_$i8.txt 2>&1
  echo "prefill int8_experts=$i8 exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  grep -E "^\| *(2048|8192) \|" $OUT/prefill_int8_$i8.txt | head -6
done
if ! late 330; then
  mkdir -p /tmp/g && xz -dc .devwork/gm.xz > /tmp/g/bench_cuda_grouped_mma && chmod +x /tmp/g/bench_cuda_grouped_mma
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
  for k in grouped_mma_kernel grouped_mma_int8_kernel; do
    t0=$(date +%s)
    timeout 60 $NCU --clock-control none --kernel-name regex:$k --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
      --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats \
      --section InstructionStats --section SourceCounters \
      /tmp/g/bench_cuda_grouped_mma 3 512 > $OUT/ncu_$k.txt 2>&1
    echo "ncu $k exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  done
fi
for t in test_deepseek_v4_batch_cuda test_deepseek_v4_cuda test_glm5_batch_cuda test_qwen_next_batch_cuda test_glm5_cuda test_qwen_next_cuda; do
  late 420 && break
  one $t .
done
grep -E "FAIL|FATAL" $OUT/tests.txt | head -20
