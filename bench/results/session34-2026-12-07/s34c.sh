#!/usr/bin/env bash
# Session 34 call 4 (any GPU, ~7 min): s34c = call 3's code with Q8_0's fields moved under the
# exponent by one byte permute (mant_byte: PRMT + FADD + FFMA a weight instead of AND + OR + FADD +
# FFMA; the same bits) and MLX's gemv_rows expand on subnormals too (dot_e on scaled x: one AND a
# weight for the decode-once form of verify windows and batches; the same bits). Tests
# (test_cuda_ops, grouped GEMM / MMA fragment tests: Q8_0's decode, the GLM, DeepSeek and Qwen model /
# batch / verify / MTP tests), bench_cuda_gemv new vs old (s34b), GLM decode at 2K A/B alternating,
# GLM prefill 2K A/B, Qwen verify k+1 = 2..5 rows A/B; on an H200 also the issues' figures (session
# 30's s30d.sh steps). LIMIT (seconds, default 585) skips the steps that would pass it.
# Build: TARGETS="$(cat bench/results/session34-2026-12-07/s34c.targets)" BUNDLE=.devwork/s34c.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session34-2026-12-07/s34c.sh", carry=[".devwork/s34c.tar.xz", ".devwork/s34b.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
old_start .devwork/s34b.tar.xz
call_start ${BUNDLE:-.devwork/s34c.tar.xz}
synthetic_start
tests test_cuda_ops test_gemv_pdl test_cuda_grouped_gemm test_grouped_mma_frag test_glm5_cuda test_glm5_batch_cuda \
  test_glm5_verify_batch_cuda test_glm5_mtp_cuda test_glm5_mla_tc_cuda test_deepseek_v4_cuda test_deepseek_v4_batch_cuda \
  test_deepseek_v4_verify_batch_cuda test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda \
  test_qwen_next_mtp_cuda test_qwen_hyper_fused_cuda
COLS=2-8 ab glm 60 '^\| *2048 \|' bench_glm5_cuda $glm 16 2048
ROUNDS=a ab qv 60 'rows|floor|^\| *[2-5] \|' bench_qwen_next_cuda synthetic-full 4 2048 --verify=2048
for f in /tmp/steps/qv_*.txt; do echo "=== $f"; cat "$f"; done > "$OUT/verify_ab.txt"
ROUNDS=a ab gemv 60 '^(Q8_0|Q4_K)' bench_cuda_gemv 10 --no-sweep
cp /tmp/steps/gemv_olda.txt "$OUT/gemv_old.txt" 2>/dev/null; cp /tmp/steps/gemv_newa.txt "$OUT/gemv_new.txt" 2>/dev/null
ROUNDS=a ab glmp 60 '^\| *2048 \|' bench_glm5_cuda $glm 0 2048 --prefill 2048 --old 0 --prefill-rows 2048
late $(( ${LIMIT:-585} - 100 )) && exit 0  # (no time left for the converted model's steps)
wait
if grep -q H200 "$OUT/gpu.txt"; then
  step ds 200 '^decode:|^roofline|^\| (1|16) \| [0-9]|^\| *(2048|8192|32768) \|' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --profile --batch 1,16 --batch-rows 16 --prefill 2048,8192,32768 --prefill-rows 2048 --old-max 0
  step qwen_prefill 60 '^\| *(2048|8192|32768) \|' $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=2048 --old-max=0
  COLS=2-8 step qwen_decode 50 '^\| *(2048|32768) \|' $B/bench_qwen_next_cuda synthetic-full 32 2048,32768
else
  # (session 33's H100 figure at this config: 177.5 / 177.2 tok/s; s34b has no DeepSeek bench)
  COLS=2-8 step ds_decode 90 '^decode:|^roofline' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32
fi
for f in /tmp/steps/ds*.txt /tmp/steps/qwen_*.txt; do [ -f "$f" ] && { echo "=== $f"; cat "$f"; }; done > "$OUT/figures.txt"
