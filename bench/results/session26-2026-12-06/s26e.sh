#!/usr/bin/env bash
# Session 26 call 5 (~6 min): every CUDA correctness test at the session's code (hc_fused's staged
# layout, Qwen's hc read): tools/device/run_cuda_tests.sh over `PRESET=cuda-pack
# tools/device/pack_cuda_bins.sh --build`'s binaries; then, while time is left, the per-kernel ncu
# survey of one DeepSeek 512-row prefill chunk (6-layer synthetic Flash) through the benches' new
# profiler range (ncu --profile-from-start off). Carry .devwork/cudabins.tar.xz.
set -u
T0=$(date +%s)
mkdir -p /tmp/cb && tar -C /tmp/cb -xJf .devwork/cudabins.tar.xz || exit 3
TEST_TIMEOUT_S=90 timeout 250 bash tools/device/run_cuda_tests.sh /tmp/cb/cudabins $OUT/tests
echo "suite exit $? in $(( $(date +%s) - T0 )) s"
cat $OUT/tests/summary.txt
[ $(( $(date +%s) - T0 )) -gt 280 ] && exit 0
B=/tmp/cb/cudabins
timeout 30 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash_6_layers.json /dev/shm/f6.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
M=gpu__time_duration.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,dram__bytes.sum,sm__warps_active.avg.pct_of_peak_sustained_active
timeout $(( 330 - ($(date +%s) - T0) )) ncu --profile-from-start off --launch-count 500 --clock-control none --cache-control none --metrics $M --csv --page raw \
  $B/bench_deepseek_v4_cuda /dev/shm/f6.gguf 64 8 --profile --prefill 1024 --prefill-rows 1024 --old-max 0 > $OUT/ncu_ds.csv 2> $OUT/ncu_ds.err
echo "ncu deepseek exit $?, $(wc -l < $OUT/ncu_ds.csv) lines, $(( $(date +%s) - T0 )) s"
xz -9 $OUT/ncu_ds.csv
