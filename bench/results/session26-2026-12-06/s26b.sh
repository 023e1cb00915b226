#!/usr/bin/env bash
# Session 26 call 2 (~3 min): Qwen's hyper-connection read (hyper_fused.cu) with every unit of a
# row's gemv slots computed at once (hc_down: thread per unit and phase, dots added in the gemv's
# order; hc_up_combine: 16 one-warp teams of 2 rows). Same-run A/B of full-size Qwen decode at 2K
# (old = 14b237b's bench_qwen_next_cuda), DS4_HC_DOWN_ROWS 1 / 2 / 4, and the Qwen CUDA tests
# (bit-identity of the fused read, chunk rows == decode steps, batch, verify batch, MTP).
# Carry .devwork/s26b.tar.xz.
set -u
. bench/device_call_lib.sh
call_start .devwork/s26b.tar.xz
for r in 4 2 1; do DS4_HC_DOWN_ROWS=$r one test_qwen_hyper_fused_cuda; done
for rep in 1 2; do
  for v in old 4 2 1; do
    b=$B/new/bench_qwen_next_cuda; [ $v = old ] && b=$B/old/bench_qwen_next_cuda
    echo "=== $v rep $rep" >> $OUT/decode.txt
    DS4_HC_DOWN_ROWS=$([ $v = old ] && echo 4 || echo $v) timeout 60 $b synthetic-full 32 2048 --profile >> $OUT/decode.txt 2>&1
    echo "$v rep $rep exit $?: $(grep -E '^\| *2048 \|' $OUT/decode.txt | tail -1 | cut -d'|' -f7,8) hc_read $(grep -E '^\| hc_read ' $OUT/decode.txt | tail -1)" | tee -a $OUT/summary.txt
  done
done
one test_qwen_next_cuda .
one test_qwen_next_batch_cuda .
one test_qwen_next_verify_batch_cuda .
late 400 || one test_qwen_next_mtp_cuda .
grep -E "FAIL|FATAL" $OUT/tests.txt | head
