#!/usr/bin/env bash
# Session 30's call 1 (~10 min; session 29's s29b.sh, unrun there): issue #22 / #23 / #24's DeepSeek figures at this session's defaults
# (FP16 attend_tc, 2048-row chunks, int8 experts at two blocks per SM). Carry .devwork/s30a.tar.xz
# (TARGETS as s29a.sh's, built at the F16 defaults).
#  H200: the 43-layer synthetic Flash converts in the background (CPU only) while the CUDA suite runs
#  at the new defaults (correctness, no timings), then one bench process: decode at 1K context with
#  the per-op table, 1 and 16 streams (#24), prefill 2K / 8K / 32K in 2048-row chunks.
#  H100 (43 layers do not fit): the same on the 30-layer file.
set -u
. bench/device_call_lib.sh
call_start .devwork/s30a.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
h200=0; grep -q H200 $OUT/gpu.txt && h200=1
cfg=bench/cuda_deepseek_v4/flash30_config.json; [ $h200 = 1 ] && cfg=deepseek_v4_flash
(t0=$(date +%s); timeout 330 $B/ds4-convert --synthetic $cfg /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1; echo "convert $cfg exit $? in $(( $(date +%s) - t0 )) s" >> $OUT/summary.txt) &
TEST_TIMEOUT_S=100 timeout 250 bash tools/device/run_cuda_tests.sh $B /tmp/tests > /dev/null 2>&1
echo "suite exit $?: $(grep -c 'exit 0' /tmp/tests/summary.txt) passed; $(grep -v 'exit 0' /tmp/tests/summary.txt | tr '\n' ' ' | cut -c1-600)" | tee -a $OUT/summary.txt
grep -h "info attend" /tmp/tests/*.txt | head -3 | tee -a $OUT/summary.txt
wait
t0=$(date +%s); left=$(( 585 - t0 + T0 ))
timeout $left $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --profile --batch 1,16 --batch-rows 16 --prefill 2048,8192,32768 --prefill-rows 2048 --old-max 0 > $OUT/ds.txt 2>&1
echo "ds exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^decode:|^roofline' $OUT/ds.txt | head -2 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "^\| (1|16) \| [0-9]" $OUT/ds.txt | cut -d'|' -f2-6 | tee -a $OUT/summary.txt
echo "  prefill: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/ds.txt | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "canary" $OUT/ds.txt | cut -c1-160 | head -1 | tee -a $OUT/summary.txt
cd /tmp/tests && tar -cJf $OUT/suite.tar.xz . 2>/dev/null
# The indexer's presplit form (DS4_INDEXER_TC_PRESPLIT=1, unrun before this call) on the same file, if
# time is left: 8K / 32K prefill against the default rows above.
left=$(( 585 - $(date +%s) + T0 ))
if [ $left -gt 60 ]; then
  DS4_INDEXER_TC_PRESPLIT=1 timeout $left $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill 8192,32768 --prefill-rows 2048 --old-max 0 > $OUT/ds_presplit.txt 2>&1
  echo "presplit exit $?: $(grep -E '^\| *(8192|32768) \|' $OUT/ds_presplit.txt | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
fi
grep -h "info indexer" /tmp/tests/test_deepseek_v4_cuda.txt | cut -c1-300 | head -4 | tee -a $OUT/summary.txt
