# shellcheck shell=bash
# Sourced by the DeepSeek device scripts (device_prefill.sh, device_batch.sh) after
# ../device_lib.sh: flash_bench PATTERN ARGS... writes the synthetic full-size Flash
# (`ds4-convert --synthetic deepseek_v4_flash --quant-experts IQ2_XXS --expert-holes`, ds4's q2
# layout, routed experts as zero holes) to /dev/shm, runs bench_deepseek_v4_cuda MODEL ARGS under
# BENCH_S seconds (default 240) into $out/bench_deepseek_v4_cuda.txt, copies its lines matching
# PATTERN into log.txt and removes the model (85.7 GB of host memory). Exits 4 when the convert fails.
flash_bench() {
  local pat=$1 model=/dev/shm/ds4flash-synthetic.gguf
  shift
  log "synthetic model -> $model"
  "$bin/ds4-convert" --synthetic deepseek_v4_flash "$model" --quant-experts IQ2_XXS --expert-holes >"$out/convert.txt" 2>&1 ||
    { log "convert failed"; tail -5 "$out/convert.txt"; exit 4; }
  log "bench_deepseek_v4_cuda MODEL $*"
  timeout "${BENCH_S:-240}" "$bin/bench_deepseek_v4_cuda" "$model" "$@" >"$out/bench_deepseek_v4_cuda.txt" 2>&1
  log "bench exit $?"
  grep -vE "^\s*$" "$out/bench_deepseek_v4_cuda.txt" | grep -E "$pat" | tee -a "$out/log.txt"
  rm -f "$model"
}
