#!/usr/bin/env bash
# Session 21 call 4 (the last ~270 s of the budget): the lane-table IQ2_XXS decoder and the Q2_K
# aligned loads, correctness first (test_gemv_act: bit for bit against the other decoders), then
# the --act sweep (LT column, Q2_K's third variant) and the routed decode-batch table with and
# without them. Carry: .devwork/s21c.tar.xz (call 3's bundle).
set -u
tar -C /tmp -xJf .devwork/s21c.tar.xz || exit 3
B=/tmp/serve/bin
export LD_LIBRARY_PATH=/tmp/serve/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
t0=$(date +%s); timeout 60 $B/test_gemv_act > $OUT/test_gemv_act.txt 2>&1; echo "test_gemv_act exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "FAIL|FATAL|lane|aligned" $OUT/test_gemv_act.txt | head -20
t0=$(date +%s); timeout 80 $B/bench_cuda_gemv --act 3 > $OUT/act.txt 2>&1; echo "act exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^(IQ2|Q2_K)" $OUT/act.txt | head -30
for lt in "" "--lane-tables --q2k-aligned"; do
  t0=$(date +%s); timeout 25 $B/bench_cuda_gemv --routed 3 $lt > "$OUT/routed${lt:+_lt}.txt" 2>&1
  echo "routed $lt exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
done
