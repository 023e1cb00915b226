#!/usr/bin/env bash
# Session 28 call 2 (~9 min). Carry .devwork/s28d.tar.xz (TARGETS=... BUNDLE=... pack_cuda_bins.sh).
#  1. test_grouped_mma_int8 (the staged int8 kernel at 4 entries compiled for two blocks per SM,
#     memcmp vs dot_act), test_deepseek_v4_cuda (item 8's long prompt, with the per-256-position
#     bands of 2048- and 512-row tensor-core chunks and of the exact CUDA path vs the CPU),
#     test_deepseek_v4_actq_cuda (the int8 experts in the model);
#  2. DeepSeek 30 layers, prefill 2K / 8K: 1024-row chunks, 2048-row chunks with one and with two
#     blocks per SM for the int8 experts at 4 entries (DS4_GROUPED_MMA_INT8_OCC), --profile (the
#     per-op table of one chunk of that size);
#  3. on an H200 (the full-size synthetic GLM / Qwen fit): GLM 288 experts and Qwen decode at 2K
#     with the per-op table, prefill 2K / 8K / 32K (Qwen in 1024- and 2048-row chunks), while time is left.
set -u
. bench/device_call_lib.sh
call_start .devwork/s28d.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
one test_grouped_mma_int8
one test_deepseek_v4_cuda .
one test_deepseek_v4_actq_cuda .
timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
step() {  # name, seconds at most, grep pattern, command...
  local n=$1 to=$2 pat=$3 t0=$(date +%s) left; shift 3
  left=$(( 570 - $(date +%s) + T0 ))
  [ $left -lt 30 ] && { echo "$n not run (time)" | tee -a $OUT/summary.txt; return; }
  [ $to -gt $left ] && to=$left
  timeout $to "$@" > $OUT/$n.txt 2>&1
  echo "$n exit $? in $(( $(date +%s) - t0 )) s: $(grep -E "$pat" $OUT/$n.txt | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
  grep -E "canary" $OUT/$n.txt | cut -c1-160 | head -1 >> $OUT/summary.txt
}
P='^\| *(2048|8192|32768) \|'
step ds_r1024 100 "$P" $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --profile --prefill 2048,8192 --prefill-rows 1024 --old-max 0
step ds_r2048_occ1 100 "$P" $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --profile --prefill 2048,8192 --prefill-rows 2048 --old-max 0
DS4_GROUPED_MMA_INT8_OCC=2 step ds_r2048_occ2 100 "$P" $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --profile --prefill 2048,8192 --prefill-rows 2048 --old-max 0
rm -f /dev/shm/f.gguf
if grep -q H200 $OUT/gpu.txt; then
  step glm_decode 100 '^\| *2048 \|' $B/bench_glm5_cuda synthetic-full 16 2048 --profile
  step qwen_decode 90 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048 --profile
  step qwen_prefill_r1024 100 "$P" $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=1024 --old-max=0
  step glm_prefill 150 "$P" $B/bench_glm5_cuda synthetic-full 0 2048 --prefill 2048,8192,32768 --old 0 --prefill-rows 2048
  step qwen_prefill_r2048 100 "$P" $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=2048 --old-max=0
fi
cd $OUT && tar --exclude=summary.txt -cJf /tmp/all.tar.xz . && mv /tmp/all.tar.xz . && find . -type f ! -name summary.txt ! -name all.tar.xz -delete
