#!/usr/bin/env bash
# Session 36 call D (any GPU, ~2.5 min): the fused hyper read's rows side by side, fixed (call C: an
# illegal address in every Qwen model test with DS4_HC_FUSED_ROWS=16: hc_down's dots sat past the
# shared memory of fewer than 4 rows; test_qwen_hyper_fused_cuda now takes 2 rows as well as 5).
# 1. tests: test_qwen_hyper_fused_cuda; the Qwen model / batch / verify-batch / MTP tests with
#    DS4_HC_FUSED_ROWS=16 (the chunk's rows through the fused read: rows == decode steps) and without;
# 2. Qwen verify cost at 2K (k = 1..4), DS4_HC_FUSED_ROWS 0 / 16 twice (call C's P1_F0 is the baseline);
#    and DS4_GEMV_ROWS_R 4 / 8 twice (under PDL call C's gemv_rows table favours R 4 for MLX q4 at
#    n <= 4, where session 35 (plain launches) measured R 8 best end to end);
# 3. Qwen 16-stream batch at 2K, DS4_HC_FUSED_ROWS 0 / 16.
# Build: TARGETS="$(cat bench/results/session36-2026-12-07/s36d.targets)" BUNDLE=.devwork/s36d.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session36-2026-12-07/s36d.sh", carry=[".devwork/s36d.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s36d.tar.xz}
use_bins
for t in test_qwen_next_verify_batch_cuda test_qwen_next_batch_cuda test_qwen_next_cuda test_qwen_next_mtp_cuda; do
  DS4_HC_FUSED_ROWS=16 one $t
done
PAT="FAIL|rows form" tests test_qwen_hyper_fused_cuda test_qwen_next_verify_batch_cuda test_qwen_next_batch_cuda \
  test_qwen_next_cuda test_qwen_next_mtp_cuda
for f in 0 16 0 16; do
  DS4_HC_FUSED_ROWS=$f step qv_F$f 60 '^\| [1-4] \|' $B/bench_qwen_next_cuda synthetic-full 2 2048 --verify=2048
done
for r in 4 8 4 8; do
  DS4_GEMV_ROWS_R=$r step qv_R$r 60 '^\| [1-4] \|' $B/bench_qwen_next_cuda synthetic-full 2 2048 --verify=2048
done
for f in /tmp/steps/qv_*.txt; do echo "=== $f"; grep -A8 "verify cost" "$f"; done >> "$OUT/ab.txt"
for f in 0 16; do
  DS4_HC_FUSED_ROWS=$f COLS=2-7 step qb_F$f 90 '^\| (1|16) \| [0-9]' $B/bench_qwen_next_cuda synthetic-full 32 2048 --batch 16 --batch-rows 16
done
for f in /tmp/steps/qb_F*.txt; do echo "=== $f"; cat "$f"; done | cut -c1-300 >> "$OUT/ab.txt"
