#!/usr/bin/env bash
# Issue #23, DeepSeek V4 Flash batch-1 decode on the H200 in one call, from binaries built on
# the dev machine (cuda preset, sm_90a, CUDA 13) and carried in one tar (DIR/<binary>):
#   1. tests: test_deepseek_v4_cuda (+ MTP, DSpark), test_glm5_cuda and test_glm5_mtp_cuda (they
#      share backend/cuda/hyper_connections.cu), test_cuda_ops;
#   2. the synthetic full-size Flash (ds4-convert --synthetic deepseek_v4_flash --quant-experts
#      IQ2_XXS --expert-holes, ds4's q2 layout) in /dev/shm (~25 s; loading it takes ~85 s);
#   3. bench_deepseek_v4_cuda MODEL $DS_ARGS (default: a 2048-token prompt, 32 decode tokens,
#      --profile, and --jump 2048,32768: decode from states filled as at those contexts).
# Outputs (few files: the device returns at most 8): log.txt, tests.txt, convert.txt, deepseek.txt.
# Usage (tree root): DIR=unpacked-tar [BUDGET_S=220] bash DIR/device_decode.sh OUTDIR
set -u
out=${1:?usage: DIR=... device_decode.sh OUTDIR}
d=${DIR:?set DIR}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
t_start=$(date +%s)
left() { echo $(( ${BUDGET_S:-220} - ($(date +%s) - t_start) )); }
log() { echo "== $(date +%T) [$(left) s left] $*" | tee -a "$out/log.txt"; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$out/log.txt"
for tst in test_deepseek_v4_cuda test_deepseek_v4_mtp_cuda test_deepseek_v4_dspark_cuda test_glm5_cuda \
           test_glm5_mtp_cuda test_cuda_ops; do
  [ -x "$d/$tst" ] || { log "$tst missing"; continue; }
  echo "### $tst" >>"$out/tests.txt"
  args=(.); [ $tst = test_cuda_ops ] && args=()
  log "$tst"
  timeout 90 "$d/$tst" "${args[@]}" >>"$out/tests.txt" 2>&1
  log "exit $?"
  grep -E "FAIL|FATAL" "$out/tests.txt" | tail -5 | tee -a "$out/log.txt"
done
model=/dev/shm/ds4flash-synthetic.gguf
log "ds4-convert --synthetic deepseek_v4_flash"
timeout 60 "$d/ds4-convert" --synthetic deepseek_v4_flash "$model" --quant-experts IQ2_XXS --expert-holes \
  >"$out/convert.txt" 2>&1
log "exit $?"
log "bench_deepseek_v4_cuda MODEL ${DS_ARGS:-2048 32 --profile --jump 2048,32768}"
# shellcheck disable=SC2086
timeout "$(( $(left) - 5 ))" "$d/bench_deepseek_v4_cuda" "$model" ${DS_ARGS:-2048 32 --profile --jump 2048,32768} \
  >"$out/deepseek.txt" 2>&1
log "exit $?"
rm -f "$model"
log done
