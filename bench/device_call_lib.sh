# Sourced by the sessions' device-call scripts (bench/results/session*/s*.sh), which run from the
# tree root on the device with $OUT set by the device tool. The device returns only ~8 files per
# call, so every test's output goes into one tests.txt and every step's line into summary.txt.
#   call_start BUNDLE   unpack the carried bundle (.devwork/*.tar.xz) into $B, the GPU into gpu.txt
#   use_bins            after call_start: B=$B/cudabins (the bundle's binaries), their libraries on
#                       LD_LIBRARY_PATH
#   synthetic_sizes     cfg / glm = the synthetic DeepSeek config and GLM spec for this GPU (H200: the
#                       43-layer Flash, GLM's 288 experts; else 30 layers, 160 experts: 80 GB)
#   synthetic_start     use_bins, synthetic_sizes, then ds4-convert of cfg into /dev/shm/f.gguf in the
#                       background (`wait` before using it; its line in summary.txt)
#   late S              true once the call has run more than S seconds (guards the later steps)
#   old_start BUNDLE    an older bundle for A/Bs in $O (/tmp/old/cudabins); with_old CMD... runs
#                       CMD with its libraries; ab N S PAT BIN ARGS... old / new steps per round
#   tests NAME...       each test through `one`, then the failures into summary.txt
#   one NAME ARGS...    $B/NAME ARGS (120 s at most) appended to tests.txt; its exit to summary.txt
#   step N S PAT CMD... CMD (S seconds at most, less when the call's LIMIT, default 585 s, is near)
#                       into N.txt ($STEP_DIR, default $OUT: the device returns only ~8 files); its
#                       exit, seconds and the output lines matching PAT to summary.txt
#   survey N S CMD...   CMD under ncu (one pass per kernel node of the profiled range: the benches'
#                       --ncu-decode) into ncu_N.csv.xz, its per-kernel table into kernels_N.md
#                       (tools/device/ncu_kernel_table.py) and the table's head into summary.txt
#   sections N S CMD... CMD under ncu with the speed-of-light, compute, memory, warp-state,
#                       scheduler, occupancy and launch sections of every kernel matching regex:gemv
#                       (the benches' --rows-profile) into ncu_N.csv.xz, the main metrics into
#                       N_metrics.txt
call_start() {
  B=/tmp/d
  mkdir -p "$B" && tar -C "$B" -xJf "$1" || exit 3
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
  T0=$(date +%s)
}
use_bins() {
  B=$B/cudabins
  export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
}
synthetic_sizes() {
  if grep -q H200 "$OUT/gpu.txt"; then
    cfg=deepseek_v4_flash glm=synthetic-full
  else
    cfg=bench/cuda_deepseek_v4/flash30_config.json glm=synthetic-full:q2_k:160
  fi
}
synthetic_start() {
  use_bins
  synthetic_sizes
  (
    local t0=$(date +%s)
    timeout 200 $B/ds4-convert --synthetic $cfg /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /tmp/convert.txt 2>&1
    echo "convert $cfg exit $? in $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
  ) &
}
late() { [ $(( $(date +%s) - T0 )) -gt "$1" ]; }
# An older bundle beside the call's for same-call A/Bs: unpacked into /tmp/old, its binaries in $O;
# `with_old CMD...` runs CMD (a step, say) with the old bundle's libraries first on LD_LIBRARY_PATH.
old_start() {
  mkdir -p /tmp/old && tar -C /tmp/old -xJf "$1" || exit 3
  O=/tmp/old/cudabins
}
with_old() { LD_LIBRARY_PATH=$O/lib:$LD_LIBRARY_PATH "$@"; }
# A/B of one binary, old ($O) then new ($B), per round R of ROUNDS (default "a b"): steps N_oldR and
# N_newR of S seconds each, PAT as step's; BIN is the binary's name, the rest its arguments.
ab() {
  local n=$1 s=$2 pat=$3 bin=$4 r
  shift 4
  for r in ${ROUNDS:-a b}; do
    with_old step "${n}_old$r" "$s" "$pat" "$O/$bin" "$@"
    step "${n}_new$r" "$s" "$pat" "$B/$bin" "$@"
  done
}
# Every test binary named, through `one`; then tests.txt's lines matching PAT (default: failures
# and gemv_rows' bit-identity counts) into summary.txt, and tests.txt compressed.
tests() {
  local t
  for t in "$@"; do one "$t"; done
  grep -E "${PAT:-FAIL|bit-identical}" "$OUT/tests.txt" | head -60 >> "$OUT/summary.txt"
  xz -9 "$OUT/tests.txt"
}
one() {
  local n=$1 t0
  shift
  t0=$(date +%s)
  echo "=== $n" >> "$OUT/tests.txt"
  timeout 120 "$B/$n" "$@" >> "$OUT/tests.txt" 2>&1
  echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"
}
step() {
  local n=$1 to=$2 pat=$3 t0 left d=${STEP_DIR:-$OUT}
  shift 3
  mkdir -p "$d"
  t0=$(date +%s)
  left=$(( ${LIMIT:-585} - t0 + T0 ))
  [ $left -lt 20 ] && { echo "$n not run (time)" | tee -a "$OUT/summary.txt"; return; }
  [ $to -gt $left ] && to=$left
  timeout $to "$@" > "$d/$n.txt" 2>&1
  # (the benches' rows: -f2-6 is a prefill table's; COLS=2-8 (say) for a table with decode columns)
  echo "$n exit $? in $(( $(date +%s) - t0 )) s: $(grep -E "$pat" "$d/$n.txt" | cut -d'|' -f${COLS:-2-6} | tr '\n' ' ' | cut -c1-400)" | tee -a "$OUT/summary.txt"
  grep -E "canary" "$d/$n.txt" | cut -c1-200 | head -2 >> "$OUT/summary.txt"
}
survey() {
  local n=$1 cap=$2 t0 left
  local m=gpu__time_duration.sum,dram__bytes.sum,launch__registers_per_thread,launch__grid_size,launch__block_size
  shift 2
  t0=$(date +%s)
  left=$(( ${LIMIT:-585} - 10 - t0 + T0 ))
  [ $left -gt "$cap" ] && left=$cap
  [ $left -lt 40 ] && { echo "ncu $n not run (time)" | tee -a "$OUT/summary.txt"; return; }
  timeout $left ncu --profile-from-start off --graph-profiling node --clock-control none --cache-control none \
    --metrics $m --csv --page raw --log-file "$OUT/ncu_$n.csv" "$@" > "${STEP_DIR:-$OUT}/${n}_out.txt" 2>&1
  echo "ncu $n exit $? in $(( $(date +%s) - t0 )) s, $(grep -c '^"[0-9]' "$OUT/ncu_$n.csv") launches" | tee -a "$OUT/summary.txt"
  python3 tools/device/ncu_kernel_table.py "$OUT/ncu_$n.csv" --top 40 > "$OUT/kernels_$n.md" 2>&1
  head -24 "$OUT/kernels_$n.md" | cut -c1-200 | tee -a "$OUT/summary.txt"
  xz -9 "$OUT/ncu_$n.csv"
}
sections() {
  local n=$1 cap=$2 t0
  shift 2
  t0=$(date +%s)
  timeout "$cap" ncu --kernel-name regex:gemv --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy \
    --section LaunchStats --csv --page details --log-file "$OUT/ncu_$n.csv" "$@" > "${STEP_DIR:-$OUT}/${n}_out.txt" 2>&1
  echo "ncu $n exit $? in $(( $(date +%s) - t0 )) s, $(grep -c profiled "${STEP_DIR:-$OUT}/${n}_out.txt") launches" | tee -a "$OUT/summary.txt"
  grep -E '"(Duration|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|L1/TEX Hit Rate|Registers Per Thread|Achieved Occupancy)"' "$OUT/ncu_$n.csv" \
    | awk -F'","' '{print $1" | "$(NF-2)" | "$NF" | "substr($5,1,90)}' > "$OUT/${n}_metrics.txt"
  xz -9 "$OUT/ncu_$n.csv"
}
