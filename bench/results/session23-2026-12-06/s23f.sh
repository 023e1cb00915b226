#!/usr/bin/env bash
# Session 23 call 6 (~2 min, guarded): GLM's MLA attention of tensor-core chunks on tensor cores
# (mla_tc.cu): test_glm5_mla_tc_cuda (vs mla_attend), test_glm5_cuda (item 8: the tensor-core
# chunk vs the CPU model), test_glm5_batch_cuda (exact batches, unchanged), then the 2K prefill
# with DS4_MLA_TC=1 and =0 (one process each, same machine). Carry .devwork/ds23e.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/ds23e.tar.xz
one test_glm5_mla_tc_cuda
one test_glm5_cuda .
one test_glm5_batch_cuda .
grep -E "FAIL|FATAL|mla_attend|tensor cores" $OUT/tests.txt | head -12
for tc in 1 0; do
  late 200 && break
  t0=$(date +%s)
  DS4_MLA_TC=$tc timeout 60 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048 --old 0 > $OUT/glm_prefill_tc$tc.txt 2>&1
  echo "glm prefill DS4_MLA_TC=$tc exit $? in $(( $(date +%s) - t0 )) s" | tee -a $OUT/summary.txt
  grep -E "^\| *2048 \||^\| (mla attend|moe experts gate_up) " $OUT/glm_prefill_tc$tc.txt | head -4
done
