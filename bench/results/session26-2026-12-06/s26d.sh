#!/usr/bin/env bash
# Session 26 call 4 (~6 min): where a prefill chunk's time goes, per kernel, for all three families
# (14b237b + ecab715's binaries): ncu over one small model's prefill (DeepSeek 6 layers, 1024-row
# chunks; GLM 4 layers 288 experts, 2048-row chunk; Qwen 4 layers, 1024-row chunks), device time,
# shared-memory bank conflicts and wavefronts, DRAM bytes and achieved occupancy per launch, summed
# per kernel name (no cache flush, clocks unlocked). Carry .devwork/s26d.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/s26d.tar.xz
M=gpu__time_duration.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,dram__bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum
NCU="ncu --clock-control none --cache-control none --metrics $M --csv --page raw"
t0=$(date +%s)
timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash_6_layers.json /dev/shm/f6.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1
echo "convert exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 150 $NCU $B/bench_deepseek_v4_cuda /dev/shm/f6.gguf 64 0 --prefill 1024 --prefill-rows 1024 --old-max 0 > $OUT/ncu_ds.csv 2> $OUT/ncu_ds.err
echo "ncu deepseek exit $? in $(( $(date +%s) - t0 )) s, $(wc -l < $OUT/ncu_ds.csv) lines" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 150 $NCU $B/bench_glm5_cuda synthetic-full:q2_k:288:4 0 2048 --prefill 2048 --old 0 --prefill-rows 2048 > $OUT/ncu_glm.csv 2> $OUT/ncu_glm.err
echo "ncu glm exit $? in $(( $(date +%s) - t0 )) s, $(wc -l < $OUT/ncu_glm.csv) lines" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 150 $NCU $B/bench_qwen_next_cuda synthetic-full:512:4 0 2048 --prefill=2048 --prefill-rows=1024 --old-max=0 > $OUT/ncu_qwen.csv 2> $OUT/ncu_qwen.err
echo "ncu qwen exit $? in $(( $(date +%s) - t0 )) s, $(wc -l < $OUT/ncu_qwen.csv) lines" | tee -a $OUT/summary.txt
cd $OUT && for f in ncu_*.csv; do xz -9 $f; done
