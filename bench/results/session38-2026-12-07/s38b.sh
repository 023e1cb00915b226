#!/usr/bin/env bash
# Session 38 call B (any GPU, ~4 min): GLM's mla_output in spans (mla.cu: each token's selection in
# 8 fixed spans, one block of a thread block cluster each, the spans' sums added in order through
# distributed shared memory; DS4_MLA_SEGMENTS=1 is the one-block kernel of before, bit for bit).
# Its test and the GLM CUDA model tests (decode == chunk rows, batches, verify, MTP) at the new
# default, then GLM decode at 2K with 1 / 8 spans, two rounds, and a 16-stream batch each.
# Build: TARGETS="$(cat bench/results/session38-2026-12-07/s38b.targets)" BUNDLE=.devwork/s38b.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session38-2026-12-07/s38b.sh", carry=[".devwork/s38b.tar.xz"]).
set -u
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s38b.tar.xz}
use_bins
synthetic_sizes
one test_glm5_mla_output_cuda
one test_glm5_mla_tc_cuda
for t in test_glm5_cuda test_glm5_batch_cuda test_glm5_verify_batch_cuda test_glm5_mtp_cuda; do one $t "$PWD"; done
grep -E "FAIL|vs a double sum" "$OUT/tests.txt" | head -40 >> "$OUT/summary.txt"
xz -9 "$OUT/tests.txt"
for r in a b; do
  for g in 1 8; do
    DS4_MLA_SEGMENTS=$g COLS=2-11 step glm_S$g$r 75 "^\| *2048 \||^\| (1|16) \| [0-9]" $B/bench_glm5_cuda $glm 16 2048 --batch 16 --batch-rows 16
  done
done
