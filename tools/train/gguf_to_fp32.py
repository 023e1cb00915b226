#!/usr/bin/env python3
"""Dequantize a default-model GGUF into float32 safetensors with the same tensor names.

The MTP head is distilled against the trunk users run: the shipped GGUF's quantized values
(Q8_0 blocks), not the bf16 master they came from. qwen_tiny.load_dir prefers
model-fp32-*.safetensors in a folder, so writing this file next to config.json makes torch
compute exactly the shipped trunk's weights (in float32 math).

Usage: python tools/train/gguf_to_fp32.py models/default/model.gguf OUT/model-fp32-gguf.safetensors
"""
from __future__ import annotations

import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
from safetensors.numpy import save_file


def main():
    src, dst = sys.argv[1], sys.argv[2]
    out = {}
    for t in GGUFReader(src).tensors:
        shape = tuple(int(d) for d in reversed(t.shape))  # GGUF lists the fastest dim first
        out[t.name] = np.ascontiguousarray(dequantize(t.data, t.tensor_type).astype(np.float32).reshape(shape))
    save_file(out, dst)
    print(f"{len(out)} tensors -> {dst}")


if __name__ == "__main__":
    main()
