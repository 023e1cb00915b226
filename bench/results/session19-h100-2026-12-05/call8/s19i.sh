#!/usr/bin/env bash
# Session 19 call 8 (cuda-pack binaries): the tensor-core gemv_act_rows with blocks walking several
# tiles through two weight buffers (the next tile streams in while one is multiplied);
# test_gemv_act, the DeepSeek model tests, the kernel table; the 30-layer synthetic Flash batch
# table at 1 / 4 / 16 / 64 streams with --mma-ab; the same model through the real server with
# 128-token answers (steady decode), 1 / 4 / 16 / 64 streams.
set -u
root=$(pwd)
mkdir -p /tmp/x && tar -C /tmp/x -xJf .devwork/s19i.tar.xz
B=/tmp/x/c
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); timeout 90 $B/$n "$@" > $OUT/$n.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; grep -E "FAIL|FATAL" $OUT/$n.txt | head -12 | tee -a $OUT/summary.txt; }
( timeout 90 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
one test_gemv_act
one test_deepseek_v4_batch_cuda .
one test_deepseek_v4_verify_batch_cuda .
one test_deepseek_v4_cuda .
one test_deepseek_v4_mtp_cuda .
timeout 60 $B/bench_cuda_gemv --rows-mma 20 > $OUT/rows_mma.txt 2>&1; echo "rows-mma exit $?" | tee -a $OUT/summary.txt; tail -6 $OUT/rows_mma.txt
wait
t0=$(date +%s)
timeout 200 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --batch 1,4,16,64 --batch-steps 8 --batch-rows 16 --batch-profile --mma-ab > $OUT/flash30_mma.txt 2>&1
echo "bench exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(1|4|16|64) \||dp4a" $OUT/flash30_mma.txt | head -12
# the real server on the same file
w=/tmp/serve
tar -C /tmp -xJf "$root/.devwork/serve.tar.xz" || exit 3
export LD_LIBRARY_PATH=$w/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONPATH=$w/py
xz -dc "$root/.devwork/ds_tokenizer.json.xz" > /dev/shm/tokenizer.json || exit 3
t0=$(date +%s)
timeout 300 python3 bench/batching_cpu/bench_streams.py --bin $w/bin/ds4server --model /dev/shm/f.gguf --tag flash30-streams \
  --backend cuda --modes on --speculative false --streams 1,4,16,64 --requests 1 --repeats 1 --max-tokens 128 \
  --server-arg context_size=4096 --out $OUT > $OUT/streams.txt 2>&1
echo "bench_streams exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
tail -12 $OUT/streams.txt
