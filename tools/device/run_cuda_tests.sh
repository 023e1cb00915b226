#!/usr/bin/env bash
# Every CUDA correctness test (no benches) from prebuilt binaries, one after another with a
# timeout each, on the H200: the quick check of a merged tree. Benches and sanitizers stay in
# tools/cuda_device_run.sh. Logs: OUTDIR/<test>.txt, OUTDIR/summary.txt (one line per test:
# exit code and seconds; 124 = timed out). Exit code: non-zero when any test failed.
# Usage, from the tree root: tools/device/run_cuda_tests.sh BINDIR OUTDIR [TEST_TIMEOUT_S=240]
set -u
bin=$(cd "${1:?usage: run_cuda_tests.sh BINDIR OUTDIR}" && pwd)
out=${2:?usage: run_cuda_tests.sh BINDIR OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
limit=${TEST_TIMEOUT_S:-240}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:$bin/lib:${LD_LIBRARY_PATH:-}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader >"$out/summary.txt" 2>&1
rc=0
one() {  # name args...
  local name=$1
  shift
  if [ ! -x "$bin/$name" ]; then echo "$name missing" | tee -a "$out/summary.txt"; rc=1; return; fi
  local t0=$(date +%s)
  timeout "$limit" "$bin/$name" "$@" >"$out/$name.txt" 2>&1
  local r=$?
  echo "$name exit $r in $(( $(date +%s) - t0 )) s" | tee -a "$out/summary.txt"
  grep -E "FAIL|FATAL" "$out/$name.txt" | head -10 | sed 's/^/    /' | tee -a "$out/summary.txt"
  [ $r -eq 0 ] || rc=1
}
one test_cuda_ops
one test_cuda_hc_fused
one test_grouped_mma_frag
one test_gemv_pdl
one test_gemv_mlx4_tc
one test_gemv_act
one test_gemv_act_mma
one test_grouped_mma_int8
one test_gemv_decode
one test_cuda_sample
one test_cuda_matmul
one test_cuda_grouped_gemm
one test_cuda_canary
one test_qwen_next_cuda "$root"
one test_qwen_next_mtp_cuda "$root"
one test_qwen_hyper_fused_cuda
one test_qwen_decode_kernels_cuda
one test_qwen_next_batch_cuda "$root"
one test_qwen_next_verify_batch_cuda "$root"
one test_deepseek_v4_cuda "$root"
one test_deepseek_v4_mtp_cuda "$root"
one test_deepseek_v4_dspark_cuda "$root"
one test_deepseek_v4_batch_cuda "$root"
one test_deepseek_v4_verify_batch_cuda "$root"
one test_deepseek_v4_actq_cuda "$root"
one test_deepseek_v4_fused_quant_cuda
one test_glm5_cuda "$root"
one test_glm5_mtp_cuda "$root"
one test_glm5_batch_cuda "$root"
one test_glm5_verify_batch_cuda "$root"
one test_glm5_mla_tc_cuda
one test_glm5_mla_output_cuda
one test_synthetic_cuda
one test_admission_cuda "$root"
echo "overall exit $rc" | tee -a "$out/summary.txt"
exit $rc
