#!/usr/bin/env bash
# Session 29: the per-kernel table of one DeepSeek decode step (issue #23), ~3 min. The 30-layer
# synthetic Flash; bench_deepseek_v4_cuda --ncu-decode runs one decode step's CUDA graph inside
# cudaProfilerStart / Stop and exits; ncu --graph-profiling node times each kernel node alone
# (one pass: time, DRAM bytes read + written, launch shape), so the table says which kernels sit far from the
# copy bandwidth and how much of the graph's step time is gaps between kernels. Carry
# .devwork/s29b.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/s29b.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
echo "convert exit $?" | tee -a $OUT/summary.txt
M=gpu__time_duration.sum,dram__bytes.sum,launch__registers_per_thread,launch__grid_size,launch__block_size
t0=$(date +%s)
timeout 300 ncu --profile-from-start off --graph-profiling node --clock-control none --cache-control none --metrics $M --csv --page raw \
  --log-file $OUT/ncu_decode.csv $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --ncu-decode > $OUT/bench_out.txt 2>&1
echo "ncu decode exit $? in $(( $(date +%s) - t0 )) s, $(grep -c '^"[0-9]' $OUT/ncu_decode.csv) launches, errors: $(grep -c '==ERROR==' $OUT/ncu_decode.csv)" | tee -a $OUT/summary.txt
grep -E "^decode|copy bandwidth" $OUT/bench_out.txt | tee -a $OUT/summary.txt
python3 tools/device/ncu_kernel_table.py $OUT/ncu_decode.csv --top 40 > $OUT/kernels.md 2>&1
head -50 $OUT/kernels.md | tee -a $OUT/summary.txt
xz -9 $OUT/ncu_decode.csv
