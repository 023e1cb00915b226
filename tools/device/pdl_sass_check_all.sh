#!/usr/bin/env bash
# Static check of every PDL-launched kernel's SASS (no GPU): compiles each source that launches
# kernels as programmatic dependents to a cubin (sm_90a, -lineinfo) and runs pdl_sass_check.py on
# it: the GEMV kernels' input loads (x, expert ids) and, with --all-memory, every global access of
# the small kernels that open with pdl_begin (DS4_SMALL_PDL), must sit behind griddepcontrol.wait on
# every path. ptxas may schedule a read-only (.nc) load above the wait (it did once: the checker's
# header), so the source order alone proves nothing. Needs nvcc and nvdisasm (tools/setup.sh installs
# nvidia-cuda-nvdisasm into .venv). Usage: tools/device/pdl_sass_check_all.sh [-j N]   (exit 1 on a hit)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
jobs=2
[ "${1:-}" = -j ] && jobs=$2
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -z "${NVDISASM:-}" ]; then
  NVDISASM=$(command -v nvdisasm || ls .venv/lib/python3*/site-packages/nvidia/cu*/bin/nvdisasm 2>/dev/null | head -1 || true)
fi
[ -x "${NVDISASM:-}" ] || { echo "pdl_sass_check_all: no nvdisasm (pip install nvidia-cuda-nvdisasm)" >&2; exit 2; }
export NVDISASM
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# source | function substring | mode: the GEMV-type kernels (weights streamed before the wait; the
# checker knows their input loads), then --all-memory for every source whose kernels open with
# pdl_begin(pdl_trigger) (launch_small's small kernels, found by grep: a new one is checked without
# editing this list) and DeepSeek's moe.cu (its swiglu / rmsnorm quantizers open with pdl_begin()).
checks="src/backend/cuda/gemv.cu|gemv_direct_kernel|
src/backend/cuda/gemv.cu|gemv_rows_kernel|
src/backend/cuda/gemv_act.cu|ELb0EEEv|
src/backend/cuda/gemv_act.cu|ELb1EEEv|
src/backend/cuda/gemv_act_mma.cu|act_mma_kernel|
src/backend/cuda/gemv_act_rows_mma.cu|rows_mma_kernel|
src/backend/cuda/act_quantize.cu|quantize_q8|
src/backend/cuda/hc_fused.cu|_kernel|--all-memory
src/backend/cuda/gemv_mlx4_tc.cu|gemv_mlx4_tc_kernel|
src/models/qwen_next/cuda/hyper_fused.cu|hc_up_combine_kernel|
src/models/qwen_next/cuda/hyper_fused.cu|hc_down_kernel|
$(grep -rl --include='*.cu' 'pdl_begin(' src | grep -v '^src/backend/cuda/gemv_device.cuh$' | sort | sed 's/$/|_kernel|--all-memory/')"
# one cubin per source, compiled -j at a time
echo "$checks" | cut -d'|' -f1 | sort -u | xargs -P "$jobs" -I{} sh -c \
  '"$0" -Isrc -O3 -DNDEBUG -arch=sm_90a -std=c++20 -lineinfo -cubin {} -o "$1/$(echo {} | tr / _).cubin"' "$nvcc" "$out"
fail=0
while IFS='|' read -r src pat mode; do
  # shellcheck disable=SC2086
  if ! r=$(python3 tools/device/pdl_sass_check.py $mode "$out/$(echo "$src" | tr / _).cubin" "$src" "$pat" 2>&1); then
    fail=1
  fi
  echo "$src ($pat${mode:+, $mode}): $(echo "$r" | tail -1)"
  echo "$r" | grep 'LOAD BEFORE WAIT' | head -4 || true
done <<< "$checks"
exit $fail
