#!/usr/bin/env bash
# Session 35 call 2 (any GPU, ~4 min; H200: + the issues' figures, ~8 min): where Qwen's verify
# goes. Its forward of k+1 rows costs 2.58x (k=1) .. 5.21x (k=4) one decode step against bytes
# floors of 1.35x .. 2.34x (call 1). bench_qwen_next_cuda --ncu-verify=K: the per-op GPU table of
# one forward of K+1 rows (direct launches + events) and the same forward under ncu (per-kernel
# table kernels_qvK.md), K = 1 and 3. Then why gemv_rows costs ~1-2 gemvs per input row (call 1's
# rows table): ncu's speed-of-light, compute, memory, warp-state and scheduler sections of gemv
# and gemv_rows n = 1, 2, 4 on MLX q4 g64 and Q8_0 at 4096x4096 and 16384x8192
# (bench_cuda_gemv --rows-profile; ncu_rows.csv.xz). On an H200 also DeepSeek 43 layers decode / 16 streams /
# prefill 2K-32K, Qwen prefill 2K-32K and decode at 2K / 32K, GLM 288 decode at 2K.
# Build: TARGETS="$(cat bench/results/session35-2026-12-07/s35b.targets)" BUNDLE=.devwork/s35b.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session35-2026-12-07/s35b.sh", carry=[".devwork/s35b.tar.xz"]).
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s35b.tar.xz}
use_bins
synthetic_sizes
h200=0; grep -q H200 "$OUT/gpu.txt" && h200=1
[ $h200 = 1 ] && synthetic_start
for k in 1 3; do
  survey qv$k 120 $B/bench_qwen_next_cuda synthetic-full 2 2048 --ncu-verify=$k
  sed -n '/per-op GPU time of one forward/,/^$/p' /tmp/steps/qv${k}_out.txt > "$OUT/ops_qv$k.txt"
  head -30 "$OUT/ops_qv$k.txt" | cut -c1-160 >> "$OUT/summary.txt"
done
t0=$(date +%s)
timeout 150 ncu --kernel-name regex:gemv --section SpeedOfLight --section ComputeWorkloadAnalysis \
  --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy \
  --section LaunchStats --csv --page details --log-file "$OUT/ncu_rows.csv" $B/bench_cuda_gemv --rows-profile \
  > /tmp/steps/rows_out.txt 2>&1
echo "ncu rows exit $? in $(( $(date +%s) - t0 )) s, $(grep -c profiled /tmp/steps/rows_out.txt) launches" | tee -a "$OUT/summary.txt"
grep -E '"(Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|L1/TEX Hit Rate|Registers Per Thread|Achieved Occupancy)"' "$OUT/ncu_rows.csv" \
  | awk -F'","' '{print $1" | "$(NF-2)" | "$NF" | "substr($5,1,90)}' > "$OUT/rows_metrics.txt"
xz -9 "$OUT/ncu_rows.csv"
[ $h200 = 1 ] || exit 0
wait
step ds 200 '^decode:|^roofline|^\| (1|16) \| [0-9]|^\| *(2048|8192|32768) \|' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --profile --batch 1,16 --batch-rows 16 --prefill 2048,8192,32768 --prefill-rows 2048 --old-max 0
step qwen_prefill 60 '^\| *(2048|8192|32768) \|' $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --prefill-rows=2048 --old-max=0
COLS=2-8 step qwen_decode 50 '^\| *(2048|32768) \|' $B/bench_qwen_next_cuda synthetic-full 32 2048,32768
COLS=2-8 step glm_decode 60 '^\| *2048 \|' $B/bench_glm5_cuda $glm 16 2048
for f in /tmp/steps/ds.txt /tmp/steps/qwen_*.txt /tmp/steps/glm_*.txt; do [ -f "$f" ] && { echo "=== $f"; cat "$f"; }; done > "$OUT/figures.txt"
