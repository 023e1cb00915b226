#!/usr/bin/env bash
# Session 33 call 3 (any GPU, ~6 min): DS4_SMALL_PDL's new default (on, for grids of at most 2
# blocks an SM) through the whole CUDA suite (tools/device/run_cuda_tests.sh; test_admission_cuda
# is not bundled), then A/Bs of DS4_SMALL_PDL 0 / 1 on prefill and decode: Qwen (2K / 8K prefill in
# 1024-row chunks, decode at 2K), DeepSeek (H200: 43 layers, else 30; 2K / 8K prefill in 2048-row
# chunks, decode at 1K, 1 and 16 streams), GLM (decode at 2K, prefill 2K). Carry .devwork/s33b.tar.xz (TARGETS in
# s33b.targets): run(command="BUNDLE=.devwork/s33b.tar.xz LIMIT=<s> bash
# bench/results/session33-2026-12-07/s33b.sh", carry=[".devwork/s33b.tar.xz"]). (Ran as call 3 with
# the preamble synthetic_start now holds written out.)
set -u
STEP_DIR=/tmp/steps
. bench/device_call_lib.sh
call_start ${BUNDLE:-.devwork/s33b.tar.xz}
synthetic_start
TEST_TIMEOUT_S=120 timeout 300 bash tools/device/run_cuda_tests.sh $B /tmp/suite > /dev/null 2>&1
cp /tmp/suite/summary.txt "$OUT/suite_summary.txt"
tar -C /tmp -cJf "$OUT/suite_logs.tar.xz" suite
grep -E "exit [^0]|FAIL|missing|overall" /tmp/suite/summary.txt >> "$OUT/summary.txt"
for r in a b; do for s in 0 1; do
  DS4_SMALL_PDL=$s COLS=2-8 step qwen_s$s$r 60 '^\| *(2048|8192) \|' $B/bench_qwen_next_cuda synthetic-full 32 2048 \
    --prefill=2048,8192 --prefill-rows=1024 --old-max=0
done; done
wait
ds() {  # round: DeepSeek decode (1 and 16 streams) and prefill, DS4_SMALL_PDL 0 then 1
  for s in 0 1; do
    DS4_SMALL_PDL=$s COLS=2-5 step ds_s$s$1 100 '^decode:|^\| (1|16) \| [0-9]|^\| *(2048|8192) \|' $B/bench_deepseek_v4_cuda \
      /dev/shm/f.gguf 1024 32 --batch 1,16 --batch-rows 16 --prefill 2048,8192 --prefill-rows 2048 --old-max 0
  done
}
ds a
for s in 0 1; do
  DS4_SMALL_PDL=$s COLS=2-8 step glm_s$s 60 '^\| *2048 \|' $B/bench_glm5_cuda $glm 16 2048 --prefill 2048 --old 0 --prefill-rows 2048
done
ds b
rm -f /dev/shm/f.gguf
tar -C /tmp -cJf "$OUT/steps.tar.xz" steps
