#!/usr/bin/env bash
# Session 18 call 1: 301c9e0 (seq launches) batch test first, then the 30-layer Flash A/B, then the rest.
set -u
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s18a.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$B/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 100 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -8 | tee -a $OUT/summary.txt; }
one test_deepseek_v4_batch_cuda .
t0=$(date +%s)
timeout 120 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1
echo "convert exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 240 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --batch 1,4,16,64 --batch-steps 8 --batch-rows 16 --batch-profile --seq-ab > $OUT/flash30.txt 2>&1
echo "bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
rm -f /dev/shm/f.gguf
one test_deepseek_v4_verify_batch_cuda .
one test_cuda_ops
one test_deepseek_v4_cuda .
one test_glm5_batch_cuda .
one test_qwen_next_batch_cuda .
one test_qwen_next_cuda .
