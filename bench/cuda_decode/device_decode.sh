#!/usr/bin/env bash
# Issue #23 on the H200 in one call: batch-1 decode before/after, from binaries built on the
# dev machine (cuda preset, sm_90a) and carried in one tar (AFTER = this branch, BEFORE =
# main's build of the same targets, DS4CONVERT = our release ds4-convert):
#   1. correctness: test_cuda_ops, test_qwen_next_cuda, test_glm5_cuda, test_deepseek_v4_cuda
#      (+ its MTP / DSpark tests), test_qwen_next_mtp_cuda, all from AFTER;
#   2. Qwen3.8 Flash Next synthetic-full: AFTER (--profile) at QWEN_CTX, BEFORE at the first;
#   3. GLM 5.x Flash synthetic-full: AFTER at GLM_CTX;
#   4. bench_cuda_gemv (AFTER, 5 reps);
#   5. DeepSeek V4 Flash synthetic (ds4-convert --synthetic, ds4's q2 layout) AFTER only,
#      DS_ARGS (prompt tokens, decode tokens, --profile); BEFORE is the committed figure;
#   6. GLM BEFORE if BUDGET_S leaves time.
# Steps run in priority order under BUDGET_S (the call's limit minus a margin).
# Every bench prints the copy-bandwidth probe of its own run (the roofline's denominator).
# Usage (tree root): DIR=unpacked-tar bash device_decode.sh OUTDIR
set -u
out=${1:?usage: DIR=... device_decode.sh OUTDIR}
d=${DIR:?set DIR}
mkdir -p "$out"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}
t_start=$(date +%s)
left() { echo $(( ${BUDGET_S:-540} - ($(date +%s) - t_start) )); }
log() { echo "== $(date +%T) [$(left) s left] $*" | tee -a "$out/log.txt"; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$out/log.txt"
run() {  # file timeout cmd...
  local f=$1 t=$2
  shift 2
  log "$*"
  timeout "$t" "$@" >>"$out/$f" 2>&1
  local r=$?
  log "exit $r"
  return $r
}
# 1. tests
for tst in test_cuda_ops test_qwen_next_cuda test_glm5_cuda test_deepseek_v4_cuda test_deepseek_v4_mtp_cuda \
           test_deepseek_v4_dspark_cuda test_qwen_next_mtp_cuda; do
  [ -x "$d/after/$tst" ] || continue
  echo "### $tst" >>"$out/tests.txt"
  args=(.); [ $tst = test_cuda_ops ] && args=(); [ $tst = test_qwen_next_mtp_cuda ] && args=(. --quick)
  run tests.txt 60 "$d/after/$tst" "${args[@]}"
  grep -E "FAIL|ALL PASSED" "$out/tests.txt" | tail -3 | tee -a "$out/log.txt"
done
# 2. Qwen after (profile at each context), then before at the first context
echo "### after" >>"$out/qwen.txt"
run qwen.txt "${QWEN_S:-90}" "$d/after/bench_qwen_next_cuda" synthetic-full 16 "${QWEN_CTX:-2048,8192}" --profile
echo "### before" >>"$out/qwen.txt"
run qwen.txt 50 "$d/before/bench_qwen_next_cuda" synthetic-full 16 "${QWEN_CTX_BEFORE:-2048}"
# 3. GLM after
echo "### after" >>"$out/glm.txt"
run glm.txt 60 "$d/after/bench_glm5_cuda" synthetic-full 16 "${GLM_CTX:-2048}"
# 4. GEMV (graph-replayed passes: with PDL the launches of a pass overlap as in a decode step)
run gemv.txt 45 "$d/after/bench_cuda_gemv" 5
# 5. DeepSeek after
if [ "$(left)" -gt 140 ]; then
  model=/dev/shm/ds4flash-synthetic.gguf
  run convert.txt 50 "$d/ds4-convert" --synthetic deepseek_v4_flash "$model" --quant-experts IQ2_XXS --expert-holes
  run deepseek.txt "$(( $(left) - 5 ))" "$d/after/bench_deepseek_v4_cuda" "$model" ${DS_ARGS:-1024 32 --profile}
  rm -f "$model"
else
  log "DeepSeek skipped: too little time left"
fi
# 6. GLM before, if time is left
if [ "$(left)" -gt 50 ]; then
  echo "### before" >>"$out/glm.txt"
  run glm.txt "$(( $(left) - 5 ))" "$d/before/bench_glm5_cuda" synthetic-full 16 "${GLM_CTX:-2048}"
fi
log done
