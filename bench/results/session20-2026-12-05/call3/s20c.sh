#!/usr/bin/env bash
# Session 20 call 3: where tensor-core prefill chunks start paying. A chat turn's new tokens are
# often 17..100 (a short prompt, or the suffix after a prefix-cache hit); DeepSeek takes tensor
# cores from 17 rows, GLM and Qwen from 64 (gemm_rows). Per prompt length from a fresh state:
# the exact 16-row chunk path ("old") against the tensor-core chunks, same process, for the
# 30-layer synthetic Flash, GLM (synthetic-full, 160 Q2_K experts: the H100's memory) and Qwen
# (synthetic-full). Carry: .devwork/serve.tar.xz (the bundle with the benches and ds4-convert).
set -u
tar -C /tmp -xJf .devwork/serve.tar.xz || exit 3
B=/tmp/serve/bin
export LD_LIBRARY_PATH=/tmp/serve/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
L=17,24,32,48,64,96,128,192,256,512
t0=$(date +%s)
timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1
echo "convert exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 200 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --prefill $L --old-max 512 > $OUT/ds_prefill.txt 2>&1
echo "deepseek exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
rm -f /dev/shm/f.gguf
t0=$(date +%s)
timeout 150 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill $L --old $L > $OUT/glm_prefill.txt 2>&1
echo "glm exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
t0=$(date +%s)
timeout 150 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=$L --old-max=512 > $OUT/qwen_prefill.txt 2>&1
echo "qwen exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -iE "^\| *[0-9]+ \|" $OUT/ds_prefill.txt | head -30
