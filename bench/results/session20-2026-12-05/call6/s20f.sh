#!/usr/bin/env bash
# Session 20 call 6: gemv_rows decodes each unit once for the f32-x formats (BF16, F16, F32, Q8_0,
# MLX q4 / q8: expand + dot_e, gemv_formats.cuh), where it decoded it per input row: every test
# that holds gemv_rows (and what calls it) to gemv bit for bit, then the rows table (new and the
# old bench_cuda_gemv of this session's start, same run) and the Qwen / GLM decode-batch tables
# at 1 and 16 streams, new and old (call 5's build) in the same run. Logs of the tests in tests.txt.
set -u
tar -C /tmp -xJf .devwork/serve.tar.xz || exit 3
mkdir -p /tmp/old && tar -C /tmp/old -xJf .devwork/old.tar.xz || exit 3
B=/tmp/serve/bin
O=/tmp/old/oldbins
export LD_LIBRARY_PATH=/tmp/serve/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
one() { local n=$1; shift; local t0=$(date +%s); echo "=== $n" >> $OUT/tests.txt; timeout 150 $B/$n "$@" >> $OUT/tests.txt 2>&1; echo "$n exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt; }
one test_cuda_ops
one test_cuda_matmul
one test_gemv_pdl
one test_cuda_hc_fused
one test_qwen_hyper_fused_cuda .
one test_qwen_next_batch_cuda .
one test_qwen_next_verify_batch_cuda .
one test_qwen_next_cuda .
one test_glm5_batch_cuda .
one test_glm5_verify_batch_cuda .
one test_glm5_cuda .
one test_deepseek_v4_batch_cuda .
one test_deepseek_v4_cuda .
grep -E "FAIL|FATAL" $OUT/tests.txt | head -20
t0=$(date +%s)
{ echo "### new"; timeout 60 $B/bench_cuda_gemv --rows 10; echo "### old (this session's start)"; timeout 60 $O/bench_cuda_gemv 10 --no-sweep | sed -n '/^gemv_rows/,$p'; } > $OUT/rows.txt 2>&1
echo "rows exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
for b in new old; do
  d=$B; [ $b = old ] && d=$O
  t0=$(date +%s)
  timeout 100 $d/bench_qwen_next_cuda synthetic-full 8 512 --batch 1,4,16 --batch-steps 4 > $OUT/qwen_batch_$b.txt 2>&1
  echo "qwen $b exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  t0=$(date +%s)
  timeout 100 $d/bench_glm5_cuda synthetic-full:q2_k:160 8 512 --context-tc --batch 1,4,16 --batch-steps 4 > $OUT/glm_batch_$b.txt 2>&1
  echo "glm $b exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
done
grep -H -E "^\| (1|4|16) \|" $OUT/qwen_batch_*.txt $OUT/glm_batch_*.txt
