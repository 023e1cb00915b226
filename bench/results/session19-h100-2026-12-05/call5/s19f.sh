#!/usr/bin/env bash
# Session 19 call 5: the Q8_0 tensor-core gemv_act_rows v3 (addresses formed once, branch-free items;
# 2 tiles x 4 warps from 8 rows): exactness (test_gemv_act; the DeepSeek batch test: batch rows ==
# own decode steps bit for bit), the kernel table, and the 30-layer synthetic Flash batch table,
# tensor cores vs dp4a (--mma-ab).
set -u
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s19f.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 60 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -12 | tee -a $OUT/summary.txt; }
( timeout 90 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_gemv_act
[ -x $B/bench_cuda_gemv ] && { timeout 60 $B/bench_cuda_gemv --rows-mma 20 > $OUT/rows_mma.txt 2>&1; echo "rows-mma exit $?" | tee -a $OUT/summary.txt; tail -7 $OUT/rows_mma.txt; }
one test_deepseek_v4_batch_cuda .
wait
t0=$(date +%s)
timeout 300 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --batch 1,4,16 --batch-steps 8 --batch-rows 16 --batch-profile --mma-ab > $OUT/flash30_mma.txt 2>&1
echo "bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(1|4|16) \||dp4a|batch_rows" $OUT/flash30_mma.txt | head -20
