#!/usr/bin/env bash
# Session 21 call 1 (= session 20's unrun call 6): gemv_rows decodes each unit once for the f32-x
# formats (BF16, F16, F32, Q8_0, MLX q4 / q8: expand + dot_e, gemv_formats.cuh). Every test that
# holds gemv_rows (and what calls it) to gemv bit for bit, then the rows table and the Qwen / GLM
# decode-batch tables, new and old (bench binaries built before 5504795, packed in the same xz
# stream under serve/old: OLD= of tools/device/make_bundle.sh), in the same run; then GLM's batch
# per-op table (cb2f5cb). Also the IQ2_XXS lane-table decoder (ActIQ2_XXS4L, not the default):
# test_gemv_act bit for bit against the other decoders, its sweep (bench_cuda_gemv --act, variant
# LT) and the routed decode-batch table with and without it. Test logs in tests.txt.
set -u
tar -C /tmp -xJf .devwork/s21a.tar.xz || exit 3
B=/tmp/serve/bin
O=/tmp/serve/old
export LD_LIBRARY_PATH=/tmp/serve/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); echo "=== $n" >> $OUT/tests.txt; timeout 150 $B/$n "$@" >> $OUT/tests.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
T0=$(date +%s)
late() { [ $(( $(date +%s) - T0 )) -gt $1 ]; }
one test_gemv_act
one test_cuda_ops
one test_cuda_matmul
one test_gemv_pdl
one test_cuda_hc_fused
one test_qwen_hyper_fused_cuda .
one test_qwen_next_batch_cuda .
one test_qwen_next_verify_batch_cuda .
one test_qwen_next_cuda .
one test_qwen_next_mtp_cuda .
one test_glm5_batch_cuda .
one test_glm5_verify_batch_cuda .
one test_glm5_cuda .
one test_glm5_mtp_cuda .
one test_deepseek_v4_batch_cuda .
one test_deepseek_v4_cuda .
grep -E "FAIL|FATAL|Failure" $OUT/tests.txt | head -20
t0=$(date +%s)
timeout 120 $B/bench_cuda_gemv --act 10 > $OUT/act.txt 2>&1
echo "act exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
for lt in "" --lane-tables; do
  late 400 && break
  t0=$(date +%s)
  timeout 60 $B/bench_cuda_gemv --routed 10 $lt > $OUT/routed${lt:+_lt}.txt 2>&1
  echo "routed $lt exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
done
t0=$(date +%s)
late 430 || { echo "### new"; timeout 60 $B/bench_cuda_gemv --rows 10; echo "### old (before 5504795)"; timeout 60 $O/bench_cuda_gemv 10 --no-sweep | sed -n '/^gemv_rows/,$p'; } > $OUT/rows.txt 2>&1
echo "rows exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
for b in new old; do
  late 450 && break
  d=$B; [ $b = old ] && d=$O
  t0=$(date +%s)
  timeout 100 $d/bench_qwen_next_cuda synthetic-full 8 512 --batch 1,4,16 --batch-steps 4 > $OUT/qwen_batch_$b.txt 2>&1
  echo "qwen $b exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  t0=$(date +%s)
  timeout 100 $d/bench_glm5_cuda synthetic-full:q2_k:160 8 512 --context-tc --batch 1,4,16 --batch-steps 4 > $OUT/glm_batch_$b.txt 2>&1
  echo "glm $b exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
done
late 520 || { t0=$(date +%s)
timeout 70 $B/bench_glm5_cuda synthetic-full:q2_k:160 8 512 --context-tc --batch 1,16 --batch-profile > $OUT/glm_batch_profile.txt 2>&1
echo "glm profile exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
grep -H -E "^\| (1|4|16) \|" $OUT/qwen_batch_*.txt $OUT/glm_batch_*.txt
