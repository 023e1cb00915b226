#!/usr/bin/env bash
# Session 25 call 5 (H200, ~6 min): issue #22 / #23 / #24's DeepSeek figures on the full-size 43-layer
# synthetic Flash (ds4-convert --synthetic deepseek_v4_flash, IQ2_XXS experts with holes) with this
# session's mHC kernel (bundle ds25a): decode with its per-op table and the 1 / 16-stream batch
# table; prefill 2K / 8K / 32K in 1024-row chunks. Carry .devwork/ds25a.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/ds25a.tar.xz
t0=$(date +%s)
timeout 260 $B/ds4-convert --synthetic deepseek_v4_flash /dev/shm/f43.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1
echo "convert 43 exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 150 $B/bench_deepseek_v4_cuda /dev/shm/f43.gguf 1024 32 --profile --batch 1,16 --batch-rows 16 > $OUT/ds_decode.txt 2>&1
echo "deepseek 43 decode exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^decode:|^roofline' $OUT/ds_decode.txt | head -2 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "^\| (1|16) \| [0-9]" $OUT/ds_decode.txt | cut -d'|' -f2-6 | tee -a $OUT/summary.txt
late 420 && exit 0
t0=$(date +%s)
timeout 150 $B/bench_deepseek_v4_cuda /dev/shm/f43.gguf 64 8 --prefill 2048,8192,32768 --prefill-rows 1024 --old-max 0 > $OUT/ds_prefill.txt 2>&1
echo "deepseek 43 prefill exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/ds_prefill.txt | tail -3 | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "canary" $OUT/ds_prefill.txt | cut -c1-200 | head -2
