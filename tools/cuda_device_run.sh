#!/usr/bin/env bash
# Builds the CUDA targets for sm_90a and runs the op test, the GEMV bench and (time
# permitting) the op test under compute-sanitizer, on the H200 machine. Logs go to OUTDIR.
# Usage, from the tree root: tools/cuda_device_run.sh OUTDIR
# CMake first (the project's own build); if configuring fails on the machine's tools, a
# plain nvcc build of the same files (sm_90a) so the run still counts.
set -u
out=${1:?usage: tools/cuda_device_run.sh OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
build=/tmp/ds4-cuda-build
mkdir -p "$out" "$build"
log() { echo "== $*" | tee -a "$out/env.txt"; }

log "date $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit,driver_version --format=csv 2>&1 | tee -a "$out/env.txt"
{ "$nvcc" --version | tail -2; cmake --version | head -1; g++ --version | head -1; } 2>&1 | tee -a "$out/env.txt"

t0=$(date +%s)
if cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDS4_CUDA=ON -DDS4_TESTS=OFF \
     -DCMAKE_CUDA_COMPILER="$nvcc" >"$out/build.txt" 2>&1 &&
   cmake --build "$build" --target test_cuda_ops bench_cuda_gemv -j 16 >>"$out/build.txt" 2>&1; then
  bin=$build/bin
  log "cmake build ok in $(( $(date +%s) - t0 )) s"
else
  log "cmake build failed (tail below); falling back to plain nvcc"
  tail -30 "$out/build.txt"
  bin=$build/nvcc && mkdir -p "$bin"
  flags=(-O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I"$root/src" -I"$root")
  ( cd "$bin" && g++ -std=c++20 -O2 -I"$root/src" -c "$root"/src/core/*.cpp "$root/tests/cuda/host_ref.cpp" &&
    "$nvcc" "${flags[@]}" -c "$root"/src/backend/cuda/*.cu &&
    "$nvcc" "${flags[@]}" -o test_cuda_ops "$root/tests/cuda/test_cuda_ops.cu" ./*.o &&
    "$nvcc" "${flags[@]}" -o bench_cuda_gemv "$root/bench/cuda_gemv/bench_cuda_gemv.cu" ./*.o ) >>"$out/build.txt" 2>&1 ||
    { tail -40 "$out/build.txt"; exit 3; }
  log "nvcc build ok in $(( $(date +%s) - t0 )) s"
fi

log "test_cuda_ops"
"$bin/test_cuda_ops" 2>&1 | tee "$out/test_cuda_ops.txt"
test_rc=${PIPESTATUS[0]}
log "test_cuda_ops exit $test_rc"

log "bench_cuda_gemv 20"
"$bin/bench_cuda_gemv" 20 2>&1 | tee "$out/bench_cuda_gemv.txt"
log "bench exit ${PIPESTATUS[0]}"

if command -v compute-sanitizer >/dev/null; then
  log "compute-sanitizer memcheck test_cuda_ops --small"
  timeout 45 compute-sanitizer --tool memcheck --print-limit 20 "$bin/test_cuda_ops" --small >"$out/sanitizer.txt" 2>&1
  log "sanitizer exit $? (124 = timed out)"
  tail -5 "$out/sanitizer.txt"
fi
exit "$test_rc"
