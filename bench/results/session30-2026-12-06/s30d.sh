#!/usr/bin/env bash
# Session 30: the issues' H200 figures (#22 / #23 / #24) of all three families in one call (~7 min;
# H200 only: the 43-layer Flash and GLM's 288 experts do not fit an H100). The suite passed at this
# code on an H100 (call 1). Carry .devwork/s30e.tar.xz (the benches, ds4-convert and the Qwen model
# tests at the new moe_route top-k) and .devwork/s30e_old.tar.xz (bench_qwen_next_cuda_old: 02d7474's,
# the old top-k): the Qwen tests run first, and Qwen's decode runs with both binaries.
#  DeepSeek 43 layers: decode at 1K context with the per-op table, 1 and 16 streams, prefill 2K / 8K /
#  32K in 2048-row chunks; GLM 288 experts: prefill 2K / 8K / 32K (2048-row chunks), decode at 2K;
#  Qwen: prefill 2K / 8K / 32K (2048-row chunks), decode at 2K.
set -u
. bench/device_call_lib.sh
call_start .devwork/s30e.tar.xz
tar -C /tmp/d -xJf .devwork/s30e_old.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
for t in test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_qwen_next_mtp_cuda; do one $t .; done
grep -E "FAIL" $OUT/tests.txt | head -5 | tee -a $OUT/summary.txt
# not an H200 (the 43-layer Flash and GLM's 288 experts do not fit): the Qwen decode A/B only
if ! grep -q H200 $OUT/gpu.txt; then
  echo "not an H200: $(cat $OUT/gpu.txt)" | tee -a $OUT/summary.txt
  for v in old new old new; do
    b=$B/bench_qwen_next_cuda; [ $v = old ] && b=${b}_old
    step qwen_decode_$v 40 '^\| *2048 \|' $b synthetic-full 32 2048
  done
  exit 0
fi
t0=$(date +%s)
timeout 120 $B/ds4-convert --synthetic deepseek_v4_flash /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1
echo "convert exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
step ds 260 '^decode:|^roofline|^\| (1|16) \| [0-9]|^\| *(2048|8192|32768) \|' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --profile --batch 1,16 --batch-rows 16 --prefill 2048,8192,32768 --prefill-rows 2048 --old-max 0
rm -f /dev/shm/f.gguf
step glm_prefill 100 '^\| *(2048|8192|32768) \|' $B/bench_glm5_cuda synthetic-full 0 2048 --prefill 2048,8192,32768 --old 0 --prefill-rows 2048
step qwen_prefill 70 '^\| *(2048|8192|32768) \|' $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=2048 --old-max=0
step glm_decode 60 '^\| *2048 \|' $B/bench_glm5_cuda synthetic-full 16 2048 --profile
step qwen_decode 50 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048 --profile
step qwen_decode_old 40 '^\| *2048 \|' $B/bench_qwen_next_cuda_old synthetic-full 32 2048
step qwen_decode_new 40 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
