#!/usr/bin/env bash
# Session 37 call B (any GPU, ~4 min): hc_down as a programmatic dependent (tests, Qwen decode A/B),
# then call A again with copies and fills traced and the gap before each kernel (the table of call
# A read them as gaps); the in-graph kernel tables (DS4_KERNEL_TRACE,
# bench/cuda_kernel_trace.h: CUPTI activity records of graph replays, each slice of time split
# among the kernels running in it, so a kernel's row is what it costs the step with PDL overlap
# and launch gaps as they are; the per-op tables and ncu time kernels outside the graph).
# Per family: 8 decode steps at 2K (--ncu-decode's range) and 8 steps of a 16-stream decode_batch.
#  Qwen synthetic-full; GLM synthetic-full (H200: 288 experts, else Q2_K 160); DeepSeek (H200: 43
#  layers, else 30; IQ2_XXS experts) at 1K.
# Build: TARGETS="$(cat bench/results/session37-2026-12-07/s37b.targets)" BUNDLE=.devwork/s37b.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session37-2026-12-07/s37b.sh", carry=[".devwork/s37b.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s37b.tar.xz}
synthetic_start
# hc_down as a programmatic dependent (DS4_HC_DOWN_PDL, default 1 in this bundle): its tests, then
# Qwen decode at 2K with it off / on, two rounds (untraced).
tests test_qwen_hyper_fused_cuda test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda
for r in a b; do
  for p in 0 1; do
    DS4_HC_DOWN_PDL=$p COLS=2-8 step qd_P$p$r 60 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
  done
done
export DS4_KERNEL_TRACE=8
tables() {  # the in-graph tables of step $1 (its top 45 rows each) into trace_$1.md
  awk '/^in-graph kernel time/{p=1; n=0} p{print; if (++n > 48) p=0} /^\| \(no kernel running\)/{p=0}' \
    /tmp/steps/$1.txt > "$OUT/trace_$1.md"
  grep -E "^in-graph|CUPTI|^decode:" /tmp/steps/$1.txt | cut -c1-240 >> "$OUT/summary.txt"
}
COLS=2-7 step qwen 150 '^\| (1|16) \| [0-9]|^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 8 2048 --ncu-decode --batch 16 --batch-rows 16
tables qwen
COLS=2-7 step glm 150 '^\| (1|16) \| [0-9]|^\| *2048 \|' $B/bench_glm5_cuda $glm 8 2048 --ncu-decode --batch 16 --batch-rows 16
tables glm
wait
COLS=2-7 step ds 200 '^decode:|^\| (1|16) \| [0-9]' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 8 --ncu-decode --batch 16 --batch-rows 16 --old-max 0
tables ds
rm -f /dev/shm/f.gguf
# Qwen's verify window of k = 2 (3 rows) at 2K: one forward in the range (--ncu-verify's).
step qwen_v 90 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 2 2048 --ncu-verify=2
tables qwen_v
