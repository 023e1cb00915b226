#!/usr/bin/env bash
# Session 25 call 2 (~4 min): GLM's MLA decode attention kernels (mla.cu: scores with the head group's
# queries in shared memory and 4 rows per warp; output with the 32-row groups loaded once per block,
# double-buffered; each output the same operations as before): the GLM CUDA tests (decode step ==
# chunk row, batch, verify-batch, MTP, the tensor-core MLA against mla_attend), then the decode with
# its per-op table at 2K (160 experts; call 1 before: scores 1.849, output 0.778 ms/token) and the
# 16-stream batch table. Carry .devwork/ds25b.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds25b.tar.xz
one test_glm5_cuda .
one test_glm5_batch_cuda .
one test_glm5_verify_batch_cuda .
one test_glm5_mtp_cuda .
one test_glm5_mla_tc_cuda
grep -E "FAIL" $OUT/tests.txt | head
t0=$(date +%s)
timeout 90 $B/bench_glm5_cuda synthetic-full:q2_k:160 16 2048 --profile > $OUT/glm.txt 2>&1
echo "glm decode exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *2048 \|' $OUT/glm.txt | tail -1)" | tee -a $OUT/summary.txt
grep -E "^\| mla attend" $OUT/glm.txt | head -3 | tee -a $OUT/summary.txt
late 200 && exit 0
t0=$(date +%s)
timeout 120 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --batch 1,16 --batch-rows 16 --batch-profile > $OUT/glm_batch.txt 2>&1
echo "glm batch exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
grep -E "^\| (1|16) \|" $OUT/glm_batch.txt | head -4 | cut -c1-160
