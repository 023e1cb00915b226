#!/usr/bin/env bash
# Session 31 call 2 (any GPU, ~2 min, the budget's rest): the ncu table of one Qwen decode step at
# the defaults (DS4_HC_PDL on: the hc pair after the prefetch and the PDL launch, against session
# 30 call 1's hc_down 11.8 / hc_up_combine 8.5 us) and the decode figure. Carry .devwork/s31.tar.xz.
set -u
LIMIT=${LIMIT:-150}
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start .devwork/s31.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
export DS4_HC_PDL=1  # the default since 20c158e (the bundle was packed before it)
COLS=2-8 step qwen_decode 45 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
survey qwen 90 $B/bench_qwen_next_cuda synthetic-full 4 2048 --ncu-decode
