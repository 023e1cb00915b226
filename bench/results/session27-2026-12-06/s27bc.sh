#!/usr/bin/env bash
# Session 27 call 2: s27b.sh (the two-blocks-per-SM expert kernel, ~3.5 min) then s27c.sh (the ncu
# survey of the three families' prefill chunks, ~5 min) in one machine start; every output but the
# summary packed into all.tar.xz (the device tool returns few files). Carry .devwork/cudabins.tar.xz.
set -u
export CALL_T0=$(date +%s)
bash bench/results/session27-2026-12-06/s27b.sh
bash bench/results/session27-2026-12-06/s27c.sh
cd $OUT && tar --exclude=summary.txt --exclude=all.tar.xz -cJf all.tar.xz . && find . -type f ! -name summary.txt ! -name all.tar.xz -delete
