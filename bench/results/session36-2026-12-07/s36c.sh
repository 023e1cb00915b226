#!/usr/bin/env bash
# Session 36 call C (any GPU, ~6 min): gemv_rows as a programmatic dependent (unrouted launches of
# one entry; DS4_GEMV_ROWS_PDL=0: plain) and the fused hyper read's rows side by side (4 at a time;
# DS4_HC_FUSED_ROWS=16 turns it on for the chunk), neither run before.
# 1. tests: test_gemv_pdl (gemv_rows after a late writer), test_qwen_hyper_fused_cuda, test_cuda_ops, the Qwen / GLM / DeepSeek
#    model, batch, verify-batch and MTP tests; Qwen's model / batch / verify-batch tests with
#    DS4_HC_FUSED_ROWS=16 first (the chunk's rows through the fused read: rows == decode steps);
# 2. bench_cuda_gemv --rows at DS4_GEMV_ROWS_PDL 1 / 0 (n = 1 against one gemv: call A's table had
#    1.5-1.6x at the default forms);
# 3. Qwen verify cost at 2K (k = 1..4), (DS4_GEMV_ROWS_PDL, DS4_HC_FUSED_ROWS) (0, 0) / (1, 0) /
#    (1, 16) twice: the fused hyper read's rows now side by side, 4 at a time (test_qwen_hyper_fused_cuda);
# 4. 16-stream batches at 2K: Qwen (PDL, fused rows) (0, 0) / (1, 0) / (1, 16) with its per-op table
#    (--batch-profile), GLM DS4_GEMV_ROWS_PDL 0 / 1 (call A, split on: Qwen 207.3 with fused rows 16,
#    GLM 120.8 tok/s).
# Build: TARGETS="$(cat bench/results/session36-2026-12-07/s36c.targets)" BUNDLE=.devwork/s36c.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session36-2026-12-07/s36c.sh", carry=[".devwork/s36c.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s36c.tar.xz}
use_bins
for t in test_qwen_next_verify_batch_cuda test_qwen_next_batch_cuda test_qwen_next_cuda; do
  DS4_HC_FUSED_ROWS=16 one $t
done
PAT="FAIL|bit-identical to gemv|gemv_rows of 3|rows form" tests test_gemv_pdl test_qwen_hyper_fused_cuda test_cuda_ops test_qwen_next_verify_batch_cuda \
  test_qwen_next_batch_cuda test_qwen_next_cuda test_qwen_next_mtp_cuda test_glm5_verify_batch_cuda test_glm5_batch_cuda \
  test_glm5_cuda test_glm5_mtp_cuda test_deepseek_v4_verify_batch_cuda test_deepseek_v4_batch_cuda test_deepseek_v4_cuda
for p in 1 0; do
  DS4_GEMV_ROWS_PDL=$p step rows_P$p 90 '^(MLX_Q4_g64|Q8_0/dir|Q2_K/dir|BF16) +(4096x4096|1280x2560) +R0' $B/bench_cuda_gemv --rows 5
done
for p in 1 0; do echo "=== DS4_GEMV_ROWS_PDL=$p"; cat /tmp/steps/rows_P$p.txt; done > "$OUT/rows_tables.txt"
for pf in "0 0" "1 0" "1 16" "0 0" "1 0" "1 16"; do
  set -- $pf
  DS4_GEMV_ROWS_PDL=$1 DS4_HC_FUSED_ROWS=$2 step qv_P$1_F$2 60 '^\| [1-4] \|' $B/bench_qwen_next_cuda synthetic-full 2 2048 --verify=2048
done
for f in /tmp/steps/qv_P*.txt; do echo "=== $f"; grep -A8 "verify cost" "$f"; done >> "$OUT/ab.txt"
for pf in "0 0" "1 0" "1 16"; do
  set -- $pf
  DS4_GEMV_ROWS_PDL=$1 DS4_HC_FUSED_ROWS=$2 COLS=2-7 step qb_P$1_F$2 90 '^\| (1|16) \| [0-9]' $B/bench_qwen_next_cuda synthetic-full 32 2048 --batch 16 --batch-rows 16 --batch-profile
done
for p in 0 1; do
  late 400 || DS4_GEMV_ROWS_PDL=$p COLS=2-7 step gb_P$p 80 '^\| (1|16) \| [0-9]' $B/bench_glm5_cuda synthetic-full:q2_k:160 32 2048 --batch 16 --batch-rows 16
done
for f in /tmp/steps/qb_P*.txt /tmp/steps/gb_P*.txt; do echo "=== $f"; cat "$f"; done | cut -c1-300 >> "$OUT/ab.txt"
