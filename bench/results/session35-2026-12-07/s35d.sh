#!/usr/bin/env bash
# Session 35 call 3 (any GPU, ~2.5 min): the wide gemv_rows forms as the default (gemv.cu
# rows_default): test_cuda_ops, the Qwen / GLM / DeepSeek model, batch, verify-batch and MTP tests at
# the default, then Qwen's verify cost at 2K (k = 1..4) at the default.
# Build: TARGETS="$(cat bench/results/session35-2026-12-07/s35d.targets)" BUNDLE=.devwork/s35d.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session35-2026-12-07/s35d.sh", carry=[".devwork/s35d.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s35d.tar.xz}
use_bins
tests test_cuda_ops test_qwen_next_verify_batch_cuda test_qwen_next_batch_cuda test_qwen_next_cuda test_qwen_next_mtp_cuda \
  test_glm5_verify_batch_cuda test_glm5_batch_cuda test_glm5_cuda test_glm5_mtp_cuda test_deepseek_v4_verify_batch_cuda \
  test_deepseek_v4_batch_cuda test_deepseek_v4_cuda
step qv 60 '^\| [1-4] \|' $B/bench_qwen_next_cuda synthetic-full 2 2048 --verify=2048
grep -A8 "verify cost" /tmp/steps/qv.txt > "$OUT/verify.txt"
