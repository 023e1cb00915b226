#!/usr/bin/env bash
# Session 34 call 2 (any GPU, ~6 min): the subnormal dot2 (MlxAffine, Q2_KC: x scaled by 2^80, each
# field read as a subnormal float, one AND a weight instead of AND + OR + FADD). Tests first
# (test_cuda_ops's gemv_scaled_x memcmps gemv == gemv_rows over x in 2^-40..2^40; the model tests),
# then new (s34a) against old (s33b: the code before) alternating: bench_cuda_gemv's format table,
# Qwen decode at 2K, GLM decode at 2K.
# Build: TARGETS="$(cat bench/results/session34-2026-12-07/s34a.targets)" BUNDLE=.devwork/s34a.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session34-2026-12-07/s34a.sh", carry=[".devwork/s34a.tar.xz", ".devwork/s33b.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
mkdir -p /tmp/old && tar -C /tmp/old -xJf .devwork/s33b.tar.xz || exit 3
O=/tmp/old/cudabins
call_start ${BUNDLE:-.devwork/s34a.tar.xz}
use_bins
synthetic_sizes
for t in test_cuda_ops test_gemv_decode test_gemv_pdl test_qwen_next_cuda test_qwen_next_batch_cuda \
  test_qwen_next_verify_batch_cuda test_qwen_hyper_fused_cuda test_qwen_decode_kernels_cuda test_glm5_cuda \
  test_glm5_batch_cuda test_deepseek_v4_cuda test_deepseek_v4_batch_cuda; do
  one $t
done
grep -E "gemv_scaled_x|FAIL|bit-identical" "$OUT/tests.txt" | head -60 >> "$OUT/summary.txt"
xz -9 "$OUT/tests.txt"
step gemv_new 90 '^(MLX|Q2_K)' $B/bench_cuda_gemv 10 --no-sweep
LD_LIBRARY_PATH=$O/lib:$LD_LIBRARY_PATH step gemv_old 90 '^(MLX|Q2_K)' $O/bench_cuda_gemv 10 --no-sweep
cp /tmp/steps/gemv_new.txt /tmp/steps/gemv_old.txt "$OUT/"
for r in a b; do
  LD_LIBRARY_PATH=$O/lib:$LD_LIBRARY_PATH COLS=2-8 step qwen_old$r 40 '^\| *2048 \|' $O/bench_qwen_next_cuda synthetic-full 32 2048
  COLS=2-8 step qwen_new$r 40 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
done
for r in a b; do
  LD_LIBRARY_PATH=$O/lib:$LD_LIBRARY_PATH COLS=2-8 step glm_old$r 60 '^\| *2048 \|' $O/bench_glm5_cuda $glm 16 2048
  COLS=2-8 step glm_new$r 60 '^\| *2048 \|' $B/bench_glm5_cuda $glm 16 2048
done
