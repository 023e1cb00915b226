#!/usr/bin/env bash
# Session 21 call 2: the 30-layer synthetic Flash (ds4 q2 layout, IQ2_XXS experts): decode under
# each IQ2_XXS decoder (--act-variants: the lane tables, ActIQ2_XXS4L, against the default, same
# process, tokens compared), the batch tables at batch_rows 8 and 16 in one process (de67e24's
# case: decode_batch_candidates' buffers remade larger) and again with the lane tables (--lt-ab);
# the DeepSeek verify-batch test and test_admission_cuda on this build; then the model through the
# real server at 1 / 4 / 16 / 64 streams (the default decoders).
# Carry: .devwork/s21b.tar.xz (EXTRA="bench_deepseek_v4_cuda ds4-convert
# test_deepseek_v4_verify_batch_cuda test_admission_cuda" tools/device/make_bundle.sh
# build/cuda-pack/bin/ds4server) and .devwork/ds_tokenizer.json.xz.
set -u
root=$(pwd)
tar -C /tmp -xJf .devwork/s21b.tar.xz || exit 3
w=/tmp/serve
B=$w/bin
export LD_LIBRARY_PATH=$w/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); echo "=== $n" >> $OUT/tests.txt; timeout 150 $B/$n "$@" >> $OUT/tests.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
( timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_deepseek_v4_verify_batch_cuda .
one test_admission_cuda .
grep -E "FAIL|FATAL" $OUT/tests.txt | head
wait
t0=$(date +%s)
timeout 200 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --act-variants --batch 1,4,16,64 --batch-steps 8 --batch-rows 8,16 --lt-ab > $OUT/flash30.txt 2>&1
echo "bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(1|4|16|64) \||lane tables|default \(4" $OUT/flash30.txt | head -30
export PYTHONPATH=$w/py
xz -dc "$root/.devwork/ds_tokenizer.json.xz" > /dev/shm/tokenizer.json || exit 3
t0=$(date +%s)
timeout 220 python3 bench/batching_cpu/bench_streams.py --bin $B/ds4server --model /dev/shm/f.gguf --tag flash30-streams \
  --backend cuda --modes on --speculative false --streams 1,4,16,64 --requests 1 --repeats 1 --max-tokens 128 \
  --server-arg context_size=4096 --out $OUT > $OUT/streams.txt 2>&1
echo "bench_streams exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
tail -8 $OUT/streams.txt
