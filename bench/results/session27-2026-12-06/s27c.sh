#!/usr/bin/env bash
# Session 27 call 3 (~6 min): the per-kernel ncu survey of prefill chunks per family (issue #22's
# "where does a chunk's time go, per kernel"), only inside the benches' profiler ranges
# (bench/cuda_profiler_range.h; --profile-from-start off: the weight generation is not profiled):
# DeepSeek 6-layer synthetic Flash (1024-row chunk), GLM 4 layers at 288 experts (2048-row chunk),
# Qwen 4 layers at 512 experts (2048-token prefill in 1024-row chunks). Per launch: time, DRAM
# bytes, SM / memory / tensor-pipe throughput, warps active, registers, grid (clocks unlocked, no
# cache flush). Carry .devwork/cudabins.tar.xz.
set -u
G0=${CALL_T0:-$(date +%s)}  # the call's start (s27bc.sh runs s27b.sh first): steps get what is left of 580 s
budget() { local l=$(( 580 - ($(date +%s) - G0) )); [ $l -gt 120 ] && l=120; [ $l -lt 1 ] && l=1; echo $l; }
. bench/device_call_lib.sh
call_start .devwork/cudabins.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
M=gpu__time_duration.sum,dram__bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,launch__grid_size,launch__block_size
T=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
ncu --query-metrics 2>/dev/null | grep -q "^sm__pipe_tensor_op_hmma_cycles_active " && M=$M,$T
echo "metrics: $M" | tee -a $OUT/summary.txt
NCU="ncu --profile-from-start off --launch-count 600 --clock-control none --cache-control none --metrics $M --csv --page raw"
t0=$(date +%s)
timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash_6_layers.json /dev/shm/f6.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
echo "convert exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout $(budget) $NCU --log-file $OUT/ncu_ds.csv $B/bench_deepseek_v4_cuda /dev/shm/f6.gguf 64 8 --profile --prefill 1024 --prefill-rows 1024 --old-max 0 > $OUT/bench_out.txt 2> $OUT/ncu.err
echo "ncu deepseek exit $? in $(( $(date +%s) - t0 )) s, $(wc -l < $OUT/ncu_ds.csv) lines" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout $(budget) $NCU --log-file $OUT/ncu_glm.csv $B/bench_glm5_cuda synthetic-full:q2_k:288:4 0 2048 --prefill 2048 --old 0 --prefill-rows 2048 >> $OUT/bench_out.txt 2>> $OUT/ncu.err
echo "ncu glm exit $? in $(( $(date +%s) - t0 )) s, $(wc -l < $OUT/ncu_glm.csv) lines" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout $(budget) $NCU --log-file $OUT/ncu_qwen.csv $B/bench_qwen_next_cuda synthetic-full:512:4 0 2048 --prefill=2048 --prefill-rows=1024 --old-max=0 >> $OUT/bench_out.txt 2>> $OUT/ncu.err
echo "ncu qwen exit $? in $(( $(date +%s) - t0 )) s, $(wc -l < $OUT/ncu_qwen.csv) lines" | tee -a $OUT/summary.txt
cd $OUT && tail -c 20000 ncu.err > ncu_err_tail.txt && rm ncu.err && for f in ncu_*.csv bench_out.txt; do xz -9 $f; done
