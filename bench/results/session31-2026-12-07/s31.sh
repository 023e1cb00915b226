#!/usr/bin/env bash
# Session 31's calls, whichever GPU comes (carry .devwork/s31.tar.xz, TARGETS = s31a.sh's and
# s31d.sh's binaries): an H200 runs s31d.sh (the issues' figures of the three families), any
# other GPU s31a.sh (gemv_mlx4_tc, Qwen's warps top-k, the hc prefetch; ncu table).
d=$(dirname "$0")
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash $d/s31d.sh; else bash $d/s31a.sh; fi
