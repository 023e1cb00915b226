#!/usr/bin/env bash
# Builds the CUDA targets for sm_90a and runs, on the H200 machine: the op test, the GEMV
# bench, then as time permits (BUDGET_S, default 225 s for the whole script) the GEMV SASS,
# an ncu pass over the GEMV kernels and the op test under compute-sanitizer. Logs go to OUTDIR.
# Usage, from the tree root: [BUDGET_S=225] tools/cuda_device_run.sh OUTDIR
# CMake first (the project's own build); if configuring fails on the machine's tools, a
# plain nvcc build of the same files (sm_90a) so the run still counts.
set -u
out=${1:?usage: tools/cuda_device_run.sh OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$PATH:/usr/local/cuda/bin
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
build=/tmp/ds4-cuda-build
mkdir -p "$out" "$build"
log() { echo "== $*" | tee -a "$out/env.txt"; }
start=$(date +%s)
budget=${BUDGET_S:-225}
left() { echo $(( budget - ($(date +%s) - start) )); }

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

obj=$(find "$build" \( -name gemv.cu.o -o -name gemv.o \) | head -1)
if command -v cuobjdump >/dev/null && [ -n "$obj" ]; then
  cuobjdump -sass "$obj" >"$out/gemv_sass.txt" 2>&1
  log "sass: $(grep -c Function "$out/gemv_sass.txt") kernels"
fi

if [ -n "$ncu" ] && [ "$(left)" -gt 50 ]; then
  log "ncu over the GEMV kernels (bench --profile), $(left) s left"
  timeout $(( $(left) - 35 )) "$ncu" --clock-control none --kernel-name regex:gemv --section SpeedOfLight \
    --section Occupancy --section MemoryWorkloadAnalysis "$bin/bench_cuda_gemv" --profile >"$out/ncu.txt" 2>&1
  log "ncu exit $? (124 = timed out)"
fi

if command -v compute-sanitizer >/dev/null && [ "$(left)" -gt 15 ]; then
  log "compute-sanitizer memcheck test_cuda_ops --small, $(left) s left"
  timeout $(( $(left) - 5 )) compute-sanitizer --tool memcheck --print-limit 20 "$bin/test_cuda_ops" --small >"$out/sanitizer.txt" 2>&1
  log "sanitizer exit $? (124 = timed out)"
  tail -5 "$out/sanitizer.txt"
fi
log "total $(( $(date +%s) - start )) s"
# The reply shows only the output's tail: repeat the two results last.
grep -E "FAIL|PASSED|FAILED|FATAL" "$out/test_cuda_ops.txt" | tail -20
cat "$out/bench_cuda_gemv.txt"
exit "$test_rc"
