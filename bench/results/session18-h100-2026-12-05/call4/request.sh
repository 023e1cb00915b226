#!/usr/bin/env bash
# Session 18 call 3: Q8_0 gemv_act_rows over 9..16 rows as two 8-input launches (gemv_act_set_q8_split):
# exactness (kernel + the three models' batch tests), the kernel table, the 30-layer Flash A/B.
set -u
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s18c.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 60 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -8 | tee -a $OUT/summary.txt; }
( timeout 90 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_gemv_act
one test_deepseek_v4_batch_cuda .
timeout 30 $B/bench_cuda_gemv --act-mma 10 > $OUT/act_mma.txt 2>&1; echo "act-mma exit $?" | tee -a $OUT/summary.txt
wait
t0=$(date +%s)
timeout 150 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --batch 16 --batch-steps 8 --batch-rows 16 --batch-profile --split-ab > $OUT/flash30_split.txt 2>&1
echo "bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
