#!/usr/bin/env bash
# One H200 call of the MTP head self-distillation (issue #13), run from the tree root:
#   1. prompts (onpolicy_prompts.py, rendered by the server's own template),
#   2. the shipped trunk answers them greedily with `ds4server run --batch`: CUDA processes
#      and single-thread CPU processes side by side until GEN_S seconds,
#   3. distill_mtp.py trains the head on those answers for TRAIN_S seconds against the
#      shipped GGUF's dequantized trunk (gguf_to_fp32.py).
# Needs .devwork/gen (carried, not committed): bin/ds4server of the cuda preset, lib/ with the
# shared libraries the H200 image lacks (pcre2, icu 72, yaml-cpp, cpp-httplib, brotli,
# cudart 13), py/gguf (the gguf package); or .devwork/gen.tar.xz of that folder (the carry limit is
# 64 MiB with the tree, and ICU's data alone is 31 MB unpacked). Usage: tools/train/distill_device_run.sh OUT [GEN_S] [TRAIN_S]
set -u
out=${1:?usage: distill_device_run.sh OUT [GEN_S] [TRAIN_S]}
gen_s=${2:-180}
train_s=${3:-220}
root=$(pwd)
w=$root/.devwork/gen
[ -d "$w" ] || tar -C "$root/.devwork" -xJf "$root/.devwork/gen.tar.xz"
export LD_LIBRARY_PATH=$w/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$w/py
py=${PY:-/opt/torch/.venv/bin/python}  # PY, NGPU, NCPU, NPROMPTS, DEVICE: overrides for a local trial
bin=$w/bin/ds4server
d=/tmp/distill
mkdir -p "$out" "$d/q8"
start=$(date +%s)
log() { echo "== $(( $(date +%s) - start )) s: $*" | tee -a "$out/run.txt"; }
log "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
# A carried .devwork/onpolicy.tar.gz (an earlier call's prompts and answers) skips steps 1-2.
[ -f "$root/.devwork/onpolicy.tar.gz" ] && tar -C "$d" -xzf "$root/.devwork/onpolicy.tar.gz"
if [ ! -f "$d/cpu.txt" ]; then
  "$py" -u tools/train/onpolicy_prompts.py --bin "$bin" --n ${NPROMPTS:-12000} --seed 11 --out "$d/gpu.txt" >"$out/prompts.txt" 2>&1
  "$py" -u tools/train/onpolicy_prompts.py --bin "$bin" --n $(( ${NPROMPTS:-12000} * 5 / 2 )) --seed 12 --out "$d/cpu.txt" >>"$out/prompts.txt" 2>&1
  log "prompts: $(tail -2 "$out/prompts.txt" | tr '\n' ' ')"
fi
cp models/default/config.json "$d/q8/"
"$py" tools/train/gguf_to_fp32.py models/default/model.gguf "$d/q8/model-fp32-gguf.safetensors" >"$out/dequant.txt" 2>&1 ||
  { log "dequantize failed (see dequant.txt): training against the bf16 master"; cp models/default/model.safetensors "$d/q8/"; }
if ls "$d"/cpu.a* >/dev/null 2>&1; then
  log "answers of an earlier call on this machine found: generation skipped"
else
ncpu=${NCPU:-$(( $(nproc) - 3 ))}
ngpu=${NGPU:-2}
pids=()
for i in $(seq 0 $(( ngpu - 1 ))); do
  "$bin" run --model models/default/model.gguf --backend cuda --batch "$d/gpu.txt" --out "$d/gpu.a$i" \
    --shard $i/$ngpu -n 256 --time-limit "$gen_s" >"$out/gen_gpu$i.txt" 2>&1 &
  pids+=($!)
done
for i in $(seq 0 $(( ncpu - 1 ))); do
  "$bin" run --model models/default/model.gguf --threads 1 --batch "$d/cpu.txt" --out "$d/cpu.a$i" \
    --shard $i/$ncpu -n 256 --time-limit "$gen_s" >"$out/gen_cpu$i.txt" 2>&1 &
  pids+=($!)
done
wait "${pids[@]}"
log "generation done: $(cat "$d"/gpu.a* "$d"/cpu.a* | wc -l) answers"
tail -qn1 "$out"/gen_gpu*.txt 2>/dev/null "$out"/gen_cpu0.txt | tee -a "$out/run.txt"
fi
pairs=()
for f in $(ls "$d"/gpu.a* 2>/dev/null); do pairs+=(--pair "$d/gpu.txt" "$f"); done
for f in "$d"/cpu.a*; do pairs+=(--pair "$d/cpu.txt" "$f"); done
"$py" -u tools/train/distill_mtp.py --model "$d/q8" --master models/default "${pairs[@]}" --out "$out/distill" \
  --device "${DEVICE:-cuda}" --train-budget "$train_s" >"$out/distill.txt" 2>&1
log "distill exit $?"
[ -f "$root/.devwork/onpolicy.tar.gz" ] || tar -czf "$out/onpolicy.tar.gz" -C "$d" gpu.txt cpu.txt $(cd "$d" && ls gpu.a* cpu.a* 2>/dev/null)
log "total"
# Only a few files come back from the machine: the logs travel as one archive.
tar -czf "$out/logs.tar.gz" -C "$out" $(cd "$out" && ls *.txt) && rm -f "$out"/gen_*.txt
grep -v "^\[transformers\]" "$out/distill.txt" | tail -25
