#!/usr/bin/env bash
# Prepared for the next session's first call (~8 min; not run in session 27): the rewritten chunk-row
# conversions (dequant_bf16.cu, after call 2). Tests first (test_cuda_matmul's bit-exact conversion
# checks, then the model / batch / verify-batch tests, which all take tensor-core chunks through
# them), then the prefill A/B against binaries at 42b02d1 (the old conversions), same machine.
# Carry .devwork/cudabins.tar.xz (PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build at the
# session's code) and .devwork/oldbins.tar.xz (the same pack built at 42b02d1, renamed).
set -u
. bench/device_call_lib.sh
call_start .devwork/cudabins.tar.xz
mkdir -p /tmp/old && tar -C /tmp/old -xJf .devwork/oldbins.tar.xz || exit 3
N=$B/cudabins O=/tmp/old/cudabins
export LD_LIBRARY_PATH=$N/lib:$LD_LIBRARY_PATH
B=$N
one test_cuda_matmul
for t in test_deepseek_v4_cuda test_glm5_cuda test_qwen_next_cuda test_deepseek_v4_batch_cuda test_glm5_batch_cuda \
         test_qwen_next_batch_cuda test_deepseek_v4_verify_batch_cuda test_glm5_verify_batch_cuda test_qwen_next_verify_batch_cuda; do
  one $t .
done
timeout 60 $N/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
for v in old new; do
  [ $v = old ] && D=$O || D=$N
  late 480 && break
  t0=$(date +%s)
  timeout 90 $D/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --profile --prefill 2048,8192 --prefill-rows 1024 --old-max 0 > $OUT/ds_$v.txt 2>&1
  echo "deepseek $v exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/ds_$v.txt | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
  t0=$(date +%s)
  timeout 60 $D/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048,8192 --old 0 --prefill-rows 2048 > $OUT/glm_$v.txt 2>&1
  echo "glm $v exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/glm_$v.txt | cut -d'|' -f2-4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
  t0=$(date +%s)
  timeout 60 $D/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048 --prefill-rows=1024 --old-max=0 > $OUT/qwen_$v.txt 2>&1
  echo "qwen $v exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *2048 \|' $OUT/qwen_$v.txt | tail -1 | cut -d'|' -f2-4)" | tee -a $OUT/summary.txt
done
cd $OUT && tar --exclude=summary.txt -cJf /tmp/all.tar.xz . && mv /tmp/all.tar.xz . && find . -type f ! -name summary.txt ! -name all.tar.xz -delete
