#!/usr/bin/env bash
# Session 38 call A (H200 only, ~9.5 min): the issues' figures (#22 / #23 / #24) at HEAD (5c8fa70's
# code), not taken on an H200 since session 25, with the engine's-path decode (forward_candidates,
# top 1 on the device) beside the full-row decode, first run of that column. As s36b.sh:
#  DeepSeek 43 layers (IQ2_XXS experts): decode at 1K context, 1 and 16 streams, prefill 2K / 8K /
#  32K in 2048-row chunks; GLM 288 experts: prefill 2K / 8K / 32K, decode at 2K; Qwen: prefill 2K /
#  8K / 32K, decode at 2K and 32K, verify k = 1..4 at 2K.
# Build: TARGETS="$(cat bench/results/session38-2026-12-07/s38a.targets)" BUNDLE=.devwork/s38a.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session38-2026-12-07/s38a.sh", carry=[".devwork/s38a.tar.xz"], kind="nvidia-h200",
# needs_h200=true: the 43-layer Flash and GLM's 288 experts do not fit an H100).
set -u
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s38a.tar.xz}
use_bins
grep -q H200 $OUT/gpu.txt || { echo "not an H200: $(cat $OUT/gpu.txt)" | tee -a $OUT/summary.txt; exit 0; }
t0=$(date +%s)
timeout 150 $B/ds4-convert --synthetic deepseek_v4_flash /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1
echo "convert exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
step ds 230 "^decode|^roofline|^on one|^\| (1|16) \| [0-9]|^\| *(2048|8192|32768) \||engine's decode path failed" $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --batch 1,16 --batch-rows 16 --prefill 2048,8192,32768 --prefill-rows 2048 --old-max 0
rm -f /dev/shm/f.gguf
COLS=2-11 step qwen_decode 60 "^\| *(2048|32768) \||engine's decode path failed" $B/bench_qwen_next_cuda synthetic-full 32 2048,32768
COLS=2-11 step glm_decode 60 "^\| *2048 \||engine's decode path failed" $B/bench_glm5_cuda synthetic-full 16 2048
step glm_prefill 100 '^\| *(2048|8192|32768) \|' $B/bench_glm5_cuda synthetic-full 0 2048 --prefill 2048,8192,32768 --old 0 --prefill-rows 2048
step qwen_prefill 70 '^\| *(2048|8192|32768) \|' $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=2048 --old-max=0
step qwen_verify 40 '^\| [1-4] \|' $B/bench_qwen_next_cuda synthetic-full 2 2048 --verify=2048
