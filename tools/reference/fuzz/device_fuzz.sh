#!/usr/bin/env bash
# The fuzzer on the H200 machine (16 cores): the committed corpus through the CUDA models, then
# N random cases per family on the CPU model against transformers 5.25 (carried as wheels: the
# image has an older transformers).
# Needs, carried under .devwork/: serve.tar.xz (tools/device/make_bundle.sh: the cuda-preset
# ds4server and the libraries the image lacks) and tf525.tar.xz (transformers 5.25.0 and the
# packages it needs beyond the image's, their wheels unpacked as `pip install --target` would lay
# them out: tools/reference/fuzz/pack_transformers.sh).
# Usage: tools/reference/fuzz/device_fuzz.sh OUTDIR [CASES_PER_FAMILY=500] [FAMILIES...]
#   env: FUZZ_SEED (default 7), FUZZ_BUDGET_S (seconds for the random cases, default 360),
#        FUZZ_LENGTHS_PER_CASE (3), FUZZ_MAX_LEN (2000)
set -u
out=${1:?usage: device_fuzz.sh OUTDIR [CASES] [FAMILIES...]}
cases=${2:-500}
shift $(( $# >= 2 ? 2 : $# ))
families=("$@")
[ ${#families[@]} -gt 0 ] || families=(qwen_next glm5 deepseek_v4)
root=$(cd "$(dirname "$0")/../../.." && pwd)
mkdir -p "$out" /tmp/serve-unpack /tmp/tf525
log() { echo "== $*" | tee -a "$out/env.txt"; }
log "date $(date -u +%FT%TZ) $(nproc) cores"
tar -C /tmp/serve-unpack -xJf "$root/.devwork/serve.tar.xz" || { log "no bundle"; exit 2; }
export LD_LIBRARY_PATH=/tmp/serve-unpack/serve/lib:${LD_LIBRARY_PATH:-}
export DS4_BIN=/tmp/serve-unpack/serve/bin
tar -C /tmp/tf525 -xJf "$root/.devwork/tf525.tar.xz" || { log "no tf525.tar.xz"; exit 2; }
export PYTHONPATH=/tmp/tf525 OMP_NUM_THREADS=1 PYTHONHASHSEED=0
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" 2>&1 | tee -a "$out/env.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$out/env.txt"

log "corpus on cuda"
DS4_FUZZ_BACKEND=cuda python3 "$root/tools/reference/fuzz/corpus.py" check --backend cuda --bin "$DS4_BIN/ds4server" \
  >"$out/corpus_cuda.txt" 2>&1
log "corpus cuda exit $?: $(tail -1 "$out/corpus_cuda.txt")"
grep -v " ok " "$out/corpus_cuda.txt" | head -20

budget=${FUZZ_BUDGET_S:-360}
per=$(( budget / ${#families[@]} ))
for f in "${families[@]}"; do
  log "fuzz $f: $cases cases, budget $per s"
  timeout "$per" python3 "$root/tools/reference/fuzz/fuzz.py" --family "$f" --cases "$cases" --seed "${FUZZ_SEED:-7}" \
    --jobs "$(nproc)" --lengths-per-case "${FUZZ_LENGTHS_PER_CASE:-3}" --max-len "${FUZZ_MAX_LEN:-2000}" \
    --bin "$DS4_BIN/ds4server" --keep-failures "$out/fail_$f" >"$out/fuzz_$f.txt" 2>&1
  log "fuzz $f exit $? (124 = budget ran out): $(grep -c '^case' "$out/fuzz_$f.txt") lines, $(grep -c 'MISMATCH\|ERROR\|CRASH' "$out/fuzz_$f.txt") bad"
  tail -2 "$out/fuzz_$f.txt"
done
( cd "$out" && tar -czf fails.tgz fail_* 2>/dev/null; rm -rf fail_* )
exit 0
