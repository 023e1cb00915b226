#!/usr/bin/env bash
# Session 29's call 2 (~6 min, any H100 / H200): the delta rule's new prefill kernel (column blocks,
# float4 shared reads; backend/cuda delta_rule.cu) against the old binaries, then the per-kernel
# table of one DeepSeek decode step (s29d.sh's). Carry .devwork/s29b.tar.xz (old: the session's
# F16 defaults, the whole suite) and .devwork/s29e.tar.xz (new: TARGETS="test_qwen_next_cuda
# test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_qwen_next_mtp_cuda test_glm5_cuda
# test_glm5_batch_cuda test_glm5_verify_batch_cuda test_glm5_mtp_cuda bench_qwen_next_cuda bench_glm5_cuda").
set -u
LIMIT=${LIMIT:-580}  # the call's seconds: the later steps are skipped or cut to fit
. bench/device_call_lib.sh
call_start .devwork/s29e.tar.xz
NEW=$B/cudabins
B=$NEW  # (one runs $B/NAME; as run in call 2 this line was missing: the tests exited 127, call 3 ran them)
mkdir -p /tmp/old && tar -C /tmp/old -xJf .devwork/s29b.tar.xz || exit 3
OLD=/tmp/old/cudabins
export LD_LIBRARY_PATH=$NEW/lib:$LD_LIBRARY_PATH
for t in test_qwen_next_cuda test_glm5_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_qwen_next_mtp_cuda test_glm5_batch_cuda test_glm5_verify_batch_cuda test_glm5_mtp_cuda; do one $t .; done
grep -h "FAIL\|delta_rule" $OUT/tests.txt | cut -c1-200 | head -8 | tee -a $OUT/summary.txt
ab() {  # name, seconds, bench, args...
  local n=$1 to=$2 b=$3 v t0; shift 3
  for v in new old new; do
    late $(( LIMIT - 250 )) && { echo "$n $v not run (time)" | tee -a $OUT/summary.txt; continue; }
    t0=$(date +%s)
    if [ $v = new ]; then d=$NEW; else d=$OLD; fi
    timeout $to $d/$b "$@" > $OUT/${n}_$v.txt 2>&1
    echo "$n $v exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/${n}_$v.txt | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
  done
}
ab glm 60 bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048,8192 --old 0 --prefill-rows 2048
ab qwen 90 bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192 --prefill-rows=1024 --old-max=0
# the per-kernel table of one DeepSeek decode step (s29d.sh)
late $(( LIMIT - 170 )) && { echo "ncu decode not run (time)" | tee -a $OUT/summary.txt; exit 0; }
timeout 60 $OLD/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
M=gpu__time_duration.sum,dram__bytes.sum,launch__registers_per_thread,launch__grid_size,launch__block_size
t0=$(date +%s); left=$(( LIMIT - 25 - t0 + T0 ))
timeout $left ncu --profile-from-start off --graph-profiling node --clock-control none --cache-control none --metrics $M --csv --page raw \
  --log-file $OUT/ncu_decode.csv $OLD/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --ncu-decode > $OUT/ds_ncu_out.txt 2>&1
echo "ncu decode exit $? in $(( $(date +%s) - t0 )) s, $(grep -c '^"[0-9]' $OUT/ncu_decode.csv) launches, errors: $(grep -c '==ERROR==' $OUT/ncu_decode.csv)" | tee -a $OUT/summary.txt
grep -E "^decode|copy bandwidth" $OUT/ds_ncu_out.txt | tee -a $OUT/summary.txt
python3 tools/device/ncu_kernel_table.py $OUT/ncu_decode.csv --top 40 > $OUT/kernels.md 2>&1
head -30 $OUT/kernels.md | cut -c1-200 | tee -a $OUT/summary.txt
cd $OUT && xz -9 ncu_decode.csv tests.txt; tar -cJf all.tar.xz *_new.txt *_old.txt ds_ncu_out.txt && rm -f *_new.txt *_old.txt ds_ncu_out.txt
