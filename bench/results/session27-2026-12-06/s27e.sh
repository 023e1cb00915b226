#!/usr/bin/env bash
# Prepared for a next session (not run in session 27): the per-kernel survey of one prefill chunk per
# family with ONE ncu pass per launch (time and DRAM bytes; launch stats need no replay), so a whole
# chunk fits (call 2's 9 metrics replayed each launch ~10 times: 1.3 launches per second, a layer in
# 110 s). Then tools/device/ncu_kernel_table.py over each CSV. Carry .devwork/cudabins.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/cudabins.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
M=gpu__time_duration.sum,dram__bytes.sum,launch__registers_per_thread,launch__grid_size,launch__block_size
NCU="ncu --profile-from-start off --launch-count 2000 --clock-control none --cache-control none --metrics $M --csv --page raw"
timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash_6_layers.json /dev/shm/f6.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
survey() {  # name, command...
  local n=$1 t0=$(date +%s); shift
  late 500 && { echo "ncu $n not run (time)" | tee -a $OUT/summary.txt; return; }
  timeout 150 $NCU --log-file $OUT/ncu_$n.csv "$@" >> $OUT/bench_out.txt 2>&1
  echo "ncu $n exit $? in $(( $(date +%s) - t0 )) s, $(grep -c '^"[0-9]' $OUT/ncu_$n.csv) launches, errors: $(grep -c '==ERROR==' $OUT/ncu_$n.csv)" | tee -a $OUT/summary.txt
}
survey ds $B/bench_deepseek_v4_cuda /dev/shm/f6.gguf 64 8 --profile --prefill 1024 --prefill-rows 1024 --old-max 0
survey glm $B/bench_glm5_cuda synthetic-full:q2_k:288:4 0 2048 --prefill 2048 --old 0 --prefill-rows 2048
survey qwen $B/bench_qwen_next_cuda synthetic-full:512:4 0 2048 --prefill=2048 --prefill-rows=1024 --old-max=0
cd $OUT && for f in ncu_*.csv bench_out.txt; do [ -f $f ] && xz -9 $f; done
