#!/usr/bin/env bash
# Session 24 call 5 (~4 min, guarded): the delta rule with 4 lanes per S column (two 32-long FMA chains
# per token instead of 128-long ones; decode, verify and prefill kernels share the column): the Qwen and
# GLM model / batch / verify-batch / MTP tests (chunk = steps bit for bit, CPU within tolerance, item 9
# vs a double recurrence), then Qwen prefill (1024-row chunks, 2K / 8K) and decode at 2K, and GLM prefill
# (2048-row chunks, 2K / 8K). Carry .devwork/ds24e.tar.xz (cuda-pack, stripped).
set -u
. bench/device_call_lib.sh
call_start .devwork/ds24e.tar.xz
one test_qwen_next_cuda .
one test_qwen_next_batch_cuda .
one test_qwen_next_verify_batch_cuda .
one test_qwen_next_mtp_cuda .
one test_glm5_cuda .
one test_glm5_batch_cuda .
one test_glm5_verify_batch_cuda .
one test_glm5_mtp_cuda .
grep -E "FAIL|FATAL|delta_rule_rows" $OUT/tests.txt | head -12
t0=$(date +%s)
timeout 60 $B/bench_qwen_next_cuda synthetic-full 0 2048 --prefill=2048,8192 --prefill-rows=1024 --old-max=0 > $OUT/qwen.txt 2>&1
echo "qwen prefill exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/qwen.txt | tail -2 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
grep -E "^\| (gdn_recurrence|experts_gate_up|experts_swiglu_down|hc_read|qsa_attend) " $OUT/qwen.txt | head -5
late 250 && exit 0
t0=$(date +%s)
timeout 60 $B/bench_qwen_next_cuda synthetic-full 32 2048 --profile > $OUT/qwen_decode.txt 2>&1
echo "qwen decode exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *2048 \|' $OUT/qwen_decode.txt | head -1)" | tee -a $OUT/summary.txt
grep -E "^\| (gdn_recurrent|hc_read) " $OUT/qwen_decode.txt | head -2
late 330 && exit 0
t0=$(date +%s)
timeout 90 $B/bench_glm5_cuda synthetic-full:q2_k:160 0 2048 --prefill 2048,8192 --old 0 --prefill-rows 2048 > $OUT/glm.txt 2>&1
echo "glm prefill exit $? in $(( $(date +%s) - t0 )) s: $(grep -E '^\| *(2048|8192) \|' $OUT/glm.txt | tail -2 | cut -d'|' -f2,4 | tr '\n' ' ')" | tee -a $OUT/summary.txt
