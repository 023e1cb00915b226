#!/usr/bin/env bash
# Session 28 call 1 (~9 min; H100 or H200). Carry .devwork/s28a.tar.xz (TARGETS=... BUNDLE=...
# tools/device/pack_cuda_bins.sh at the session's code: the binaries below).
#  1. the code session 27 left unrun: test_cuda_matmul (the rewritten rows_to_f16 / rows_to_bf16,
#     bit-exact vs the host), the model / batch / verify-batch tests of the three families (every
#     tensor-core chunk goes through those conversions and the opt_in_smem_once helper); the
#     DeepSeek and Qwen model tests now also run a prompt of kMaxPrefillRows + 52 tokens in
#     kMaxPrefillRows (now 2048) chunks against the CPU model;
#  2. prefill in 1024- vs 2048-row chunks, same binaries: DeepSeek 30 layers 2K / 8K, Qwen 2K;
#     GLM 2K / 8K (2048-row chunks, as session 27);
#  3. the one-pass ncu survey of one prefill chunk per family (s27e.sh's), while time is left.
set -u
. bench/device_call_lib.sh
call_start .devwork/s28a.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
one test_cuda_matmul
for t in test_deepseek_v4_cuda test_glm5_cuda test_qwen_next_cuda test_deepseek_v4_batch_cuda test_glm5_batch_cuda \
         test_qwen_next_batch_cuda test_deepseek_v4_verify_batch_cuda test_glm5_verify_batch_cuda test_qwen_next_verify_batch_cuda; do
  one $t .
done
timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
rows_ab() {  # label, timeout, command...: the 2K / 8K rows of its table into summary.txt
  local n=$1 to=$2 t0=$(date +%s); shift 2
  late 330 && { echo "$n not run (time)" | tee -a $OUT/summary.txt; return; }
  timeout $to "$@" > $OUT/$n.txt 2>&1
  echo "$n exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/$n.txt | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
}
for r in 1024 2048; do
  rows_ab ds_rows$r 100 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --profile --prefill 2048,8192 --prefill-rows $r --old-max 0
  rows_ab qwen_rows$r 60 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048 --prefill-rows=$r --old-max=0
done
rows_ab glm 60 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048,8192 --old 0 --prefill-rows 2048
rm -f /dev/shm/f.gguf
M=gpu__time_duration.sum,dram__bytes.sum,launch__registers_per_thread,launch__grid_size,launch__block_size
NCU="ncu --profile-from-start off --launch-count 2000 --clock-control none --cache-control none --metrics $M --csv --page raw"
timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash_6_layers.json /dev/shm/f6.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
survey() {  # name, seconds at most, command...
  local n=$1 to=$2 t0=$(date +%s) left; shift 2
  left=$(( 560 - $(date +%s) + T0 ))
  [ $left -lt 40 ] && { echo "ncu $n not run (time)" | tee -a $OUT/summary.txt; return; }
  [ $to -gt $left ] && to=$left
  timeout $to $NCU --log-file $OUT/ncu_$n.csv "$@" >> $OUT/bench_out.txt 2>&1
  echo "ncu $n exit $? in $(( $(date +%s) - t0 )) s, $(grep -c '^"[0-9]' $OUT/ncu_$n.csv) launches, errors: $(grep -c '==ERROR==' $OUT/ncu_$n.csv)" | tee -a $OUT/summary.txt
}
survey ds 120 $B/bench_deepseek_v4_cuda /dev/shm/f6.gguf 64 8 --profile --prefill 1024 --prefill-rows 1024 --old-max 0
survey qwen 100 $B/bench_qwen_next_cuda synthetic-full:512:4 0 2048 --prefill=2048 --prefill-rows=1024 --old-max=0
survey glm 100 $B/bench_glm5_cuda synthetic-full:q2_k:288:4 0 2048 --prefill 2048 --old 0 --prefill-rows 2048
cd $OUT && tar --exclude=summary.txt -cJf /tmp/all.tar.xz . && mv /tmp/all.tar.xz . && find . -type f ! -name summary.txt ! -name all.tar.xz -delete
