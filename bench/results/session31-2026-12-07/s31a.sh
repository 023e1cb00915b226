#!/usr/bin/env bash
# Session 31 call A (session 30's unrun s30f.sh, which it replaces, plus this session's forms), any GPU (~8 min): gemv_mlx4_tc (MLX q4 on BF16 tensor cores with x in three exact
# BF16 parts; written this session, unrun) and Qwen's top-k by warps (DS4_QWEN_ROUTE_WARPS=1, unrun).
# Carry .devwork/s31.tar.xz (TARGETS="test_gemv_mlx4_tc bench_cuda_gemv bench_qwen_next_cuda
# test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_qwen_next_mtp_cuda test_qwen_hyper_fused_cuda").
#  1. test_gemv_mlx4_tc (vs a double reference), bench_cuda_gemv --mlx4-tc (gemv vs tc, % of copy);
#  2. the Qwen model tests with DS4_QWEN_ROUTE_WARPS=1; test_qwen_hyper_fused_cuda and
#     test_qwen_next_cuda with DS4_HC_PDL=1 (session 31: hc_up_combine as hc_down's programmatic dependent);
#  3. Qwen decode at 2K: DS4_MLX4_TC 0 / 1 alternated (the tc kernel for every MLX q4 product
#     through gemv / gemv_batched); DS4_QWEN_ROUTE_WARPS 0 / 1 alternated; DS4_HC_PDL 0 / 1; tc at 2 and 4 row tiles per block; the
#     per-op table with tc on (each step only while LIMIT leaves time);
#     the ncu per-kernel table of one decode step with tc on (kernels_qwen_tc.md: the tc kernel per
#     shape, and the hc reads against session 30 call 1's 11.8 / 8.5 us);
#  4. (first, after 2.) the Qwen model tests with DS4_MLX4_TC=1: gemv_rows takes gemv_mlx4_tc_rows
#     then (session 31), so decode = chunk / batch / verify rows must hold bit for bit on the tc path.
set -u
LIMIT=${LIMIT:-570}
STEP_DIR=/tmp/steps  # the decode runs' files stay there (the device returns ~8 files); the profile is copied
. bench/device_call_lib.sh
call_start .devwork/s31.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
one test_gemv_mlx4_tc
one test_qwen_hyper_fused_cuda
grep -E "^(ok|FAIL)" $OUT/tests.txt | cut -c1-200 | tee -a $OUT/summary.txt
timeout 90 $B/bench_cuda_gemv --mlx4-tc 20 > $OUT/gemv_tc.txt 2>&1; echo "bench_cuda_gemv --mlx4-tc exit $?" | tee -a $OUT/summary.txt
tail -14 $OUT/gemv_tc.txt | cut -c1-220 | tee -a $OUT/summary.txt
export DS4_QWEN_ROUTE_WARPS=1
for t in test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_qwen_next_mtp_cuda; do one $t .; done
unset DS4_QWEN_ROUTE_WARPS
echo "=== DS4_HC_PDL=1" >> $OUT/tests.txt
DS4_HC_PDL=1 one test_qwen_hyper_fused_cuda
DS4_HC_PDL=1 one test_qwen_next_cuda .
echo "=== DS4_MLX4_TC=1 (decode, batch and verify rows all on the tc kernels: the model tests' bit checks)" >> $OUT/tests.txt
for t in test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_qwen_next_mtp_cuda; do DS4_MLX4_TC=1 one $t .; done
grep -E "FAIL" $OUT/tests.txt | head -5 | cut -c1-200 | tee -a $OUT/summary.txt
ab_round() {  # each A/B once
  for v in 0 1; do
    DS4_MLX4_TC=$v step qwen_tc_$v 45 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
  done
  for v in 0 1; do
    DS4_QWEN_ROUTE_WARPS=$v step qwen_route_$v 45 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
  done
  for v in 0 1; do
    DS4_HC_PDL=$v step qwen_hcpdl_$v 45 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
  done
}
ab_round
DS4_MLX4_TC=1 DS4_MLX4_TC_TILES=2 step qwen_tc_tiles2 45 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
DS4_MLX4_TC=1 DS4_MLX4_TC_TILES=4 step qwen_tc_tiles4 45 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
DS4_MLX4_TC=1 survey qwen_tc 100 $B/bench_qwen_next_cuda synthetic-full 4 2048 --ncu-decode
ab_round  # the second round, while the call's time lasts
DS4_MLX4_TC=1 step qwen_tc_profile 60 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048 --profile
cp /tmp/steps/qwen_tc_profile.txt $OUT/ 2>/dev/null
(cd /tmp/steps && tar -cJf $OUT/steps.tar.xz .)
