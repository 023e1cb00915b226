#!/usr/bin/env bash
# Session 37 call C (any GPU, ~2 min): where a decode step's 1.3-2.3 ms with no kernel running come
# from (call B: most of it between the step graph's leading token copy and its first kernel).
# 1. bench_cuda_graph_launch: graph replays of N = 1..1600 short kernel nodes (PDL or not, with or
#    without a leading host-to-device copy): host time of cudaGraphLaunch, launch + sync wall time,
#    device time per node;
# 2. the step graph in parts (DS4_GRAPH_SPLIT, graph_step.h): tests, decode A/Bs;
# 3. the Qwen / GLM / DeepSeek decode traces again (DS4_KERNEL_TRACE=8, --ncu-decode only), now with
#    the host time spent in cudaGraphLaunch over each window (backend/cuda/graph_step.cu).
# Build: TARGETS="$(cat bench/results/session37-2026-12-07/s37c.targets)" BUNDLE=.devwork/s37c.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session37-2026-12-07/s37c.sh", carry=[".devwork/s37c.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s37c.tar.xz}
synthetic_start
step graph_launch 60 '^\| (1|800|1600) \|' $B/bench_cuda_graph_launch 20
cp /tmp/steps/graph_launch.txt "$OUT/graph_launch.md"
# The step graph in parts (DS4_GRAPH_SPLIT=N layers a part): the model tests with it, then decode
# A/Bs (untraced) 0 / 4 / 12, two rounds.
for t in test_qwen_next_cuda test_glm5_cuda; do DS4_GRAPH_SPLIT=4 one $t; done
grep -E "FAIL|PASSED" "$OUT/tests.txt" | head -8 >> "$OUT/summary.txt"
for r in a b; do
  for sp in 0 4 12; do
    DS4_GRAPH_SPLIT=$sp COLS=2-8 step qd_S$sp$r 60 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
  done
done
for sp in 0 4 12; do
  DS4_GRAPH_SPLIT=$sp COLS=2-8 step gd_S$sp 60 '^\| *2048 \|' $B/bench_glm5_cuda $glm 16 2048
done
for sp in 0 4; do  # the 16-stream batch (the chunk path's layers split too)
  DS4_GRAPH_SPLIT=$sp COLS=2-7 step qb_S$sp 60 '^\| (16) \| [0-9]' $B/bench_qwen_next_cuda synthetic-full 4 2048 --batch 16 --batch-rows 16
done
export DS4_KERNEL_TRACE=8
tables() {  # the in-graph tables of step $1 (top 45 rows) and the launch lines into trace_$1.md
  awk '/^in-graph kernel time/{p=1; n=0} p{print; if (++n > 48) p=0} /^\| \(no kernel running\)/{p=0} /^host time in cudaGraphLaunch/{print}' \
    /tmp/steps/$1.txt > "$OUT/trace_$1.md"
  grep -E "^in-graph|^host time|^decode:" /tmp/steps/$1.txt | cut -c1-240 >> "$OUT/summary.txt"
}
COLS=2-7 step qwen 120 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 8 2048 --ncu-decode
tables qwen
COLS=2-7 step glm 120 '^\| *2048 \|' $B/bench_glm5_cuda $glm 8 2048 --ncu-decode
tables glm
wait
DS4_GRAPH_SPLIT=4 one test_deepseek_v4_cuda
COLS=2-7 step ds 200 '^decode:' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 8 --ncu-decode --old-max 0
tables ds
unset DS4_KERNEL_TRACE
for sp in 0 4 0 4; do
  late 480 || DS4_GRAPH_SPLIT=$sp step ds_S$sp 60 '^decode:' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --ncu-decode --old-max 0
done
grep -E "FAIL|PASSED" "$OUT/tests.txt" | tail -4 >> "$OUT/summary.txt"
xz -9 "$OUT/tests.txt"
rm -f /dev/shm/f.gguf
