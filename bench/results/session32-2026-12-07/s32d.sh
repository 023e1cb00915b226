#!/usr/bin/env bash
# Session 32 (any GPU, ~6 min): (1) DS4_SMALL_PDL (the models' small kernels as programmatic
# dependents: every kernel of the Qwen family, DeepSeek's attention / compressor / indexer / MoE and
# GLM's MLA / indexer / KDA / MoE kernels, the shared conv1d, delta rule, top-k, rmsnorm and
# activations, each opening with pdl_begin): the model tests with it on (decode = chunk rows bit
# for bit, the goldens), then decode A/Bs of the three families, 0 / 1 / 0 / 1; (2) the MLX q4
# tensor-core GEMV with batched staging and the rows form on 1-4 row tiles (session 32):
# test_gemv_mlx4_tc, the Qwen batch / verify tests with DS4_MLX4_TC=1, bench_cuda_gemv --mlx4-tc,
# Qwen decode with DS4_MLX4_TC=1 and its ncu table. H200: 43-layer DeepSeek, GLM 288 experts;
# other GPUs: 30 layers, 160 experts. Carry .devwork/s32d.tar.xz (TARGETS in s32d.targets; packed at
# 3d3c3c7) or BUNDLE=.devwork/s32e.tar.xz (the same targets at the commit after it that keeps Qwen's fused
# hc read under DS4_MLX4_TC). QUICK=1 (~150 s, a budget's end): Qwen's and DeepSeek's model tests
# with DS4_SMALL_PDL=1, test_gemv_mlx4_tc, the Qwen A/B and bench_cuda_gemv --mlx4-tc only.
set -u
quick=${QUICK:-0}
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s32d.tar.xz}
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
if grep -q H200 "$OUT/gpu.txt"; then cfg=deepseek_v4_flash glm=synthetic-full; else cfg=bench/cuda_deepseek_v4/flash30_config.json glm=synthetic-full:q2_k:160; fi
[ "$quick" = 1 ] || (t0=$(date +%s); timeout 200 $B/ds4-convert --synthetic $cfg /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1; echo "convert $cfg exit $? in $(( $(date +%s) - t0 )) s" >> $OUT/summary.txt) &
one test_gemv_mlx4_tc
pdl_tests="test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_deepseek_v4_cuda
  test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda test_glm5_cuda test_glm5_batch_cuda"
[ "$quick" = 1 ] && pdl_tests="test_qwen_next_cuda test_deepseek_v4_cuda"
for t in $pdl_tests; do DS4_SMALL_PDL=1 one $t; done
if [ "$quick" != 1 ]; then
  for t in test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda; do DS4_MLX4_TC=1 one $t; done
  one test_glm5_mla_tc_cuda
  one test_qwen_hyper_fused_cuda
fi
xz -9 "$OUT/tests.txt"
for r in a b; do for p in 0 1; do
  DS4_SMALL_PDL=$p COLS=2-8 step qwen_pdl${p}$r 40 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
done; done
step gemv_tc 90 '^(16384|2560|1280|4096)x' $B/bench_cuda_gemv --mlx4-tc
cp /tmp/steps/gemv_tc.txt "$OUT/" 2>/dev/null
[ "$quick" = 1 ] && exit 0
DS4_MLX4_TC=1 COLS=2-8 step qwen_tc1 40 '^\| *2048 \|' $B/bench_qwen_next_cuda synthetic-full 32 2048
wait
for r in a b; do for p in 0 1; do
  DS4_SMALL_PDL=$p step ds_pdl${p}$r 60 '^decode:|^roofline' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32
done; done
rm -f /dev/shm/f.gguf
for p in 0 1; do
  DS4_SMALL_PDL=$p COLS=2-8 step glm_pdl$p 60 '^\| *2048 \|' $B/bench_glm5_cuda $glm 16 2048
done
DS4_MLX4_TC=1 survey qwen_tc 90 $B/bench_qwen_next_cuda synthetic-full 4 2048 --ncu-decode
