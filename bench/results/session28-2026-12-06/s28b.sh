#!/usr/bin/env bash
# Session 28: issue #22 / #23 / #24's DeepSeek figures (H200: the 43-layer synthetic Flash does not
# fit an H100), as session 25's s25e.sh: decode at 2K with the per-op table and 16 streams, then
# prefill 2K / 8K / 32K in ROWS-row chunks (default 2048). Carry .devwork/s28b.tar.xz
# (bench_deepseek_v4_cuda + ds4-convert). ~9 min.
set -u
ROWS=${ROWS:-2048}
. bench/device_call_lib.sh
call_start .devwork/s28b.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
t0=$(date +%s)
timeout 270 $B/ds4-convert --synthetic deepseek_v4_flash /dev/shm/f43.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1
echo "convert 43 exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 150 $B/bench_deepseek_v4_cuda /dev/shm/f43.gguf 1024 32 --profile --batch 1,16 --batch-rows 16 > $OUT/ds_decode.txt 2>&1
echo "deepseek 43 decode exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^decode:|^roofline' $OUT/ds_decode.txt | head -2 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "^\| (1|16) \| [0-9]" $OUT/ds_decode.txt | cut -d'|' -f2-6 | tee -a $OUT/summary.txt
left=$(( 575 - $(date +%s) + T0 ))
[ $left -lt 60 ] && exit 0
t0=$(date +%s)
timeout $left $B/bench_deepseek_v4_cuda /dev/shm/f43.gguf 64 8 --prefill 2048,8192,32768 --prefill-rows $ROWS --old-max 0 > $OUT/ds_prefill.txt 2>&1
echo "deepseek 43 prefill ($ROWS-row chunks) exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/ds_prefill.txt | tail -3 | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "canary" $OUT/ds_prefill.txt | cut -c1-200 | head -2 | tee -a $OUT/summary.txt
