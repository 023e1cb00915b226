#!/bin/bash
# cuda-verify-batch request 1 (issue #24), branch cuda-verify-batch (b/VERSION): verify_batch of the
# CUDA DeepSeek V4 model (all speculating states' windows as one forward, row groups in the chunk
# code). New test test_deepseek_v4_verify_batch_cuda (bit-for-bit vs each state's verify_capture,
# MTP / DSpark / act_quant on+off), plus the regressions of what the change touched: the DeepSeek
# chunk / MTP / DSpark / batch / actq tests (GLM / Qwen batch tests not packed: 12.6 MB already, one
# DeepSeek test binary alone is 11.7 MB xz'd; the merged run's run_cuda_tests covers them).
# Expected time: ~40-60 s (tiny models only; no bench, no f.gguf needed).
set -o pipefail
N=cuda-verify-batch
mkdir -p /tmp/$N "$OUT/$N"
xz -dc .devwork/$N.tar.xz | tar -C /tmp/$N -xf -
B=/tmp/$N/b
cat $B/VERSION >> "$OUT/$N/summary.txt" 2>/dev/null
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for t in test_deepseek_v4_verify_batch_cuda test_deepseek_v4_batch_cuda test_deepseek_v4_cuda test_deepseek_v4_mtp_cuda \
         "test_deepseek_v4_dspark_cuda --quick" test_deepseek_v4_actq_cuda test_glm5_batch_cuda test_qwen_next_batch_cuda; do
  set -- $t
  [ -x $B/$1 ] || continue
  s=$(date +%s); timeout 60 $B/$1 . ${2:-} > "$OUT/$N/$1.txt" 2>&1; r=$?
  echo "$1 exit $r in $(( $(date +%s) - s )) s" | tee -a "$OUT/$N/summary.txt"
  grep -E "FAIL|FATAL|rror" "$OUT/$N/$1.txt" | grep -vE "^\s*ok\b" | head -8 | sed 's/^/    /' | tee -a "$OUT/$N/summary.txt"
done
grep -E "verify_batch" "$OUT/$N/test_deepseek_v4_verify_batch_cuda.txt" | head -20 | tee -a "$OUT/$N/summary.txt"
