#!/usr/bin/env bash
# Regenerates the committed tiny models and golden vectors byte-for-byte.
# Needs torch + transformers with the qwen4_exp / deepseek_v4 / glm5_next modeling code
# (PY defaults to /work/refvenv/bin/python; versions in tests/data/<family>/README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-/work/refvenv/bin/python}
export PYTHONHASHSEED=0 OMP_NUM_THREADS=1

# qwen_next (Qwen3.8 Flash Next, HF qwen4_exp)
"$PY" tools/reference/qwen_next/make_tiny.py tests/data/qwen_next/model
"$PY" tools/reference/qwen_next/make_golden.py tests/data/qwen_next/model tests/data/qwen_next/golden.safetensors
# deepseek_v4 (DeepSeek V4 Flash, HF deepseek_v4)
"$PY" tools/reference/deepseek_v4/make_tiny.py tests/data/deepseek_v4/model
"$PY" tools/reference/deepseek_v4/make_golden.py tests/data/deepseek_v4/model tests/data/deepseek_v4/golden.safetensors
"$PY" tools/reference/deepseek_v4/make_mtp.py tests/data/deepseek_v4/model tests/data/deepseek_v4/mtp

# glm5 (GLM 5.x Flash, HF glm5_next)
"$PY" tools/reference/glm5/make_tiny.py tests/data/glm5/model
"$PY" tools/reference/glm5/make_golden.py tests/data/glm5/model tests/data/glm5/golden.safetensors
"$PY" tools/reference/glm5/make_mtp.py tests/data/glm5/mtp

# sampler vectors (NumPy only)
"$PY" tools/reference/sampler/gen_sampler_vectors.py
# speculative acceptance vectors (MTPLX cycle; NumPy only)
"$PY" tools/reference/speculative/gen_accept_vectors.py 2>/dev/null
