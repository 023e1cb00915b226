#!/usr/bin/env bash
# Session 32, the budget's last ~150 s (any GPU): the shortest useful part of s32d.sh: Qwen's and
# DeepSeek's model tests with DS4_SMALL_PDL=1, test_gemv_mlx4_tc, the Qwen decode A/B of
# DS4_SMALL_PDL (0 / 1 / 0 / 1), then bench_cuda_gemv --mlx4-tc. Carry .devwork/s32e.tar.xz.
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start .devwork/s32e.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
DS4_SMALL_PDL=1 one test_qwen_next_cuda
DS4_SMALL_PDL=1 one test_deepseek_v4_cuda
one test_gemv_mlx4_tc
xz -9 "$OUT/tests.txt"
for r in a b; do for p in 0 1; do
  DS4_SMALL_PDL=$p COLS=2-8 step qwen_pdl${p}$r 30 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
done; done
step gemv_tc 60 '^(16384|2560|1280|4096)x' $B/bench_cuda_gemv --mlx4-tc
cp /tmp/steps/gemv_tc.txt "$OUT/" 2>/dev/null
