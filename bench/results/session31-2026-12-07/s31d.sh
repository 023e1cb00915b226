#!/usr/bin/env bash
# Session 31 on an H200: session 30's s30d.sh (the issues' figures of all three families at the
# defaults: DeepSeek 43 layers decode / 16 streams / prefill 2K-32K, GLM 288 experts and Qwen
# prefill 2K-32K and decode) with this session's bundle (.devwork/s31.tar.xz), then
# test_qwen_hyper_fused_cuda: DS4_HC_PDL (the default since 20c158e) has passed it on an H100 only.
# Rebuild the bundle at the current code first: TARGETS="bench_deepseek_v4_cuda bench_glm5_cuda
# bench_qwen_next_cuda ds4-convert test_qwen_hyper_fused_cuda" BUNDLE=.devwork/s31.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build. Not an H200: s31.sh runs s31a.sh.
BUNDLE=.devwork/s31.tar.xz bash "$(dirname "$0")/../session30-2026-12-06/s30d.sh"
. bench/device_call_lib.sh
B=/tmp/d/cudabins
T0=$(date +%s)
export LD_LIBRARY_PATH=$B/lib:${LD_LIBRARY_PATH:-}
grep -q H200 "$OUT/gpu.txt" && one test_qwen_hyper_fused_cuda
