#!/bin/bash
# Lead's request: branch qwen-verify-batch (CUDA Qwen verify_batch; DeepSeek capture-rows guard).
# Tiny models only; expected ~60 s.
set -o pipefail
N=qwen-verify-batch
mkdir -p /tmp/$N "$OUT/$N"
xz -dc .devwork/$N.tar.xz | tar -C /tmp/$N -xf -
B=/tmp/$N/b
cat $B/VERSION >> "$OUT/$N/summary.txt" 2>/dev/null
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for t in test_qwen_next_verify_batch_cuda test_deepseek_v4_verify_batch_cuda test_qwen_next_batch_cuda test_qwen_next_cuda test_qwen_next_mtp_cuda test_deepseek_v4_mtp_cuda; do
  s=$(date +%s); timeout 90 $B/$t . > "$OUT/$N/$t.txt" 2>&1; r=$?
  echo "$t exit $r in $(( $(date +%s) - s )) s" | tee -a "$OUT/$N/summary.txt"
  grep -E "FAIL|FATAL" "$OUT/$N/$t.txt" | head -8 | sed 's/^/    /' | tee -a "$OUT/$N/summary.txt"
done
