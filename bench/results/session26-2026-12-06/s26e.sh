#!/usr/bin/env bash
# Session 26 call 5 (~4 min): every CUDA correctness test at the session's code (35e1261:
# hc_fused's staged layout, Qwen's hc read): tools/device/run_cuda_tests.sh over
# `PRESET=cuda-pack tools/device/pack_cuda_bins.sh --build`'s binaries. Carry .devwork/cudabins.tar.xz.
set -u
mkdir -p /tmp/cb && tar -C /tmp/cb -xJf .devwork/cudabins.tar.xz || exit 3
TEST_TIMEOUT_S=90 timeout 420 bash tools/device/run_cuda_tests.sh /tmp/cb/cudabins $OUT/tests
echo "suite exit $?"
cat $OUT/tests/summary.txt
