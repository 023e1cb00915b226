#!/usr/bin/env bash
# Session 32 (any GPU, ~5 min): the MLX q4 tensor-core GEMV with its x staging batched (every
# lane's loads of 8 groups issued together, the sums' butterflies interleaved) and the rows form on
# 1, 2 or 4 row tiles per block (by shape by default). test_gemv_mlx4_tc (rows == one-row at 1
# tile, bit for bit, at every tile setting), the Qwen batch / verify-batch tests with DS4_MLX4_TC=1
# (the rows form in a model), bench_cuda_gemv --mlx4-tc (session 31's table: tc at 1 / 2 / 4 / by
# shape tiles vs gemv, rows at 1 tile and by shape), then Qwen decode at 2K with DS4_MLX4_TC 0 / 1 and
# the ncu table of a decode step under DS4_MLX4_TC=1 (the tc launches' times against gemv's).
# Carry .devwork/s32c.tar.xz: TARGETS="test_gemv_mlx4_tc bench_cuda_gemv bench_qwen_next_cuda
# test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_glm5_mla_tc_cuda"
# BUNDLE=.devwork/s32c.tar.xz PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start .devwork/s32c.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
one test_gemv_mlx4_tc
DS4_MLX4_TC=1 one test_qwen_next_batch_cuda
DS4_MLX4_TC=1 one test_qwen_next_verify_batch_cuda
DS4_MLX4_TC=1 one test_qwen_next_cuda
one test_qwen_next_cuda  # (and the next: session 31's mma::for_each_acc in qsa_tc / mla_tc, unrun)
one test_glm5_mla_tc_cuda
xz -9 "$OUT/tests.txt"
step gemv_tc 90 '^(16384|2560|1280|4096)x' $B/bench_cuda_gemv --mlx4-tc
cp /tmp/steps/gemv_tc.txt "$OUT/" 2>/dev/null
COLS=2-8 step qwen_decode_tc0 45 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
DS4_MLX4_TC=1 COLS=2-8 step qwen_decode_tc1 45 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
DS4_MLX4_TC=1 survey qwen_tc 90 $B/bench_qwen_next_cuda synthetic-full 4 2048 --ncu-decode
