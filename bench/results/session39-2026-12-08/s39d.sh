#!/usr/bin/env bash
# Session 39 call D (any GPU, ~5 min; UNRUN: no machine was lent after call B). First `git apply
# bench/results/session39-2026-12-08/attend_merge.patch` (not on main until this call passes), then build.
# DeepSeek's attend_merge_kernel rewritten for latency (the max
# as a warp reduction, float4 columns with 4 chunks' loads in flight; each sum in chunk order, the
# same bits), tested and A/B'd against the s39 bundle's binaries (the same code but this kernel), then
# the in-graph kernel table of a DeepSeek decode step at the session's defaults, to rank what is left.
# Build: 1. at main (without the patch): TARGETS=bench_deepseek_v4_cuda BUNDLE=.devwork/s39old.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build (the old binary; the device tool's carry, ~64 MB
# with the tree, holds little more, so this bundle is that one bench, its libcupti dropped: xz -dc
# .devwork/s39old.tar.xz | tar --delete -f - cudabins/lib/libcupti.so.13 | xz -9e > /tmp/o.tar.xz && mv
# /tmp/o.tar.xz .devwork/s39old.tar.xz; ~6 MB); 2. git apply the patch, then
# TARGETS="test_deepseek_v4_cuda test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda
# bench_deepseek_v4_cuda ds4-convert" BUNDLE=.devwork/s39d.tar.xz PRESET=cuda-pack
# tools/device/pack_cuda_bins.sh --build; run(command="bash bench/results/session39-2026-12-08/s39d.sh",
# carry=[".devwork/s39d.tar.xz", ".devwork/s39old.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start .devwork/s39d.tar.xz
old_start .devwork/s39old.tar.xz
synthetic_start
for t in test_deepseek_v4_cuda test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda; do
  one $t "$PWD"
done
grep -E "FAIL" "$OUT/tests.txt" | cut -c1-220 | head -20 >> "$OUT/summary.txt"
xz -9 "$OUT/tests.txt"
wait
ROUNDS="a b c" ab ds 80 "^decode|^\| (1|16) \| [0-9]" bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --batch 16 --batch-rows 16 --old-max 0
export DS4_KERNEL_TRACE=8
tables() {  # the in-graph tables of step $1 (top 45 rows) and the launch lines into trace_$1.md
  awk '/^in-graph kernel time/{p=1; n=0} p{print; if (++n > 48) p=0} /^\| \(no kernel running\)/{p=0} /^host time in cudaGraphLaunch/{print}' \
    /tmp/steps/$1.txt > "$OUT/trace_$1.md"
  grep -E "^in-graph|^host time|^decode:" /tmp/steps/$1.txt | cut -c1-240 >> "$OUT/summary.txt"
}
COLS=2-7 step ds 150 '^decode:' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 8 --ncu-decode --old-max 0
tables ds
rm -f /dev/shm/f.gguf
