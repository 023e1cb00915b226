# Sourced by the device scripts of the CUDA benches (bench/cuda_*/device_*.sh): the start of a
# run on the H200 and one binary's run with its log. Needs `out` (the output folder) and `bin`
# (the carried binaries) set by the caller; `grep_pat` picks the lines copied into log.txt.
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
rc=0
log() { echo "== $(date +%T) $*" | tee -a "$out/log.txt"; }
log "start $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$out/log.txt"
# device_run NAME TIMEOUT ARGS...: $bin/NAME ARGS under TIMEOUT s into $out/NAME.txt; rc=1 on failure.
device_run() {
  local name=$1 t=$2
  shift 2
  [ -x "$bin/$name" ] || { log "$name missing"; return 0; }
  log "$name $*"
  timeout "$t" "$bin/$name" "$@" >"$out/$name.txt" 2>&1
  local r=$?
  log "$name exit $r (124 = timed out)"
  grep -E "${grep_pat:-FAIL|FATAL|ALL PASSED}" "$out/$name.txt" | head -60 | tee -a "$out/log.txt"
  [ $r -eq 0 ] || rc=1
}
