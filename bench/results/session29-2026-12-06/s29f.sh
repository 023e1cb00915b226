#!/usr/bin/env bash
# Prepared in session 29, not run: the per-kernel tables of one GLM (288 experts) and one Qwen decode
# step at context 2048 (issue #23; call 2 made DeepSeek's), ~3 min on any H100 / H200. Carry a bundle
# with bench_glm5_cuda and bench_qwen_next_cuda (TARGETS="bench_glm5_cuda bench_qwen_next_cuda"
# BUNDLE=.devwork/s29f.tar.xz PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build).
set -u
LIMIT=${LIMIT:-560}  # the call's seconds
. bench/device_call_lib.sh
call_start .devwork/s29f.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
M=gpu__time_duration.sum,dram__bytes.sum,launch__registers_per_thread,launch__grid_size,launch__block_size
survey() {  # name, seconds at most, command...
  local n=$1 cap=$2 t0=$(date +%s) left; shift 2
  left=$(( LIMIT - 10 - $(date +%s) + T0 ))
  [ $left -gt $cap ] && left=$cap
  [ $left -lt 40 ] && { echo "ncu $n not run (time)" | tee -a $OUT/summary.txt; return; }
  timeout $left ncu --profile-from-start off --graph-profiling node --clock-control none --cache-control none --metrics $M \
    --csv --page raw --log-file $OUT/ncu_$n.csv "$@" > $OUT/${n}_out.txt 2>&1
  echo "ncu $n exit $? in $(( $(date +%s) - t0 )) s, $(grep -c '^"[0-9]' $OUT/ncu_$n.csv) launches" | tee -a $OUT/summary.txt
  python3 tools/device/ncu_kernel_table.py $OUT/ncu_$n.csv --top 40 > $OUT/kernels_$n.md 2>&1
  head -24 $OUT/kernels_$n.md | cut -c1-200 | tee -a $OUT/summary.txt
  xz -9 $OUT/ncu_$n.csv
}
survey qwen 100 $B/bench_qwen_next_cuda synthetic-full 4 2048 --ncu-decode
survey glm 300 $B/bench_glm5_cuda synthetic-full 4 2048 --ncu-decode
