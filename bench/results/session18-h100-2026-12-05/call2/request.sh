#!/usr/bin/env bash
# Session 18 call 2: gemv_act_rows rows per block (gemv_act_set_rows_kernel_rows) -- exactness, the
# kernel table, and the 30-layer Flash batch tables at R = 2 (default) / 4 / 8 in one process.
set -u
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s18b.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 100 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -8 | tee -a $OUT/summary.txt; }
one test_gemv_act
( timeout 90 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
t0=$(date +%s)
timeout 120 $B/bench_cuda_gemv --act 10 > $OUT/gemv_act.txt 2>&1
echo "gemv --act exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
wait
[ -s /dev/shm/f.gguf ] || timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes >> $OUT/convert.txt 2>&1
t0=$(date +%s)
timeout 200 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --batch 4,16 --batch-steps 8 --batch-rows 16 --batch-profile --rows-ab 4,8 > $OUT/flash30_rows.txt 2>&1
echo "bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
one test_deepseek_v4_batch_cuda .
one test_gemv_pdl
