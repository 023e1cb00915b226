#!/usr/bin/env bash
# Session 20 call 5: where a GLM / Qwen decode batch's time goes (issue #24: their 16-row
# forwards cost ~8x one row, DeepSeek's ~5.8x): the batch tables at 1 and 16 streams with the
# per-op table of one step (--batch-profile, newly wired for these two benches), synthetic
# full-size models at a 512-token context (GLM with 160 Q2_K experts: the H100's memory).
set -u
tar -C /tmp -xJf .devwork/serve.tar.xz || exit 3
B=/tmp/serve/bin
export LD_LIBRARY_PATH=/tmp/serve/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
t0=$(date +%s)
timeout 200 $B/bench_glm5_cuda synthetic-full:q2_k:160 8 512 --context-tc --batch 1,16 --batch-steps 4 --batch-profile > $OUT/glm_batch.txt 2>&1
echo "glm exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 200 $B/bench_qwen_next_cuda synthetic-full 8 512 --batch 1,16 --batch-steps 4 --batch-profile > $OUT/qwen_batch.txt 2>&1
echo "qwen exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -A28 "per-op GPU time of one decode_batch step of 16" $OUT/glm_batch.txt | head -30
grep -A28 "per-op GPU time of one decode_batch step of 16" $OUT/qwen_batch.txt | head -30
