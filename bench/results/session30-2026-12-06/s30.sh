#!/usr/bin/env bash
# Session 30's first call, whichever GPU comes: an H200 runs s30a.sh (the issues' DeepSeek 43-layer
# figures, the suite), an H100 s30c.sh (the suite, the A/Bs of session 29's unrun forms, the GLM /
# Qwen decode ncu tables). Carry .devwork/s30a.tar.xz.
d=$(dirname "$0")
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then bash $d/s30a.sh; else bash $d/s30c.sh; fi
