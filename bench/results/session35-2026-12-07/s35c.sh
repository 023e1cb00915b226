#!/usr/bin/env bash
# Session 35 call 2 (any GPU, ~6 min): gemv_rows' wide forms (DS4_GEMV_ROWS_R 4 / 8: R weight rows
# a block, decoding per input row in order so that they fit in registers; the same bits as gemv)
# against the default (MLX R = 2 expand-once, others R = 4), and where Qwen's verify goes.
# 1. tests: test_cuda_ops (gemv_rows == gemv at R 0 / 2 / 4 / 8), the Qwen / GLM verify-batch and
#    model tests under DS4_GEMV_ROWS_R=8 (verify rows == decode steps bit for bit);
# 2. bench_cuda_gemv --rows: n rows / one gemv at R0 / R2 / R4 / R8 per format;
# 3. Qwen verify cost k = 1..4 at 2K under DS4_GEMV_ROWS_R = 0 / 8 / 4 / 0;
# 4. bench_qwen_next_cuda --ncu-verify=1 (per-op table + per-kernel ncu of one 2-row forward);
# 5. ncu sections of gemv / gemv_rows (bench_cuda_gemv --rows-profile);
# 6. H200 only: the issues' figures (DeepSeek 43 layers, Qwen prefill / decode 2K-32K, GLM 288).
# Build: TARGETS="$(cat bench/results/session35-2026-12-07/s35c.targets)" BUNDLE=.devwork/s35c.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session35-2026-12-07/s35c.sh", carry=[".devwork/s35c.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s35c.tar.xz}
use_bins
synthetic_sizes
h200=0; grep -q H200 "$OUT/gpu.txt" && h200=1
[ $h200 = 1 ] && synthetic_start
one test_cuda_ops
grep -E "weight rows setting|bit-identical to gemv" "$OUT/tests.txt" >> "$OUT/summary.txt"
for t in test_qwen_next_verify_batch_cuda test_qwen_next_batch_cuda test_qwen_next_cuda test_glm5_verify_batch_cuda test_glm5_batch_cuda; do
  DS4_GEMV_ROWS_R=8 one $t
done
PAT="FAIL" tests
step rows 90 '^(MLX_Q4_g64|Q8_0/dir|Q2_K/dir) +4096x4096' $B/bench_cuda_gemv --rows 5
cp /tmp/steps/rows.txt "$OUT/rows_table.txt"
for r in 0 8 4 0; do
  DS4_GEMV_ROWS_R=$r step qv_R$r 60 '^\| [1-4] \|' $B/bench_qwen_next_cuda synthetic-full 2 2048 --verify=2048
done
for f in /tmp/steps/qv_R*.txt; do echo "=== $f"; grep -A8 "verify cost" "$f"; done > "$OUT/verify_ab.txt"
survey qv1 100 $B/bench_qwen_next_cuda synthetic-full 2 2048 --ncu-verify=1
sed -n '/per-op GPU time of one forward/,/^$/p' /tmp/steps/qv1_out.txt > "$OUT/ops_qv1.txt"
head -30 "$OUT/ops_qv1.txt" | cut -c1-160 >> "$OUT/summary.txt"
late $(( ${LIMIT:-585} - 120 )) || sections rows 100 $B/bench_cuda_gemv --rows-profile
[ $h200 = 1 ] || exit 0
late $(( ${LIMIT:-585} - 150 )) && exit 0
wait
step ds 150 '^decode:|^roofline|^\| (1|16) \| [0-9]|^\| *(2048|8192|32768) \|' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --batch 1,16 --batch-rows 16 --prefill 2048,8192,32768 --prefill-rows 2048 --old-max 0
step qwen_prefill 60 '^\| *(2048|8192|32768) \|' $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=2048 --old-max=0
COLS=2-8 step qwen_decode 50 '^\| *(2048|32768) \|' $B/bench_qwen_next_cuda synthetic-full 32 2048,32768
for f in /tmp/steps/ds.txt /tmp/steps/qwen_*.txt; do [ -f "$f" ] && { echo "=== $f"; cat "$f"; }; done > "$OUT/figures.txt"
