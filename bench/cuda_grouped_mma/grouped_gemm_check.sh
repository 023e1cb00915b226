#!/usr/bin/env bash
# The routed experts' cuBLAS grouped GEMM (src/backend/cuda/grouped_gemm.h) on the H200 in one
# short call (~35 s), from binaries packed by tools/device/pack_cuda_bins.sh:
#   1. test_cuda_grouped_gemm: every expert format vs a host reference and vs grouped_mma_bf16;
#   2. bench_cuda_grouped_mma: old kernel vs new path vs dense cuBLAS, 512..4096-token chunks of
#      the three families' expert shapes, with its self-check column and the batch sweep;
#   3. the tensor-core chunk tests of Qwen and DeepSeek with the new path forced on every
#      tensor-core chunk (DS4_GROUPED_GEMM_MIN_ROWS=1): the models' criteria vs the CPU model;
#   4. full-size synthetic GLM 5.x Flash prefill of 4096 tokens in 2048-row chunks (new path;
#      the old kernel's number at 2048 rows: 1548 tok/s, bench/results/prefill-h200-2026-12-04g).
# Usage, from the tree root: bench/cuda_grouped_mma/grouped_gemm_check.sh BINDIR OUTDIR
set -u
bin=$(cd "${1:?usage: grouped_gemm_check.sh BINDIR OUTDIR}" && pwd)
out=${2:?usage: grouped_gemm_check.sh BINDIR OUTDIR}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
step() {  # label timeout command...: output to OUTDIR/label.txt, exit status and time to summary
  local label=$1 t=$2 t0
  shift 2
  t0=$(date +%s)
  timeout "$t" "$@" >"$out/$label.txt" 2>&1
  echo "$label exit $? in $(( $(date +%s) - t0 )) s (124 = timed out)" | tee -a "$out/summary.txt"
  grep -E "FAIL|FATAL|ALL PASSED|CHECK|NON-FINITE" "$out/$label.txt" | head -12 | sed 's/^/    /' | tee -a "$out/summary.txt"
}
step grouped_gemm_test 20 "$bin/test_cuda_grouped_gemm"
step grouped_bench 25 "$bin/bench_cuda_grouped_mma" 5 4096
step qwen_forced 10 env DS4_GROUPED_GEMM=2 DS4_GROUPED_GEMM_MIN_ROWS=1 "$bin/test_qwen_next_cuda" .
step deepseek_forced 10 env DS4_GROUPED_GEMM=2 DS4_GROUPED_GEMM_MIN_ROWS=1 "$bin/test_deepseek_v4_cuda" .
step glm_prefill 20 env DS4_GROUPED_GEMM=2 "$bin/bench_glm5_cuda" synthetic-full 0 2048 --prefill 4096 --prefill-rows 2048
grep -E "^\|" "$out/grouped_bench.txt" | head -60 >>"$out/summary.txt"
grep -E "tok/s|experts|canary|grouped" "$out/glm_prefill.txt" | head -20 >>"$out/summary.txt"
