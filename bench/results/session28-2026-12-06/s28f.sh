#!/usr/bin/env bash
# Session 28 call 3 (~7 min). Carry .devwork/s28f.tar.xz (TARGETS= the suite but test_admission_cuda, whose ICU
# libraries would not fit the 64 MiB beside the tree, + bench_deepseek_v4_cuda ds4-convert; PRESET=cuda-pack
# tools/device/pack_cuda_bins.sh --build at the session's code: 2048-row DeepSeek chunks served,
# int8 experts at two blocks per SM by default, the window ring's 2048 slack rows, attend_tc's
# FP16 form behind DS4_ATTEND_TC_F16).
#  1. every CUDA correctness test (tools/device/run_cuda_tests.sh; test_deepseek_v4_cuda runs the
#     attend_tc cases with FP16 operands too and prints both timings), while the DeepSeek file
#     converts in the background (CPU only);
#  2. H200 (43-layer synthetic Flash): decode at 2K and prefill 2K / 8K / 32K in 2048-row chunks
#     (issue #22 / #23's figures), then prefill 2K / 8K with DS4_ATTEND_TC_F16=1 (the A/B);
#     H100 (the 43 layers do not fit: 30): decode with 16 streams (#24), prefill 2K / 8K, per-op
#     chunk table (--profile), with DS4_ATTEND_TC_F16 0 and 1.
set -u
. bench/device_call_lib.sh
call_start .devwork/s28f.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
h200=0; grep -q H200 $OUT/gpu.txt && h200=1
if [ $h200 = 1 ]; then
  (t0=$(date +%s); timeout 300 $B/ds4-convert --synthetic deepseek_v4_flash /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1; echo "convert 43 exit $? in $(( $(date +%s) - t0 )) s" >> $OUT/summary.txt) &
else
  timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1
fi
TEST_TIMEOUT_S=100 timeout 250 bash tools/device/run_cuda_tests.sh $B /tmp/tests > /dev/null 2>&1
echo "suite exit $?: $(grep -c 'exit 0' /tmp/tests/summary.txt) passed; $(grep -v 'exit 0' /tmp/tests/summary.txt | tr '\n' ' ' | cut -c1-600)" | tee -a $OUT/summary.txt
grep -h "info attend" /tmp/tests/*.txt | head -3 | tee -a $OUT/summary.txt
wait
ds() {  # name, f16, args...
  local n=$1 f=$2 t0=$(date +%s) left; shift 2
  left=$(( 400 - $(date +%s) + T0 ))
  [ $left -lt 60 ] && { echo "$n not run (time)" | tee -a $OUT/summary.txt; return; }
  DS4_ATTEND_TC_F16=$f timeout $left $B/bench_deepseek_v4_cuda /dev/shm/f.gguf "$@" > $OUT/$n.txt 2>&1
  echo "$n exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^decode:|^roofline' $OUT/$n.txt | head -2 | tr '\n' ' ')" | tee -a $OUT/summary.txt
  grep -E "^\| (1|16) \| [0-9]" $OUT/$n.txt | cut -d'|' -f2-6 | tee -a $OUT/summary.txt
  echo "  prefill: $(grep -E '^\| *(2048|8192|32768) \|' $OUT/$n.txt | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
  grep -E "canary" $OUT/$n.txt | cut -c1-160 | head -1 | tee -a $OUT/summary.txt
  grep -E "^\| attend \|" $OUT/$n.txt | head -2 | tee -a $OUT/summary.txt
}
if [ $h200 = 1 ]; then
  ds ds43 0 1024 32 --prefill 2048,8192,32768 --prefill-rows 2048 --old-max 0
  ds ds43_f16 1 64 8 --prefill 2048,8192 --prefill-rows 2048 --old-max 0
else
  ds ds30_f16 1 1024 16 --profile --prefill 2048,8192 --prefill-rows 2048 --old-max 0
  ds ds30 0 1024 32 --profile --batch 1,16 --batch-rows 16 --prefill 2048,8192 --prefill-rows 2048 --old-max 0
fi
cd /tmp/tests && tar -cJf $OUT/suite.tar.xz . 2>/dev/null
