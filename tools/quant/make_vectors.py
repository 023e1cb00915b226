#!/usr/bin/env python3
"""Test vectors for the quantized formats, from the PyPI gguf package's NumPy
(de)quantizers and the MLX affine formula. Writes raw little-endian files under
tests/data/quant/ (all small):
  <fmt>.blocks / <fmt>.f32        block bytes and their gguf dequantization (Q8_0 Q4_K Q2_K IQ2_XXS)
  q8_0.in.f32 / q8_0.blocks       gguf's Q8_0 quantizer on the input
  mlx_b{bits}_g{group}_{st}.*     MLX affine: .in.f32 input, .q packed u32, .scales/.biases, .f32 dequant
Usage: .venv/bin/python tools/quant/make_vectors.py"""
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

OUT = pathlib.Path(__file__).resolve().parents[2] / "tests/data/quant"
rng = np.random.default_rng(1234)


def save(name, arr):
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_bytes(np.ascontiguousarray(arr).tobytes())


def f16_bytes(vals):
    return np.asarray(vals, dtype=np.float16).view(np.uint8).reshape(-1, 2)


def random_blocks(qtype, n_blocks):
    """Random block bytes with sane f16 scales (random bytes there would be inf/NaN)."""
    size = {T.Q4_K: 144, T.Q2_K: 84, T.IQ2_XXS: 66}[qtype]
    b = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    d = f16_bytes(rng.uniform(0.001, 0.05, n_blocks))
    dmin = f16_bytes(rng.uniform(0.001, 0.05, n_blocks))
    if qtype == T.Q4_K:
        b[:, 0:2], b[:, 2:4] = d, dmin
    elif qtype == T.Q2_K:
        b[:, 80:82], b[:, 82:84] = d, dmin
    else:
        b[:, 0:2] = d
    return b


def ggml_vectors():
    x = rng.standard_normal((4, 256)).astype(np.float32)
    x[0, :32] = 0.0  # an all-zero block: d = 0 path
    x[1, 5] = 7.5    # an outlier
    q = quants.quantize(x, T.Q8_0)
    save("q8_0.in.f32", x)
    save("q8_0.blocks", q)
    save("q8_0.f32", quants.dequantize(q, T.Q8_0))
    for qtype, name in ((T.Q4_K, "q4_k"), (T.Q2_K, "q2_k"), (T.IQ2_XXS, "iq2_xxs")):
        blocks = random_blocks(qtype, 8)
        save(name + ".blocks", blocks)
        save(name + ".f32", quants.dequantize(blocks.reshape(-1), qtype).astype(np.float32))


def to_bf16_bits(a):
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def store(vals, st):
    """Round to the scale dtype; returns (bytes array, f32 values as stored)."""
    if st == "f16":
        h = np.asarray(vals, dtype=np.float32).astype(np.float16)
        return h, h.astype(np.float32)
    b = to_bf16_bits(vals)
    return b, from_bf16_bits(b)


def mlx_vectors(bits, group, st):
    rows, cols = 3, 128
    x = (rng.standard_normal((rows, cols)) * 0.1).astype(np.float32)
    levels = np.float32(2**bits - 1)
    g = x.reshape(rows, cols // group, group)
    lo, hi = g.min(axis=-1), g.max(axis=-1)
    s_raw, s = store((hi - lo) / levels, st)
    b_raw, b = store(lo, st)
    with np.errstate(divide="ignore", invalid="ignore"):
        qv = np.where(s[..., None] > 0, np.rint((g - b[..., None]) / s[..., None]), 0)
    qv = np.clip(qv, 0, levels).astype(np.uint32).reshape(rows, cols)
    per = 32 // bits
    words = np.zeros((rows, cols // per), dtype=np.uint32)
    for i in range(per):
        words |= qv[:, i::per] << np.uint32(bits * i)
    deq = (s[..., None] * qv.reshape(g.shape).astype(np.float32) + b[..., None]).astype(np.float32)
    name = f"mlx_b{bits}_g{group}_{st}"
    save(name + ".in.f32", x)
    save(name + ".q", words)
    save(name + ".scales", s_raw)
    save(name + ".biases", b_raw)
    save(name + ".f32", deq.reshape(rows, cols))


if __name__ == "__main__":
    ggml_vectors()
    for bits in (4, 8):
        for group in (32, 64):
            mlx_vectors(bits, group, "f16")
    mlx_vectors(4, 64, "bf16")
    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(list(OUT.iterdir()))} files, {total} bytes, to {OUT}")
