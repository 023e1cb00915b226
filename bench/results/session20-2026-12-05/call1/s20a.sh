#!/usr/bin/env bash
# Session 20 call 1: decode_batch_candidates (each batched row's sampling candidates on the GPU;
# the engine's batched draw) and write_row_shifts (d9f301f): the batch / verify-batch tests of the
# three families, test_cuda_sample (the rows form of sample_reduce), test_gemv_act (ac0d24c's
# bad-input items), the DeepSeek model test, test_admission_cuda; then the 30-layer synthetic Flash
# batch table (decode_batch and decode_batch_candidates steps) and the same model through the
# real server at 1 / 4 / 16 / 64 streams with the engine's new iteration-time metrics.
# Carry: .devwork/serve.tar.xz (EXTRA=... tools/device/make_bundle.sh build/cuda-pack/bin/ds4server)
# and .devwork/ds_tokenizer.json.xz.
set -u
root=$(pwd)
tar -C /tmp -xJf .devwork/serve.tar.xz || exit 3
w=/tmp/serve
B=$w/bin
export LD_LIBRARY_PATH=$w/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 150 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -12 | tee -a $OUT/summary.txt; }
( timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_cuda_sample
one test_deepseek_v4_batch_cuda .
one test_glm5_batch_cuda .
one test_qwen_next_batch_cuda .
one test_deepseek_v4_verify_batch_cuda .
one test_glm5_verify_batch_cuda .
one test_gemv_act
one test_deepseek_v4_cuda .
one test_admission_cuda .
wait
t0=$(date +%s)
timeout 150 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --batch 1,4,16,64 --batch-steps 8 --batch-rows 16 > $OUT/flash30.txt 2>&1
echo "bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(1|4|16|64) \|" $OUT/flash30.txt | head -6
export PYTHONPATH=$w/py
xz -dc "$root/.devwork/ds_tokenizer.json.xz" > /dev/shm/tokenizer.json || exit 3
t0=$(date +%s)
timeout 240 python3 bench/batching_cpu/bench_streams.py --bin $B/ds4server --model /dev/shm/f.gguf --tag flash30-streams \
  --backend cuda --modes on --speculative false --streams 1,4,16,64 --requests 1 --repeats 1 --max-tokens 128 \
  --server-arg context_size=4096 --out $OUT > $OUT/streams.txt 2>&1
echo "bench_streams exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
tail -8 $OUT/streams.txt
