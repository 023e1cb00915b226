#!/usr/bin/env bash
# Session 27 call 1 (~8 min): session 26's unrun work. (1) grouped_mma_bf16_x16 (BF16 x rows through
# a cp.async ring): test_cuda_matmul's memcmp against the FP32-x kernel, the GLM / Qwen model tests with
# DS4_GROUPED_MMA_X16=1 (chunk rows vs decode steps), bench_cuda_grouped_mma's "auto with BF16 x"
# column, and the GLM / Qwen prefill A/B with and without it (same process image, alternating, two
# reps each). (2) The batch / verify-batch / MTP tests and the wide-rank hc test no GPU ran at session
# 26's final code. Carry .devwork/cudabins.tar.xz (PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build).
set -u
. bench/device_call_lib.sh
call_start .devwork/cudabins.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
E=160; grep -q H200 $OUT/gpu.txt && E=288
one test_cuda_matmul
DS4_GROUPED_MMA_X16=1 one test_glm5_cuda .
DS4_GROUPED_MMA_X16=1 one test_qwen_next_cuda .
for rep in 1 2; do
  for x in 0 1; do
    t0=$(date +%s)
    DS4_GROUPED_MMA_X16=$x timeout 60 $B/bench_glm5_cuda synthetic-full:q2_k:$E 0 2048 --prefill 2048,8192 --old 0 --prefill-rows 2048 > $OUT/glm_x$x.txt 2>&1
    echo "glm $E x16=$x rep $rep exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/glm_x$x.txt | cut -d'|' -f2-4 | tr '\n' ' ') $(grep -E '^\| (routed_experts|experts)' $OUT/glm_x$x.txt | head -2 | tr -s ' ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
    t0=$(date +%s)
    DS4_GROUPED_MMA_X16=$x timeout 90 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048 --prefill-rows=1024 --old-max=0 > $OUT/qwen_x$x.txt 2>&1
    echo "qwen x16=$x rep $rep exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *2048 \|' $OUT/qwen_x$x.txt | tail -1 | cut -d'|' -f2-4) $(grep -E '^\| experts' $OUT/qwen_x$x.txt | head -2 | tr -s ' ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
  done
done
t0=$(date +%s)
timeout 150 $B/bench_cuda_grouped_mma 10 2048 > $OUT/mma.txt 2>&1
echo "bench_cuda_grouped_mma exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
for t in test_qwen_hyper_fused_cuda test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda test_glm5_batch_cuda \
         test_glm5_verify_batch_cuda test_deepseek_v4_mtp_cuda test_glm5_mtp_cuda; do
  late 520 && { echo "$t not run (time)" | tee -a $OUT/summary.txt; continue; }
  case $t in test_qwen_hyper_fused_cuda) one $t ;; *) one $t . ;; esac
done
# ncu of the routed-expert MMA kernels at GLM's gate|up shape (Q2_K 4096x4096, 288 experts, 2048-token
# chunk: 57 rows per expert, G = 4): occupancy, warp stall reasons, memory throughput of the FP32-x,
# x-ring and BF16-x forms (the bench's launches in its order: auto, G=1, G=2, G=4, ring, x16).
late 540 && exit 0
t0=$(date +%s)
DS4_BENCH_CASE="GLM 5.x Flash gate" DS4_BENCH_TOKENS=2048 timeout $(( 590 - ($(date +%s) - T0) )) ncu --kernel-name regex:grouped_mma_kernel \
  --launch-count 24 --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis $B/bench_cuda_grouped_mma 3 2048 > $OUT/ncu_mma.txt 2>&1
echo "ncu mma exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
xz -9 $OUT/ncu_mma.txt
