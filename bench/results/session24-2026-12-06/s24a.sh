#!/usr/bin/env bash
# Session 24 call 1 (~8 min, guarded): session 23's unrun review mends (test_grouped_mma_int8,
# test_glm5_mla_tc_cuda, test_qwen_decode_kernels_cuda), bench_cuda_matmul_rows (a chunk's dense
# TF32 product split into dequant_f32 and the GEMM), then issue #22's prefill tables for Qwen and
# GLM at 2K / 8K / 32K (GLM at 288 experts on an H200, 160 on an H100's memory), then #23's decode
# tables of both at 2K / 32K. Carry .devwork/ds24a.tar.xz (cuda-pack at main, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds24a.tar.xz
one test_grouped_mma_int8
one test_glm5_mla_tc_cuda
one test_qwen_decode_kernels_cuda
grep -E "FAIL|FATAL" $OUT/tests.txt | head -10
for n in 512 1024; do
  timeout 60 $B/bench_cuda_matmul_rows $n 10 >> $OUT/matmul.txt 2>&1; echo "matmul rows $n exit $?" | tee -a $OUT/summary.txt
done
E=288; grep -q H100 $OUT/gpu.txt && E=160
t0=$(date +%s)
timeout 150 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192,32768 --old-max=0 > $OUT/qwen_prefill.txt 2>&1
echo "qwen prefill exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(2048|8192|32768) \|" $OUT/qwen_prefill.txt | head -6
late 330 && exit 0
t0=$(date +%s)
timeout 180 $B/bench_glm5_cuda synthetic-full:q2_k:$E 0 2048 --prefill 2048,8192,32768 --old 0 > $OUT/glm_prefill.txt 2>&1
echo "glm prefill ($E experts) exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| *(2048|8192|32768) \|" $OUT/glm_prefill.txt | head -6
late 470 && exit 0
t0=$(date +%s)
timeout 90 $B/bench_qwen_next_cuda synthetic-full 32 2048,32768 --profile > $OUT/qwen_decode.txt 2>&1
echo "qwen decode exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -iE "roofline|tok/s" $OUT/qwen_decode.txt | head -8
