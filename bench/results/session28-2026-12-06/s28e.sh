#!/usr/bin/env bash
# Session 28 call 3 (~8 min). Carry .devwork/cudabins.tar.xz (PRESET=cuda-pack
# tools/device/pack_cuda_bins.sh --build at the session's code: 2048-row DeepSeek chunks served,
# int8 experts at two blocks per SM by default, the window ring's 2048 slack rows).
#  1. every CUDA correctness test (tools/device/run_cuda_tests.sh), while on an H200 the 43-layer
#     synthetic Flash converts in the background (CPU only);
#  2. H200: issue #22 / #23's DeepSeek figures, one process: decode at 2K (1 stream), prefill
#     2K / 8K / 32K in 2048-row chunks (the served size). H100 (the 43 layers do not fit): the
#     30-layer file's decode with 16 streams (#24) and prefill 2K / 8K.
set -u
. bench/device_call_lib.sh
call_start .devwork/cudabins.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
h200=0; grep -q H200 $OUT/gpu.txt && h200=1
if [ $h200 = 1 ]; then
  (t0=$(date +%s); timeout 300 $B/ds4-convert --synthetic deepseek_v4_flash /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1; echo "convert 43 exit $? in $(( $(date +%s) - t0 )) s" >> $OUT/summary.txt) &
else
  timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1
fi
TEST_TIMEOUT_S=100 timeout 250 bash tools/device/run_cuda_tests.sh $B /tmp/tests > /dev/null 2>&1
echo "suite exit $?: $(grep -c 'exit 0' /tmp/tests/summary.txt) passed; $(grep -v 'exit 0' /tmp/tests/summary.txt | tr '\n' ' ')" | tee -a $OUT/summary.txt
cp /tmp/tests/summary.txt $OUT/suite_summary.txt 2>/dev/null
wait
left=$(( 575 - $(date +%s) + T0 ))
t0=$(date +%s)
if [ $h200 = 1 ]; then
  timeout $left $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --prefill 2048,8192,32768 --prefill-rows 2048 --old-max 0 > $OUT/ds.txt 2>&1
else
  timeout $left $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --batch 1,16 --batch-rows 16 --prefill 2048,8192 --prefill-rows 2048 --old-max 0 > $OUT/ds.txt 2>&1
fi
echo "deepseek exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^decode:|^roofline' $OUT/ds.txt | head -2 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "^\| (1|16) \| [0-9]" $OUT/ds.txt | cut -d'|' -f2-6 | tee -a $OUT/summary.txt
echo "prefill: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/ds.txt | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "canary" $OUT/ds.txt | cut -c1-160 | head -1 | tee -a $OUT/summary.txt
cd /tmp/tests && tar -cJf $OUT/suite.tar.xz . 2>/dev/null
