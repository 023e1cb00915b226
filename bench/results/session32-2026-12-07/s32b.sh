#!/usr/bin/env bash
# Session 32 (any GPU, ~3 min): the tests whose changes are unrun on a GPU (test_gemv_mlx4_tc's
# session-31 review mends, GLM's router on reduce.cuh's warp_best in test_glm5_cuda, DS4_HC_PDL's
# default in test_qwen_hyper_fused_cuda), then Qwen decode at 2K and its ncu table at the defaults
# (session 31's s31b.sh). Carry .devwork/s32.tar.xz (s32a.sh names its targets).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start .devwork/s32.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
for t in test_gemv_mlx4_tc test_qwen_hyper_fused_cuda test_glm5_cuda; do one $t; done
xz -9 "$OUT/tests.txt"
COLS=2-8 step qwen_decode 45 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
survey qwen 90 $B/bench_qwen_next_cuda synthetic-full 4 2048 --ncu-decode
