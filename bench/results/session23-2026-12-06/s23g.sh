#!/usr/bin/env bash
# Session 23 call 7 (~1 min): bench_cuda_matmul_rows at 512 and 1024 rows: where a chunk's dense
# TF32 product goes (dequant_f32 vs the GEMM) at the three families' shapes. Carry .devwork/ds23g.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/ds23g.tar.xz
for n in 512 1024; do timeout 60 $B/bench_cuda_matmul_rows $n 10 > $OUT/matmul_$n.txt 2>&1; echo "rows $n exit $?" >> $OUT/summary.txt; cat $OUT/matmul_$n.txt; done
