#!/usr/bin/env bash
# Session 25 call 3 (~1.5 min): GLM's mla_output with 128-row groups (16 rows per warp in flight,
# their positions one group earlier; call 2: 0.808 ms/token, the 32-row shared-memory groups gained
# nothing): the GLM CUDA tests, then the decode with its per-op table at 2K (160 experts).
# Carry .devwork/ds25c.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds25c.tar.xz
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
