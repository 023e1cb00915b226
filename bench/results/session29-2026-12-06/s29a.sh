#!/usr/bin/env bash
# Session 29's call 1 (session 28's s28g.sh, which got no machine, with the whole suite after the
# A/Bs; ~9 min). Carry .devwork/s29a.tar.xz: TARGETS="<tools/device/run_cuda_tests.sh's tests but
# test_admission_cuda> bench_deepseek_v4_cuda bench_glm5_cuda bench_qwen_next_cuda ds4-convert" BUNDLE=.devwork/s29a.tar.xz PRESET=cuda-pack
# tools/device/pack_cuda_bins.sh --build. First the tests this session's last changes touch
# (attend_tc's and mla_attend_tc's FP16 forms, backend/cuda/flash_f16.cuh, with their timings; the
# long-prompt band check; the 2048-slack window ring under MTP / DSpark), then the A/Bs in the
# same process setup: DeepSeek 30 layers' prefill in 2048-row chunks with DS4_ATTEND_TC_F16 1 / 0
# and GLM (160 experts) with DS4_MLA_TC_F16 1 / 0 (per-op chunk tables), then the rest of the
# CUDA suite while time is left (560 s in all).
set -u
. bench/device_call_lib.sh
call_start .devwork/s29a.tar.xz
B=$B/cudabins
export LD_LIBRARY_PATH=$B/lib:$LD_LIBRARY_PATH
for t in test_deepseek_v4_cuda test_deepseek_v4_mtp_cuda test_deepseek_v4_dspark_cuda; do one $t .; done
one test_glm5_mla_tc_cuda
grep -h "info attend\|FAIL" $OUT/tests.txt | cut -c1-220 | head -8 | tee -a $OUT/summary.txt
timeout 60 $B/ds4-convert --synthetic bench/cuda_deepseek_v4/flash30_config.json /dev/shm/f.gguf --quant-experts IQ2_XXS --expert-holes > /dev/null 2>&1
for f in 1 0; do
  late 260 && { echo "f16=$f not run (time)" | tee -a $OUT/summary.txt; continue; }
  t0=$(date +%s)
  DS4_ATTEND_TC_F16=$f timeout 60 $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 64 8 --profile --prefill 2048,8192 --prefill-rows 2048 --old-max 0 > $OUT/ds_f16_$f.txt 2>&1
  echo "f16=$f exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/ds_f16_$f.txt | cut -d'|' -f2-4 | tr '\n' ' ') $(grep -E '^\| attend \|' $OUT/ds_f16_$f.txt | head -2 | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
for f in 1 0; do
  late 340 && { echo "glm f16=$f not run (time)" | tee -a $OUT/summary.txt; continue; }
  t0=$(date +%s)
  DS4_MLA_TC_F16=$f timeout 60 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048,8192 --old 0 --prefill-rows 2048 > $OUT/glm_f16_$f.txt 2>&1
  echo "glm f16=$f exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/glm_f16_$f.txt | cut -d'|' -f2-4 | tr '\n' ' ') $(grep -E '^\| mla attend \|' $OUT/glm_f16_$f.txt | head -1 | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
for t in test_cuda_matmul test_grouped_mma_int8 test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda test_deepseek_v4_actq_cuda test_deepseek_v4_fused_quant_cuda test_cuda_ops test_glm5_cuda test_qwen_next_cuda test_glm5_batch_cuda test_glm5_verify_batch_cuda test_glm5_mtp_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda test_qwen_next_mtp_cuda test_qwen_hyper_fused_cuda test_qwen_decode_kernels_cuda test_cuda_hc_fused test_cuda_canary test_cuda_sample test_cuda_grouped_gemm test_gemv_act test_gemv_act_mma test_gemv_decode test_gemv_pdl test_grouped_mma_frag test_synthetic_cuda; do
  late 470 && { echo "$t not run (time)" >> $OUT/summary.txt; continue; }
  case $t in test_cuda_*|test_grouped_*|test_gemv_*|test_synthetic_cuda|*_fused_*|*decode_kernels*) one $t ;; *) one $t . ;; esac
done
cd $OUT && xz -9 tests.txt
