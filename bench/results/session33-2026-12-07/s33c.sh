#!/usr/bin/env bash
# For session 34 (any GPU, ~3 min): gemv_one_unit_kernel (DS4_GEMV_ONE_UNIT, written after call 7,
# unrun): test_cuda_ops (its memcmps against gemv at every rows-per-block, one launch and routed),
# bench_mlx4_warp_rows (column 1u beside gemv and the harness's forms), the Qwen model tests with
# it on (and test_glm5_cuda), Qwen decode A/B 0 / 1 / 0 / 1 at 2K, GLM decode A/B at 2K. Build: TARGETS="$(cat
# bench/results/session33-2026-12-07/s33c.targets)" BUNDLE=.devwork/s33c.tar.xz PRESET=cuda-pack
# tools/device/pack_cuda_bins.sh --build; run(command="BUNDLE=.devwork/s33c.tar.xz bash
# bench/results/session33-2026-12-07/s33c.sh", carry=[".devwork/s33c.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s33c.tar.xz}
use_bins
synthetic_sizes
one test_cuda_ops
grep -E "gemv_one_unit|FAIL" "$OUT/tests.txt" | head -60 >> "$OUT/summary.txt"
step forms 60 '^[0-9]+x' $B/bench_mlx4_warp_rows 20
cp /tmp/steps/forms.txt "$OUT/"
for t in test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_qwen_hyper_fused_cuda \
  test_glm5_cuda; do
  DS4_GEMV_ONE_UNIT=1 one $t
done
xz -9 "$OUT/tests.txt"
for r in a b; do for u in 0 1; do
  DS4_GEMV_ONE_UNIT=$u COLS=2-8 step qwen_u$u$r 40 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
done; done
# GLM's dense Q8_0 products (4096 columns: one unit a thread at 128 threads) take it too
for r in a b; do for u in 0 1; do
  DS4_GEMV_ONE_UNIT=$u COLS=2-8 step glm_u$u$r 60 '^\| *2048 \|' $B/bench_glm5_cuda $glm 16 2048
done; done
