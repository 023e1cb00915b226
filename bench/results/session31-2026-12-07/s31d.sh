#!/usr/bin/env bash
# Session 31 on an H200: session 30's s30d.sh (the issues' figures of all three families at the
# defaults: DeepSeek 43 layers decode / 16 streams / prefill 2K-32K, GLM 288 experts and Qwen
# prefill 2K-32K and decode) with this session's bundle (.devwork/s31.tar.xz; the code of its
# commit, the Qwen hc prefetch of 3cb6b0d included, unrun before). Not an H200: s31.sh runs s31a.sh.
BUNDLE=.devwork/s31.tar.xz exec bash "$(dirname "$0")/../session30-2026-12-06/s30d.sh"
