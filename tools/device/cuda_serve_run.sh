#!/usr/bin/env bash
# `ds4server serve --backend cuda` end to end on the H200 machine (issue #10): the real server
# over HTTP, driven by ds4-eval (tools/eval/ds4_eval.py), once with --backend cuda and once
# with --backend cpu on the same machine, then the answers compared turn by turn
# (tools/eval/compare_receipts.py: greedy answers, token counts and finish reasons must be
# equal). The CUDA receipts carry the turn's GPU canary latencies (usage.gpu_canary).
# Needs .devwork/serve.tar.xz from tools/device/make_bundle.sh (the image lacks the server's
# libraries and httpx). Usage, from the tree root: tools/device/cuda_serve_run.sh OUT
#   CELLS (default qwen-AR,glm-AR,deepseek-AR), REPEATS (default 1), PY (device python)
set -u
out=${1:?usage: tools/device/cuda_serve_run.sh OUT}
root=$(pwd)
mkdir -p "$out"
w=/tmp/serve
[ -x $w/bin/ds4server ] || tar -C /tmp -xJf "$root/.devwork/serve.tar.xz" || exit 3
export LD_LIBRARY_PATH=$w/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$w/py
py=${PY:-/opt/torch/.venv/bin/python}
[ -x "$py" ] || py=python3
cells=${CELLS:-qwen-AR,glm-AR,deepseek-AR}
start=$(date +%s)
log() { echo "== $(( $(date +%s) - start )) s: $*" | tee -a "$out/log.txt"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader) cells $cells"
"$w/bin/ds4server" version >/dev/null 2>&1 || { log "ds4server does not start:"; ldd "$w/bin/ds4server" | grep "not found" | tee -a "$out/log.txt"; exit 3; }
rc=0
for be in cuda cpu; do
  "$py" tools/eval/ds4_eval.py --bin "$w/bin" --cells "$cells" --repeats "${REPEATS:-1}" --progress off \
    --server-arg=--backend=$be --out "$out/eval-$be" >"$out/eval-$be.txt" 2>&1
  e=$?
  log "ds4-eval --backend $be exit $e"
  [ $e -eq 0 ] || rc=$e
  tail -3 "$out/eval-$be.txt"
done
"$py" tools/eval/compare_receipts.py "$out/eval-cpu/receipts.jsonl" "$out/eval-cuda/receipts.jsonl" >"$out/compare.txt" 2>&1
c=$?
log "compare cpu vs cuda exit $c: $(tail -1 "$out/compare.txt")"
grep -h '"backend"\|gpu_canary' "$out/eval-cuda/receipts.jsonl" 2>/dev/null | head -2 | cut -c1-300
exit $(( rc != 0 ? rc : c ))
