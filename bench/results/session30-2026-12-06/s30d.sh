#!/usr/bin/env bash
# Session 30: the issues' H200 figures (#22 / #23 / #24) of all three families in one call (~7 min;
# H200 only: the 43-layer Flash and GLM's 288 experts do not fit an H100). The suite passed at this
# code on an H100 (call 1). Carry .devwork/s30e.tar.xz (TARGETS="bench_deepseek_v4_cuda bench_glm5_cuda
# bench_qwen_next_cuda ds4-convert"). Not an H200: nothing.
#  DeepSeek 43 layers: decode at 1K context with the per-op table, 1 and 16 streams, prefill 2K / 8K /
#  32K in 2048-row chunks; GLM 288 experts: prefill 2K / 8K / 32K (2048-row chunks), decode at 2K;
#  Qwen: prefill 2K / 8K / 32K (2048-row chunks), decode at 2K.
set -u
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s30e.tar.xz}  # (session 31 runs it with its own bundle)
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
grep -q H200 $OUT/gpu.txt || { echo "not an H200: $(cat $OUT/gpu.txt)" | tee -a $OUT/summary.txt; exit 0; }
t0=$(date +%s)
timeout 120 $B/ds4-convert --synthetic deepseek_v4_flash /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1
echo "convert exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
step ds 260 '^decode:|^roofline|^\| (1|16) \| [0-9]|^\| *(2048|8192|32768) \|' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --profile --batch 1,16 --batch-rows 16 --prefill 2048,8192,32768 --prefill-rows 2048 --old-max 0
rm -f /dev/shm/f.gguf
step glm_prefill 100 '^\| *(2048|8192|32768) \|' $B/bench_glm5_cuda synthetic-full 0 2048 --prefill 2048,8192,32768 --old 0 --prefill-rows 2048
step qwen_prefill 70 '^\| *(2048|8192|32768) \|' $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=2048 --old-max=0
step glm_decode 60 '^\| *2048 \|' $B/bench_glm5_cuda synthetic-full 16 2048 --profile
step qwen_decode 50 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048 --profile
