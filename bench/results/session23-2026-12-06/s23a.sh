#!/usr/bin/env bash
# Session 23 call 1 (~6 min, guarded): session 22's unrun call 4 (the DeepSeek CUDA tests with
# int8 experts forced on, DS4_INT8_EXPERTS=1, staged int8 expert MMA by default: decides whether
# int8 experts become the default; the 30-layer Flash prefill at 2K / 8K), then one process with
# the decode / chunk per-op profiles and the 16-stream batch step's per-op table on the same
# build. Carry .devwork/ds23.tar.xz (cuda-pack at a223f5e, stripped: the seven DeepSeek CUDA
# tests, test_grouped_mma_int8, bench_deepseek_v4_cuda, ds4-convert; one xz -9e stream).
set -u
mkdir -p /tmp/d && tar -C /tmp/d -xJf .devwork/ds23.tar.xz || exit 3
B=/tmp/d
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
export DS4_INT8_EXPERTS=1
unset DS4_GROUPED_MMA_INT8_STAGED  # staged: the default
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
T0=$(date +%s)
late() { [ $(( $(date +%s) - T0 )) -gt $1 ]; }
one() { local n=$1; shift; local t0=$(date +%s); echo "=== $n" >> $OUT/tests.txt; timeout 90 $B/$n "$@" >> $OUT/tests.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
( timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_deepseek_v4_actq_cuda .
one test_deepseek_v4_cuda .
one test_deepseek_v4_batch_cuda .
one test_deepseek_v4_verify_batch_cuda .
late 120 || one test_deepseek_v4_mtp_cuda .
late 140 || one test_deepseek_v4_fused_quant_cuda
late 150 || one test_grouped_mma_int8
grep -E "FAIL|FATAL" $OUT/tests.txt | head -20
wait
late 200 && exit 0
t0=$(date +%s)
timeout 50 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill 2048,8192 --prefill-rows 1024 --old-max 0 > $OUT/prefill_int8.txt 2>&1
echo "prefill int8 experts exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(2048|8192) \||int8" $OUT/prefill_int8.txt | head -6
late 300 && exit 0
t0=$(date +%s)
timeout 150 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --profile --batch 1,16 --batch-rows 16 --batch-profile > $OUT/profile.txt 2>&1
echo "profile exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^decode|^\| *(1|16) \|" $OUT/profile.txt | head -8
