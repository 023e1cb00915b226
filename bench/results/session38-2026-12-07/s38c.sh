#!/usr/bin/env bash
# Session 38 call C (any GPU, ~6 min): two latency fixes of the decode step, each with a switch to
# the form before (same call A/B):
#  - the fused mHC kernel as one thread block cluster per row (hc_fused.cu hc_cluster_kernel: the
#    last block's tail spread over the row's 16 blocks through distributed shared memory; the
#    collapse's norm sum in one order for every form); DS4_HC_CLUSTER=0 is the atomic-counter form;
#  - GLM's mla_output in 8 spans, one block of a cluster each (mla.cu); DS4_MLA_SEGMENTS=1 is the
#    one-block kernel of before.
# Tests: the hc and MLA kernel tests, then the DeepSeek and GLM model tests (decode == chunk rows,
# batches, verify, MTP). Benches: bench_cuda_hc_fused cluster off / on (a graph of 60 chained
# calls per form), GLM decode at 2K + 16 streams (old: cluster 0, 1 span; new: defaults), two
# rounds; DeepSeek (H200: 43 layers, else 30) decode at 1K, two rounds, and 16 streams once.
# Build: TARGETS="$(cat bench/results/session38-2026-12-07/s38c.targets)" BUNDLE=.devwork/s38c.tar.xz
# PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build; run(command="bash
# bench/results/session38-2026-12-07/s38c.sh", carry=[".devwork/s38c.tar.xz"]).
set -u
STEP_DIR=/tmp/steps  # (the device returns ~8 files: steps' outputs stay there, their lines in summary.txt)
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s38c.tar.xz}
export DS4_HC_CLUSTER=1 DS4_MLA_SEGMENTS=8  # the new forms, whatever the bundle's defaults (the old: set per step)
synthetic_start
one test_cuda_hc_fused
one test_glm5_mla_output_cuda
one test_glm5_mla_tc_cuda
for t in test_deepseek_v4_cuda test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda test_deepseek_v4_actq_cuda \
  test_deepseek_v4_mtp_cuda test_glm5_cuda test_glm5_batch_cuda test_glm5_verify_batch_cuda test_glm5_mtp_cuda; do
  one $t "$PWD"
done
one test_deepseek_v4_fused_quant_cuda
grep -E "FAIL|cluster form|vs a double sum" "$OUT/tests.txt" | cut -c1-220 | head -60 >> "$OUT/summary.txt"
xz -9 "$OUT/tests.txt"
for c in 0 1; do
  DS4_HC_CLUSTER=$c COLS=1-9 step hc_C$c 40 '^\| [a-z]' $B/bench_cuda_hc_fused 30 60 4096 4 f16 16
  DS4_HC_CLUSTER=$c COLS=1-9 step hc_glm_C$c 40 '^\| [a-z]' $B/bench_cuda_hc_fused 30 60 4096 4 f32 16
  cat /tmp/steps/hc_C$c.txt /tmp/steps/hc_glm_C$c.txt > "$OUT/hc_cluster$c.md"
done
for r in a b; do
  DS4_HC_CLUSTER=0 DS4_MLA_SEGMENTS=1 COLS=2-11 step glm_old$r 60 "^\| *2048 \||^\| (1|16) \| [0-9]" $B/bench_glm5_cuda $glm 16 2048 --batch 16 --batch-rows 16
  DS4_HC_CLUSTER=1 DS4_MLA_SEGMENTS=8 COLS=2-11 step glm_new$r 60 "^\| *2048 \||^\| (1|16) \| [0-9]" $B/bench_glm5_cuda $glm 16 2048 --batch 16 --batch-rows 16
done
wait
for r in a b; do
  DS4_HC_CLUSTER=0 step ds_old$r 80 "^decode|^roofline" $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --old-max 0
  step ds_new$r 80 "^decode|^roofline" $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --old-max 0
done
DS4_HC_CLUSTER=0 step ds_old_b16 90 '^\| (1|16) \| [0-9]' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --batch 16 --batch-rows 16 --old-max 0
step ds_new_b16 90 '^\| (1|16) \| [0-9]' $B/bench_deepseek_v4_cuda /dev/shm/f.gguf 1024 32 --batch 16 --batch-rows 16 --old-max 0
rm -f /dev/shm/f.gguf
