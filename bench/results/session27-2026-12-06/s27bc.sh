#!/usr/bin/env bash
# Session 27 call 2: the ncu survey of the three families' prefill chunks (s27c.sh's commands), then
# the two-blocks-per-SM expert kernel (s27b.sh's checks and A/B, one rep), each step only while the
# call's time (CALL_LIMIT seconds, default 560) has room; every output but the summary packed into
# all.tar.xz at the end (the device tool returns few files). Carry .devwork/cudabins.tar.xz.
set -u
L=${CALL_LIMIT:-560}
. bench/device_call_lib.sh
call_start .devwork/cudabins.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
left() { echo $(( L - 30 - ($(date +%s) - T0) )); }
cap() { local l=$(left); [ $l -gt $1 ] && l=$1; [ $l -lt 1 ] && l=1; echo $l; }
room() { [ $(left) -gt $1 ]; }
one test_cuda_matmul
M=gpu__time_duration.sum,dram__bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__block_size
T=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
ncu --query-metrics 2>/dev/null | grep -q "^sm__pipe_tensor_op_hmma_cycles_active " && M=$M,$T
echo "metrics: $M" >> $OUT/summary.txt
NCU="ncu --profile-from-start off --launch-count 600 --clock-control none --cache-control none --metrics $M --csv --page raw"
t0=$(date +%s)
timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash_6_layers.json /dev/shm/f6.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
echo "convert exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
survey() {  # name, command...
  local n=$1; shift
  room 40 || { echo "ncu $n not run (time)" | tee -a $OUT/summary.txt; return; }
  local t0=$(date +%s)
  timeout $(cap 110) $NCU --log-file $OUT/ncu_$n.csv "$@" >> $OUT/bench_out.txt 2>> $OUT/ncu.err
  echo "ncu $n exit $? in $(( $(date +%s) - t0 )) s, $(wc -l < $OUT/ncu_$n.csv) lines" | tee -a $OUT/summary.txt
}
survey ds $B/bench_deepseek_v4_cuda /dev/shm/f6.gguf 64 8 --profile --prefill 1024 --prefill-rows 1024 --old-max 0
survey glm $B/bench_glm5_cuda synthetic-full:q2_k:288:4 0 2048 --prefill 2048 --old 0 --prefill-rows 2048
survey qwen $B/bench_qwen_next_cuda synthetic-full:512:4 0 2048 --prefill=2048 --prefill-rows=1024 --old-max=0
E=160; grep -q H200 $OUT/gpu.txt && E=288
for o in 1 2; do
  room 20 || break
  t0=$(date +%s)
  DS4_GROUPED_MMA_OCC=$o timeout $(cap 60) $B/bench_glm5_cuda synthetic-full:q2_k:$E 0 2048 --prefill 2048,8192 --old 0 --prefill-rows 2048 > $OUT/glm_o$o.txt 2>&1
  echo "glm $E occ=$o exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/glm_o$o.txt | cut -d'|' -f2-4 | tr '\n' ' ') $(grep -E 'experts' $OUT/glm_o$o.txt | head -2 | tr -s ' ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
  room 10 || break
  t0=$(date +%s)
  DS4_GROUPED_MMA_OCC=$o timeout $(cap 60) $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048 --prefill-rows=1024 --old-max=0 > $OUT/qwen_o$o.txt 2>&1
  echo "qwen occ=$o exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *2048 \|' $OUT/qwen_o$o.txt | tail -1 | cut -d'|' -f2-4) $(grep -E '^\| experts' $OUT/qwen_o$o.txt | head -2 | tr -s ' ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
if room 25; then
  t0=$(date +%s)
  timeout $(cap 40) $B/bench_cuda_grouped_mma 10 2048 > $OUT/mma.txt 2>&1
  echo "bench_cuda_grouped_mma exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
fi
room 20 && DS4_GROUPED_MMA_OCC=2 one test_glm5_cuda .
room 8 && DS4_GROUPED_MMA_OCC=2 one test_qwen_next_cuda .
cd $OUT && [ -f ncu.err ] && tail -c 20000 ncu.err > ncu_err_tail.txt && rm -f ncu.err
tar --exclude=summary.txt --exclude=all.tar.xz -cJf all.tar.xz . && find . -type f ! -name summary.txt ! -name all.tar.xz -delete
