#!/usr/bin/env bash
# Session 36 call E (H200 only, ~5 min): a trimmed s36b.sh for the session's last device minutes: the
# issues' decode figures and DeepSeek's 2K prefill at this session's defaults (gemv_rows PDL, the
# 9-16-row split, Q2_KC R 4). DeepSeek 43 layers: decode at 1K, 1 and 16 streams, prefill 2K;
# Qwen decode at 2K; GLM 288 experts decode at 2K; Qwen prefill 2K if time is left.
# Build: as s36b.sh (its targets, bundle .devwork/s36b.tar.xz rebuilt at this commit); run(command="bash
# bench/results/session36-2026-12-07/s36e.sh", carry=[".devwork/s36b.tar.xz"], kind="nvidia-h200",
# needs_h200=true).
set -u
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s36b.tar.xz}
use_bins
grep -q H200 $OUT/gpu.txt || { echo "not an H200: $(cat $OUT/gpu.txt)" | tee -a $OUT/summary.txt; exit 0; }
LIMIT=${LIMIT:-500}
synthetic_start
COLS=2-8 step qwen_decode 45 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
COLS=2-8 step glm_decode 60 '^\| *2048 \|' $B/bench_glm5_cuda synthetic-full 16 2048
wait
step ds 150 '^decode:|^roofline|^\| (1|16) \| [0-9]|^\| *2048 \|' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --batch 1,16 --batch-rows 16 --prefill 2048 --prefill-rows 2048 --old-max 0
rm -f /dev/shm/f.gguf
step qwen_prefill 40 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048 --prefill-rows=2048 --old-max=0
