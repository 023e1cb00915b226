#!/bin/bash
# Lead's final call A: the merged tree's CUDA test suite (run_cuda_tests.sh of this tree) from the
# prebuilt binaries in .devwork/final-tests.tar.xz, plus the opt-in int8 wirings' model test.
N=final-tests
mkdir -p /tmp/$N "$OUT/$N"
xz -dc .devwork/$N.tar.xz | tar -C /tmp/$N -xf -
TEST_TIMEOUT_S=90 bash tools/device/run_cuda_tests.sh /tmp/$N/b "$OUT/$N/t"
for v in DS4_ACT_MMA DS4_INT8_EXPERTS; do
  s=$(date +%s); env $v=1 timeout 60 /tmp/$N/b/test_deepseek_v4_actq_cuda . > "$OUT/$N/t/actq_$v.txt" 2>&1
  echo "test_deepseek_v4_actq_cuda with $v=1 exit $? in $(( $(date +%s) - s )) s" | tee -a "$OUT/$N/t/summary.txt"
  grep -E "FAIL|FATAL" "$OUT/$N/t/actq_$v.txt" | head -5 | sed 's/^/    /' | tee -a "$OUT/$N/t/summary.txt"
done
