#!/usr/bin/env bash
# Session 34 call 3 (any GPU, ~7 min): s34b = call 2's code with MlxAffine's dot2 / expand on one
# field reader (fields<>, chains: the same sums) and Q2_KC's planes summed before d / dmin multiply
# (d * sum sc sq - dmin * sum mn sx, another rounding order). Tests (test_cuda_ops, the Qwen and GLM
# model / batch / verify / MTP tests), then s34b against s34a (call 2's code) alternating: GLM decode
# at 2K (Q2_KC), Qwen decode at 2K (the refactor: same SASS work), then the per-kernel ncu tables of
# a Qwen and a GLM decode step at the new code.
# Build: TARGETS="$(cat bench/results/session34-2026-12-07/s34b.targets)" BUNDLE=.devwork/s34b.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session34-2026-12-07/s34b.sh", carry=[".devwork/s34b.tar.xz", ".devwork/s34a.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
mkdir -p /tmp/old && tar -C /tmp/old -xJf .devwork/s34a.tar.xz || exit 3
O=/tmp/old/cudabins
call_start ${BUNDLE:-.devwork/s34b.tar.xz}
use_bins
synthetic_sizes
for t in test_cuda_ops test_gemv_pdl test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda \
  test_qwen_hyper_fused_cuda test_qwen_next_mtp_cuda test_glm5_cuda test_glm5_batch_cuda test_glm5_verify_batch_cuda \
  test_glm5_mtp_cuda; do
  one $t
done
grep -E "gemv_scaled_x_Q|FAIL|bit-identical" "$OUT/tests.txt" | head -30 >> "$OUT/summary.txt"
xz -9 "$OUT/tests.txt"
for r in a b; do
  LD_LIBRARY_PATH=$O/lib:$LD_LIBRARY_PATH COLS=2-8 step glm_old$r 60 '^\| *2048 \|' $O/bench_glm5_cuda $glm 16 2048
  COLS=2-8 step glm_new$r 60 '^\| *2048 \|' $B/bench_glm5_cuda $glm 16 2048
done
for r in a b; do
  LD_LIBRARY_PATH=$O/lib:$LD_LIBRARY_PATH COLS=2-8 step qwen_old$r 40 '^\| *2048 \|' $O/bench_qwen_next_cuda synthetic-full 32 2048
  COLS=2-8 step qwen_new$r 40 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
done
survey qwen 90 $B/bench_qwen_next_cuda synthetic-full 4 2048 --ncu-decode
survey glm 150 $B/bench_glm5_cuda $glm 4 2048 --ncu-decode
