#!/usr/bin/env bash
# Session 19 call 4: the Q8_0 tensor-core gemv_act_rows in gemv_act's order (gemv_act_rows_mma.cu):
# bit-exactness against gemv_act (test_gemv_act), PDL, and the rows table (tensor cores vs dp4a).
set -u
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s19d.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 120 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -12 | tee -a $OUT/summary.txt; }
one test_gemv_act
t0=$(date +%s)
timeout 120 $B/bench_cuda_gemv --rows-mma 20 > $OUT/rows_mma.txt 2>&1
echo "rows-mma exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
cat $OUT/rows_mma.txt
