#!/usr/bin/env bash
# Session 32 call 1: on an H200, the issues' figures (#22 / #23 / #24) at this session's defaults:
# session 30's s30d.sh (DeepSeek 43 layers decode with the per-op table, 1 / 16 streams, prefill
# 2K / 8K / 32K; GLM 288 experts prefill + decode; Qwen prefill + decode at 2K), not taken since
# session 25. On any other GPU: s32b.sh (the tests and the Qwen ncu table). Carry .devwork/s32.tar.xz:
# TARGETS="bench_deepseek_v4_cuda bench_glm5_cuda bench_qwen_next_cuda ds4-convert
# test_qwen_hyper_fused_cuda test_gemv_mlx4_tc test_glm5_cuda" BUNDLE=.devwork/s32.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build   (session 32 packed it at 6780d54; rebuild
# at the current code before a run)
set -u
here=$(dirname "$0")
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exec bash "$here/s32b.sh"
BUNDLE=.devwork/s32.tar.xz bash "$here/../session30-2026-12-06/s30d.sh"
