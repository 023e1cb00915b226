#!/usr/bin/env bash
# Session 33 (any GPU, ~7 min): (1) gemv_persist_kernel (DS4_GEMV_PERSIST / gemv_set_persist 1, 2,
# 4 waves of the resident blocks; the same bits as gemv): test_cuda_ops (its bitwise checks), then
# bench_cuda_gemv --persist (% of copy on Qwen's MLX q4, DeepSeek's Q8_0 and BF16 shapes), then
# Qwen decode A/Bs over DS4_GEMV_PERSIST x DS4_SMALL_PDL; (2) session 32's s32d.sh items: the model
# tests with DS4_SMALL_PDL=1 and DS4_MLX4_TC=1, test_gemv_mlx4_tc, bench_cuda_gemv --mlx4-tc, the
# SMALL_PDL decode A/Bs of DeepSeek and GLM, Qwen decode with DS4_MLX4_TC=1. H200: 43-layer
# DeepSeek, GLM 288 experts; other GPUs: 30 layers, 160 experts. Carry .devwork/s33a.tar.xz
# (TARGETS in s33a.targets): run(command="BUNDLE=.devwork/s33a.tar.xz LIMIT=<s> bash
# bench/results/session33-2026-12-07/s33a.sh", carry=[".devwork/s33a.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s33a.tar.xz}
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
if grep -q H200 "$OUT/gpu.txt"; then cfg=deepseek_v4_flash glm=synthetic-full; else cfg=bench/cuda_deepseek_v4/flash30_config.json glm=synthetic-full:q2_k:160; fi
(t0=$(date +%s); timeout 200 $B/ds4-convert --synthetic $cfg /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1; echo "convert $cfg exit $? in $(( $(date +%s) - t0 )) s" >> $OUT/summary.txt) &
one test_cuda_ops
grep -E "gemv_persist|FAIL" "$OUT/tests.txt" | head -40 >> "$OUT/summary.txt"
step gemv_persist 90 '^(MLX|Q8_0|BF16)' $B/bench_cuda_gemv --persist
cp /tmp/steps/gemv_persist.txt "$OUT/" 2>/dev/null
for r in a b; do for p in 0 1 2; do for s in 0 1; do
  DS4_GEMV_PERSIST=$p DS4_SMALL_PDL=$s COLS=2-8 step qwen_p${p}s${s}$r 40 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
done; done; done
one test_gemv_mlx4_tc
for t in test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_deepseek_v4_cuda \
  test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda test_glm5_cuda test_glm5_batch_cuda; do
  DS4_SMALL_PDL=1 DS4_GEMV_PERSIST=1 one $t
done
for t in test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda; do DS4_MLX4_TC=1 one $t; done
one test_glm5_mla_tc_cuda
one test_qwen_hyper_fused_cuda
xz -9 "$OUT/tests.txt"
step gemv_tc 90 '^(16384|2560|1280|4096)x' $B/bench_cuda_gemv --mlx4-tc
cp /tmp/steps/gemv_tc.txt "$OUT/" 2>/dev/null
DS4_MLX4_TC=1 COLS=2-8 step qwen_tc1 40 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
wait
for r in a b; do for sp in 00 10 11; do
  DS4_SMALL_PDL=${sp:0:1} DS4_GEMV_PERSIST=${sp:1:1} step ds_s${sp:0:1}p${sp:1:1}$r 50 '^decode:|^roofline' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32
done; done
rm -f /dev/shm/f.gguf
for sp in 00 10 11; do
  DS4_SMALL_PDL=${sp:0:1} DS4_GEMV_PERSIST=${sp:1:1} COLS=2-8 step glm_s${sp:0:1}p${sp:1:1} 60 '^\| *2048 \|' $B/bench_glm5_cuda $glm 16 2048
done
DS4_GEMV_PERSIST=1 survey qwen_p1 90 $B/bench_qwen_next_cuda synthetic-full 4 2048 --ncu-decode
