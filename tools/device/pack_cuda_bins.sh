#!/usr/bin/env bash
# Packs the cuda preset's CUDA test and bench binaries (built here, sm_90a, CUDA 13 as on the
# H200 image) for tools/cuda_device_run.sh PREBUILT=..., so a device call spends no time compiling.
# The binaries share most of their code: one xz stream over the tar (64 MiB dictionary) stores
# it about once. Output: .devwork/cudabins.tar.xz with cudabins/<binary> (carried, never committed).
# Usage, from the tree root: tools/device/pack_cuda_bins.sh [--build]   (--build: build them first)
#   PRESET=cuda-pack (sm_90a SASS only, no -lineinfo: binaries ~1/4 the compressed size, so a whole
#   suite fits the device tool's 64 MiB carry beside the tree; the cuda preset's own binaries keep
#   the line info that ncu and tools/device/pdl_sass_check.py read). Default: cuda.
#   TARGETS="a b ..." packs (and builds) only those binaries, BUNDLE=path names the output
#   (default .devwork/cudabins.tar.xz): the device call's 64 MiB carry includes the ~48 MB tree,
#   so a call that carries two bundles (an A/B against older binaries) takes subsets.
set -eu
preset=${PRESET:-cuda}
bundle=${BUNDLE:-.devwork/cudabins.tar.xz}
all_targets="test_cuda_ops test_cuda_hc_fused test_gemv_pdl test_gemv_mlx4_tc test_gemv_act test_gemv_act_mma test_grouped_mma_int8 test_gemv_decode test_grouped_mma_frag test_cuda_canary test_cuda_sample test_cuda_matmul test_cuda_grouped_gemm
  bench_cuda_grouped_mma bench_cuda_gemv
  bench_cuda_upload bench_cuda_topk test_qwen_next_cuda test_qwen_next_mtp_cuda test_qwen_hyper_fused_cuda
  test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_qwen_decode_kernels_cuda bench_qwen_decode_kernels bench_qwen_next_cuda
  test_deepseek_v4_cuda test_deepseek_v4_mtp_cuda test_deepseek_v4_dspark_cuda test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda test_deepseek_v4_actq_cuda test_deepseek_v4_fused_quant_cuda
  bench_deepseek_v4_cuda
  test_glm5_cuda test_glm5_mtp_cuda test_glm5_batch_cuda test_glm5_verify_batch_cuda test_glm5_mla_tc_cuda test_glm5_mla_output_cuda bench_glm5_cuda test_synthetic_cuda test_admission_cuda
  ds4-convert"
targets=${TARGETS:-$all_targets}
if [ "${1:-}" = --build ]; then
  [ -d "build/$preset" ] || cmake --preset "$preset" >/dev/null
  # shellcheck disable=SC2086
  cmake --build --preset "$preset" -j 2 --target $targets
fi
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/cudabins"
for t in $targets; do
  [ -x "build/$preset/bin/$t" ] || { echo "missing build/$preset/bin/$t (run with --build)" >&2; exit 2; }
  strip -o "$w/cudabins/$t" "build/$preset/bin/$t"
done
# The engine-level tests link the tokenizer's ICU, which the device image lacks (test_admission_cuda
# failed there on libicuuc.so.72): carry it in cudabins/lib (run_cuda_tests.sh puts it on the path).
mkdir -p "$w/cudabins/lib"
for t in $targets; do ldd "build/$preset/bin/$t" | awk '$3 ~ /^\// {print $3}' | grep -E 'icu' || true; done | sort -u |
  while read -r lib; do cp -L "$lib" "$w/cudabins/lib/"; done
# The benches' DS4_KERNEL_TRACE (bench/cuda_kernel_trace.h) dlopens CUPTI: the toolkit's copy (~1 MB
# compressed) goes with any bench, so the device's own CUDA install need not have it.
if echo " $targets " | grep -q ' bench_'; then
  for c in /usr/local/cuda/lib/libcupti.so.13 /usr/local/cuda/lib64/libcupti.so.13 \
           /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13; do
    [ -f "$c" ] && { cp -L "$c" "$w/cudabins/lib/"; break; }
  done
fi
mkdir -p "$(dirname "$bundle")"
tar -C "$w" -cf - cudabins | xz -9e -T1 --lzma2=dict=192MiB >"$bundle"
ls -la "$bundle"
