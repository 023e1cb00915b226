#!/usr/bin/env bash
# Session 30's H100 call (~9 min; any GPU): the CUDA suite at this code (test_qwen_decode_kernels_cuda
# checks DS4_QSA_TC_ROWS's 4-row QSA kernel, test_deepseek_v4_cuda memcmps the indexer's pre-split
# form and times both at 32K: both written in session 29, unrun), then the A/Bs of those two forms
# (DeepSeek 30 layers 8K / 32K prefill with DS4_INDEXER_TC_PRESPLIT 0 / 1; Qwen 2K / 8K with
# DS4_QSA_TC_ROWS 0 / 1), then session 29's s29f.sh: ncu tables of one Qwen and one GLM decode step.
# Carry .devwork/s30a.tar.xz.
set -u
LIMIT=${LIMIT:-580}
. bench/device_call_lib.sh
call_start .devwork/s30a.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
(timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt) &
TEST_TIMEOUT_S=100 timeout 240 bash tools/device/run_cuda_tests.sh $B /tmp/tests > /dev/null 2>&1
echo "suite exit $?: $(grep -c 'exit 0' /tmp/tests/summary.txt) passed; $(grep -v 'exit 0' /tmp/tests/summary.txt | tr '\n' ' ' | cut -c1-600)" | tee -a $OUT/summary.txt
grep -h "info indexer" /tmp/tests/test_deepseek_v4_cuda.txt | cut -c1-300 | head -4 | tee -a $OUT/summary.txt
grep -h -i "rows" /tmp/tests/test_qwen_decode_kernels_cuda.txt | grep -i qsa | cut -c1-200 | head -4 | tee -a $OUT/summary.txt
(cd /tmp/tests && tar -cJf $OUT/suite.tar.xz .)
wait
ab() {  # name, env var, pattern, command...
  local n=$1 var=$2 pat=$3 v t0; shift 3
  for v in 0 1 0 1; do
    late $(( LIMIT - 330 )) && { echo "$n $var=$v not run (time)" | tee -a $OUT/summary.txt; continue; }
    t0=$(date +%s)
    env $var=$v timeout 60 "$@" > $OUT/${n}_$v.txt 2>&1
    echo "$n $var=$v exit $? in $(( $(date +%s) - t0 )) s: $(grep -E "$pat" $OUT/${n}_$v.txt | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
  done
}
ab ds DS4_INDEXER_TC_PRESPLIT '^\| *(8192|32768) \|' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill 8192,32768 --prefill-rows 2048 --old-max 0
ab qwen DS4_QSA_TC_ROWS '^\| *(2048|8192) \|' $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192 --prefill-rows=1024 --old-max=0
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
survey glm 200 $B/bench_glm5_cuda synthetic-full:q2_k:160 4 2048 --ncu-decode
