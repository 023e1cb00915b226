#!/usr/bin/env bash
# Session 25 call 1 (~5 min): the fused mHC decode kernel (#23) before / after this session's change
# (unrolled Sinkhorn gathers, the hc_post / MoE prologue's loads batched, the norm loads after the
# stream loads) and over 4 .. 128 column blocks (bench_cuda_hc_fused: DeepSeek F16 fn, GLM F32 fn);
# its test and the DeepSeek / GLM tests (decode step == chunk row bit for bit); then the decode with
# its per-op table at DS4_HC_SPLITS 16 (the layout so far), 32 and 64: DeepSeek 30-layer synthetic
# Flash, GLM 160 experts. Carry .devwork/ds25a.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds25a.tar.xz
( timeout 100 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > $OUT/convert.txt 2>&1; echo "convert exit $?" >> $OUT/summary.txt ) &
for v in old new; do
  echo "=== $v f16 (DeepSeek)" >> $OUT/hc.txt; timeout 40 $B/bench_cuda_hc_fused_$v 30 60 4096 4 f16 >> $OUT/hc.txt 2>&1
  echo "=== $v f32 (GLM)" >> $OUT/hc.txt; timeout 40 $B/bench_cuda_hc_fused_$v 30 60 4096 4 f32 >> $OUT/hc.txt 2>&1
  echo "hc bench $v exit $?" | tee -a $OUT/summary.txt
done
grep -E "^launch|^\| hc_post of a MoE" $OUT/hc.txt | head -40
one test_cuda_hc_fused
one test_deepseek_v4_fused_quant_cuda
one test_deepseek_v4_cuda
one test_deepseek_v4_actq_cuda
one test_glm5_cuda .
grep -E "FAIL" $OUT/tests.txt | head
wait
for sp in 16 32 64; do
  late 330 && break
  t0=$(date +%s); echo "=== DS4_HC_SPLITS=$sp" >> $OUT/ds.txt
  DS4_HC_SPLITS=$sp timeout 60 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --profile >> $OUT/ds.txt 2>&1
  echo "deepseek splits $sp exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^decode:' $OUT/ds.txt | tail -1) hc_post_pre $(grep -E '^\| hc_post_pre ' $OUT/ds.txt | tail -1)" | tee -a $OUT/summary.txt
done
for sp in 16 64; do
  late 420 && break
  t0=$(date +%s); echo "=== DS4_HC_SPLITS=$sp" >> $OUT/glm.txt
  DS4_HC_SPLITS=$sp timeout 70 $B/bench_glm5_cuda synthetic-full:q2_k:160 16 2048 --profile >> $OUT/glm.txt 2>&1
  echo "glm splits $sp exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *2048 \|' $OUT/glm.txt | tail -1)" | tee -a $OUT/summary.txt
done
