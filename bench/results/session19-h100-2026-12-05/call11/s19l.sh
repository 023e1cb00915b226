#!/usr/bin/env bash
# Session 19 call 11: the tensor-core gemv_act_rows without the input-rows-8..15 pairs when n <= 8
# (kUpper): exactness (test_gemv_act, DeepSeek batch / verify-batch), the kernel table, the
# 30-layer Flash batch table at 1 / 4 / 8 / 16 streams, tensor cores vs dp4a.
set -u
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s19l.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 120 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -12 | tee -a $OUT/summary.txt; }
( timeout 90 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_gemv_act
one test_deepseek_v4_batch_cuda .
one test_deepseek_v4_verify_batch_cuda .
timeout 60 $B/bench_cuda_gemv --rows-mma 20 > $OUT/rows_mma.txt 2>&1; echo "rows-mma exit $?" | tee -a $OUT/summary.txt; tail -7 $OUT/rows_mma.txt
wait
t0=$(date +%s)
timeout 200 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --batch 1,4,8,16 --batch-steps 8 --batch-rows 16 --mma-ab > $OUT/flash30_mma.txt 2>&1
echo "bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(1|4|8|16) \||dp4a" $OUT/flash30_mma.txt | head -12
