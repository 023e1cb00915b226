#!/usr/bin/env bash
# Session 39 call B (any GPU, ~3.5 min): the defaults after call 1 (hc cluster form on, but only for
# as many rows as the device holds clusters at once; mla_output in 8 spans), tested, and the
# 16-stream steps A/B against the hc cluster form off (call 1: 16 rows in clusters lost 2.9 % of
# DeepSeek's 16-stream step). Two rounds each: DeepSeek (H200: 43 layers, else 30) decode at 1K with
# 1 and 16 streams, GLM at 2K with 1 and 16 streams.
# Build: TARGETS="$(cat bench/results/session38-2026-12-07/s38c.targets) bench_qwen_next_cuda"
# BUNDLE=.devwork/s39.tar.xz PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session39-2026-12-08/s39b.sh", carry=[".devwork/s39.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s39.tar.xz}
synthetic_start
one test_cuda_hc_fused
one test_glm5_mla_output_cuda
for t in test_deepseek_v4_cuda test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda test_glm5_cuda \
  test_glm5_batch_cuda test_glm5_verify_batch_cuda; do
  one $t "$PWD"
done
grep -E "FAIL|cluster form" "$OUT/tests.txt" | cut -c1-220 | head -40 >> "$OUT/summary.txt"
xz -9 "$OUT/tests.txt"
for r in a b; do
  DS4_HC_CLUSTER=0 COLS=2-11 step glm_C0$r 60 "^\| *2048 \||^\| (1|16) \| [0-9]" $B/bench_glm5_cuda $glm 16 2048 --batch 16 --batch-rows 16
  COLS=2-11 step glm_C1$r 60 "^\| *2048 \||^\| (1|16) \| [0-9]" $B/bench_glm5_cuda $glm 16 2048 --batch 16 --batch-rows 16
done
wait
for r in a b; do
  DS4_HC_CLUSTER=0 step ds_C0$r 90 "^decode|^\| (1|16) \| [0-9]" $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --batch 16 --batch-rows 16 --old-max 0
  step ds_C1$r 90 "^decode|^\| (1|16) \| [0-9]" $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --batch 16 --batch-rows 16 --old-max 0
done
rm -f /dev/shm/f.gguf
