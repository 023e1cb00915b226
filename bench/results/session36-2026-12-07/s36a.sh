#!/usr/bin/env bash
# Session 36 call A (any GPU, ~8 min): session 35's wide gemv_rows default (never run as the
# default) and the fused hyper read over a chunk's rows (hyper_fused.cu rows form: the chunk's
# verify / batch rows up to DS4_HC_FUSED_ROWS, default 16, in 2 launches instead of 5).
# 1. tests: test_cuda_ops, test_qwen_hyper_fused_cuda (rows form == one-row read == the five
#    launches, bit for bit), the Qwen / GLM / DeepSeek model, batch, verify-batch and MTP tests;
#    the Qwen model / batch / verify-batch tests again with DS4_HC_FUSED_ROWS=0 (the unfused rows);
# 2. Qwen verify cost at 2K (k = 1..4), DS4_HC_FUSED_ROWS 0 / 16 / 0 / 16;
# 3. bench_cuda_gemv --rows (n = 9..16 now two launches of <= 8: DS4_GEMV_ROWS_SPLIT; session 35
#    call 2's table has the N = 16 form);
# 4. Qwen 16-stream batch at 2K: (fused rows 0, split 0) / (16, 0) / (16, 1), the last the default;
#    GLM's 16-stream batch, split 0 / 1; Qwen decode at 2K (the decode read is unchanged: session 35's
#    H100 figures for comparison).
# Build: TARGETS="$(cat bench/results/session36-2026-12-07/s36a.targets)" BUNDLE=.devwork/s36a.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session36-2026-12-07/s36a.sh", carry=[".devwork/s36a.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s36a.tar.xz}
use_bins
for t in test_cuda_ops test_qwen_hyper_fused_cuda test_qwen_next_verify_batch_cuda test_qwen_next_batch_cuda \
  test_qwen_next_cuda test_qwen_next_mtp_cuda test_glm5_verify_batch_cuda test_glm5_batch_cuda test_glm5_cuda \
  test_glm5_mtp_cuda test_deepseek_v4_verify_batch_cuda test_deepseek_v4_batch_cuda test_deepseek_v4_cuda; do
  one $t
done
for t in test_qwen_next_verify_batch_cuda test_qwen_next_batch_cuda test_qwen_next_cuda; do
  DS4_HC_FUSED_ROWS=0 one $t
done
PAT="FAIL|rows form|bit-identical to gemv" tests
for r in 0 16 0 16; do
  DS4_HC_FUSED_ROWS=$r step qv_F$r 60 '^\| [1-4] \|' $B/bench_qwen_next_cuda synthetic-full 2 2048 --verify=2048
done
for f in /tmp/steps/qv_F*.txt; do echo "=== $f"; grep -A8 "verify cost" "$f"; done >> "$OUT/ab.txt"
step rows 90 '^(MLX_Q4_g64|Q8_0/dir|Q2_K/dir) +4096x4096 +R0' $B/bench_cuda_gemv --rows 5
cp /tmp/steps/rows.txt "$OUT/rows_table.txt"
for fs in "0 0" "16 0" "16 1"; do
  set -- $fs
  DS4_HC_FUSED_ROWS=$1 DS4_GEMV_ROWS_SPLIT=$2 COLS=2-7 step qb_F$1_S$2 90 '^\| (1|16) \| [0-9]' $B/bench_qwen_next_cuda synthetic-full 32 2048 --batch 16 --batch-rows 16
done
COLS=2-8 step qd 50 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 64 2048
for sp in 0 1; do
  late 420 || DS4_GEMV_ROWS_SPLIT=$sp COLS=2-7 step gb_S$sp 80 '^\| (1|16) \| [0-9]' $B/bench_glm5_cuda synthetic-full:q2_k:160 32 2048 --batch 16 --batch-rows 16
done
for f in /tmp/steps/qb_F*.txt /tmp/steps/gb_S*.txt /tmp/steps/qd.txt; do echo "=== $f"; cat "$f"; done | cut -c1-400 >> "$OUT/ab.txt"
# 5. Where Qwen's 2-row verify forward goes now (per-op table, ncu per kernel).
late 470 || survey qv1 90 $B/bench_qwen_next_cuda synthetic-full 2 2048 --ncu-verify=1
[ -f /tmp/steps/qv1_out.txt ] && sed -n '/per-op GPU time of one forward/,/^$/p' /tmp/steps/qv1_out.txt > "$OUT/ops_qv1.txt"
