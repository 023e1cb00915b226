#!/usr/bin/env bash
# Session 25 call 10 (~4 min): (1) test_cuda_hc_fused with its new check of the GPU split + collapse
# against the CPU's for n_hc 1 .. 8 (the register Sinkhorn with unrolled gathers, n <= 5, and the
# shared form); (2) GLM's indexer pool scores with the token's queries staged in shared memory (the
# GLM tests: the tiny model's 32-position budget makes every long test prompt score pools), then
# GLM decode at 2K and 32K before (bench_glm5_cuda_old = 94182e5) / after, 160 experts.
# Carry .devwork/ds25j.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds25j.tar.xz
one test_cuda_hc_fused
grep -E "n_hc [0-9]+: split|FAIL" $OUT/tests.txt | head -10
one test_glm5_cuda .
one test_glm5_batch_cuda .
one test_glm5_verify_batch_cuda .
one test_glm5_mtp_cuda .
grep -E "FAIL" $OUT/tests.txt | head
for v in old new; do
  late 420 && break
  t0=$(date +%s); b=bench_glm5_cuda; [ $v = old ] && b=bench_glm5_cuda_old
  echo "=== $v" >> $OUT/glm.txt
  timeout 150 $B/$b synthetic-full:q2_k:160 32 2048,32768 --context-tc >> $OUT/glm.txt 2>&1
  echo "glm $v exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|32768) \|' $OUT/glm.txt | tail -2 | cut -d'|' -f2,7,8 | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
