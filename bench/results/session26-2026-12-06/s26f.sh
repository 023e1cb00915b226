#!/usr/bin/env bash
# Session 26 call 5 (~3 min; what s26e.sh would have run, cut to the session's last device budget):
# the CUDA tests the session's kernels reach that no earlier call ran at their final form: the
# DeepSeek and GLM batch / verify-batch / MTP tests (hc_fused's staged layout in the rows forms) and
# the Qwen model / batch / verify-batch tests (hc_up_combine's 256-thread teams). Carry
# .devwork/cudabins.tar.xz (pack_cuda_bins.sh at 0042580).
set -u
T0=$(date +%s)
mkdir -p /tmp/cb && tar -C /tmp/cb -xJf .devwork/cudabins.tar.xz || exit 3
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib:/tmp/cb/cudabins/lib:${LD_LIBRARY_PATH:-}
for t in test_qwen_hyper_fused_cuda test_qwen_next_cuda test_qwen_next_batch_cuda test_qwen_next_verify_batch_cuda \
         test_deepseek_v4_batch_cuda test_deepseek_v4_verify_batch_cuda test_glm5_batch_cuda test_glm5_verify_batch_cuda \
         test_deepseek_v4_mtp_cuda test_glm5_mtp_cuda test_cuda_hc_fused; do
  [ $(( $(date +%s) - T0 )) -gt 200 ] && { echo "$t not run (time)"; continue; }
  t1=$(date +%s)
  case $t in test_qwen_hyper_fused_cuda|test_cuda_hc_fused) arg= ;; *) arg=. ;; esac
  timeout 60 /tmp/cb/cudabins/$t $arg > $OUT/$t.txt 2>&1
  echo "$t exit $? in $(( $(date +%s) - t1 )) s"
  grep -E "FAIL|FATAL" $OUT/$t.txt | head -5
done
