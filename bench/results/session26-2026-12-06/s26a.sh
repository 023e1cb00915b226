#!/usr/bin/env bash
# Session 26 call 1 (~7 min): the hc_fused products' conflict-free staging (staged_slot).
# Same-run A/B of old (HEAD 44bc44a) and new binaries: GLM 5.x (160 experts, 2048-row chunks) and
# DeepSeek 30-layer (1024-row chunks) prefill at 2K / 8K with per-op tables; test_cuda_hc_fused and
# the two model tests (chunk rows == decode steps bit for bit). Carry .devwork/s26a.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/s26a.tar.xz
one test_cuda_hc_fused
for v in old new; do
  t0=$(date +%s)
  timeout 80 $B/$v/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048,8192 --old 0 --prefill-rows 2048 > $OUT/glm_$v.txt 2>&1
  echo "glm $v exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/glm_$v.txt | cut -d'|' -f2-4 | tr '\n' ' ') hc: $(grep -E 'hyper-conn' $OUT/glm_$v.txt | head -1)" | tee -a $OUT/summary.txt
done
t0=$(date +%s)
timeout 100 $B/new/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1
echo "convert exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
for v in old new; do
  t0=$(date +%s)
  timeout 90 $B/$v/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 16 --profile --prefill 2048,8192 --prefill-rows 1024 --old-max 0 > $OUT/ds_$v.txt 2>&1
  echo "deepseek $v exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/ds_$v.txt | cut -d'|' -f2-4 | tr '\n' ' ') $(grep -E '^\| hc_(post_)?pre ' $OUT/ds_$v.txt | tr -s ' ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
  late 400 && break
done
late 430 || one test_deepseek_v4_cuda .
late 470 || one test_glm5_cuda .
