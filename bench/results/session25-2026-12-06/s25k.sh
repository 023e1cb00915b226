#!/usr/bin/env bash
# Session 25 call 11 (~4 min): every CUDA correctness test at the session's last code (8eb1aa5):
# tools/device/run_cuda_tests.sh over `PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build`'s
# binaries (test_admission_cuda needs the serve bundle's ICU: it ran in call 9). Carry .devwork/cudabins.tar.xz.
set -u
mkdir -p /tmp/cb && tar -C /tmp/cb -xJf .devwork/cudabins.tar.xz || exit 3
TEST_TIMEOUT_S=100 timeout 560 bash tools/device/run_cuda_tests.sh /tmp/cb/cudabins $OUT/tests
echo "suite exit $?"
cat $OUT/tests/summary.txt
