#!/usr/bin/env bash
# Issue #23, DeepSeek V4 Flash batch-1 decode on the H200 in one call, from binaries built on
# the dev machine (cuda preset, sm_90a, CUDA 13) and carried in one tar (BIN/<binary>).
# MODE=full (default):
#   1. tests: test_deepseek_v4_cuda (+ MTP, DSpark), test_glm5_cuda and test_glm5_mtp_cuda (they
#      share backend/cuda/hyper_connections.cu), test_cuda_ops;
#   2. the synthetic full-size Flash (ds4-convert --synthetic deepseek_v4_flash --quant-experts
#      IQ2_XXS --expert-holes, ds4's q2 layout) in /dev/shm (~20 s; loading it takes 60-85 s);
#   3. bench_deepseek_v4_cuda MODEL $DS_ARGS (default: a 2048-token prompt, 32 decode tokens,
#      --profile, and --jump 2048,32768: decode from states filled as at those contexts).
# MODE=ab (before/after in one cheap call): the DeepSeek tests, then the synthetic Flash cut to
#   6 layers (flash_6_layers.json: the real shapes, layers 0-1 sliding, 2/4 CSA, 3/5 HCA, hash
#   routing on 0-2; 13.5 GB, loads in ~10 s) and on it BIN/before/bench_deepseek_v4_cuda (another
#   build) and BIN's, both "2048 32 --profile" (BIN's adds --jump 2048,32768): per-layer figures
#   carry over to the 43-layer model, whole-step ones do not.
# MODE=tests: the DeepSeek tests only.
# Outputs (the device returns at most 8 files): log.txt, NAME.txt per test, the benches' logs.
# (bench/results/ds-decode-h200-2026-12-04g's first call ran this script's first form, commit
# 3386160: MODE=full's steps with the tests in one tests.txt.)
# Usage (tree root): BIN=unpacked-tar [MODE=ab|tests] bash BIN/device_decode.sh OUTDIR
set -u
out=${1:?usage: BIN=... device_decode.sh OUTDIR}
bin=$(cd "${BIN:?set BIN}" && pwd)
here=$(dirname "$0")  # in the tree: bench/device_lib.sh; in the carried tar: beside this script
lib=$here/../device_lib.sh
[ -f "$here/device_lib.sh" ] && lib=$here/device_lib.sh
# shellcheck source=../device_lib.sh
. "$lib"
device_run test_deepseek_v4_cuda 90 .
device_run test_deepseek_v4_mtp_cuda 60 .
device_run test_deepseek_v4_dspark_cuda 60 .
convert() {  # SOURCE OUT: the synthetic model with ds4's 2-bit experts as holes
  log "ds4-convert --synthetic $1"
  timeout 60 "$bin/ds4-convert" --synthetic "$1" "$2" --quant-experts IQ2_XXS --expert-holes >>"$out/log.txt" 2>&1 ||
    log "convert failed"
}
model=
if [ "${MODE:-full}" = tests ]; then
  :
elif [ "${MODE:-full}" = ab ]; then
  model=/dev/shm/flash6.gguf
  convert "$bin/flash_6_layers.json" "$model"
  for side in before after; do
    exe=$bin/bench_deepseek_v4_cuda args=(2048 32 --profile --jump 2048,32768)
    [ $side = before ] && exe=$bin/before/bench_deepseek_v4_cuda args=(2048 32 --profile)  # no --jump there
    log "$side: bench_deepseek_v4_cuda MODEL ${args[*]}"
    timeout 50 "$exe" "$model" "${args[@]}" >"$out/$side.txt" 2>&1
    log "$side exit $?"
  done
else
  device_run test_glm5_cuda 60 .
  device_run test_glm5_mtp_cuda 60 .
  device_run test_cuda_ops 60
  model=/dev/shm/ds4flash-synthetic.gguf
  convert deepseek_v4_flash "$model"
  # shellcheck disable=SC2086
  device_run bench_deepseek_v4_cuda "${BENCH_S:-150}" "$model" ${DS_ARGS:-2048 32 --profile --jump 2048,32768}
fi
[ -z "$model" ] || rm -f "$model"
log "done (rc $rc)"
exit $rc
