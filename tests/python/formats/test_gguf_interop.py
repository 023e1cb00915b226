"""GGUF interop with the PyPI gguf package, both ways:
gguf-py writes -> `ds4server inspect --json --checksums` reads; `ds4-convert` writes ->
gguf-py's GGUFReader reads, and the quantized bytes equal gguf's own Q8_0 quantizer."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, GGUFValueType, GGUFWriter, quants
from safetensors.numpy import save_file

BIN = pathlib.Path(os.environ.get("DS4_BIN", "build/debug/bin"))


def fnv1a(b: bytes) -> int:
    h = 0xCBF29CE484222325
    for x in b:
        h = ((h ^ x) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def inspect(path):
    r = subprocess.run([str(BIN / "ds4server"), "inspect", str(path), "--json", "--checksums"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_gguf_py_file_reads_back(tmp_path):
    rng = np.random.default_rng(0)
    p = tmp_path / "py.gguf"
    w = GGUFWriter(str(p), "llama")
    w.add_uint8("t.u8", 250)
    w.add_int16("t.i16", -1234)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int64("t.i64", -(1 << 40))
    w.add_float32("t.f32", 0.25)
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo")
    w.add_array("t.ints", [1, 2, 3])
    w.add_array("t.strs", ["a", "bc"])
    w.add_array("t.nested", [[1, 2], [3]])
    a = rng.standard_normal((3, 64)).astype(np.float32)
    h = rng.standard_normal((5,)).astype(np.float16)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    q = quants.quantize(x, T.Q8_0)
    w.add_tensor("a", a)
    w.add_tensor("h", h)
    w.add_tensor("q", q, raw_dtype=T.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    info = inspect(p)
    md = info["metadata"]
    assert info["format"] == "gguf"
    assert md["general.architecture"] == "llama"
    assert md["t.u8"] == 250 and md["t.i16"] == -1234 and md["t.u32"] == 4_000_000_000
    assert md["t.i64"] == -(1 << 40) and md["t.f32"] == 0.25 and md["t.f64"] == 1e-300
    assert md["t.bool"] is True and md["t.str"] == "héllo"
    assert md["t.ints"] == [1, 2, 3] and md["t.strs"] == ["a", "bc"] and md["t.nested"] == [[1, 2], [3]]
    t = {x["name"]: x for x in info["tensors"]}
    assert t["a"]["type"] == "F32" and t["a"]["shape"] == [3, 64]
    assert t["h"]["type"] == "F16" and t["h"]["shape"] == [5]
    assert t["q"]["type"] == "Q8_0" and t["q"]["shape"] == [2, 64] and t["q"]["bytes"] == 2 * 68
    assert t["a"]["fnv1a64"] == fnv1a(a.tobytes())
    assert t["h"]["fnv1a64"] == fnv1a(h.tobytes())
    assert t["q"]["fnv1a64"] == fnv1a(q.tobytes())


def make_hf_dir(d, rng):
    d.mkdir()
    tensors = {
        "model.embed_tokens.weight": rng.standard_normal((16, 64)).astype(np.float32),
        "model.layers.0.input_layernorm.weight": rng.standard_normal((64,)).astype(np.float32),
        "model.layers.0.mlp.experts.down_proj.weight": rng.standard_normal((2, 32, 256)).astype(np.float32),
        "model.layers.0.self_attn.q_proj.bias": rng.standard_normal((32,)).astype(np.float32),
        "model.layers.0.self_attn.o_proj.weight": rng.standard_normal((64, 48)).astype(np.float16),
        "model.layers.0.mlp.gate.tid2eid": rng.integers(0, 9, (16, 2)).astype(np.int32),
    }
    save_file(tensors, str(d / "model.safetensors"))
    cfg = '{"model_type": "tiny", "hidden_size": 64,\n "text_config": {"vocab_size": 16}}\n'
    (d / "config.json").write_text(cfg)
    return tensors, cfg


def test_ds4_convert_reads_in_gguf_py(tmp_path):
    rng = np.random.default_rng(1)
    src, cfg = make_hf_dir(tmp_path / "hf", rng)
    out = tmp_path / "out.gguf"
    r = subprocess.run([str(BIN / "ds4-convert"), str(tmp_path / "hf"), str(out), "--quant", "Q8_0",
                        "--quant-experts", "Q4_K"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr  # no progress bar when not on a terminal
    rd = GGUFReader(str(out))
    f = rd.fields["ds4.config_json"]
    assert bytes(f.parts[f.data[0]]).decode() == cfg
    got = {t.name: t for t in rd.tensors}
    emb = got["model.embed_tokens.weight"]
    assert emb.tensor_type == T.Q8_0 and list(emb.shape) == [64, 16]
    # Our Q8_0 quantizer is bit-exact with gguf's.
    assert np.array_equal(np.asarray(emb.data).reshape(-1), quants.quantize(src["model.embed_tokens.weight"], T.Q8_0).reshape(-1))
    norm = got["model.layers.0.input_layernorm.weight"]
    assert norm.tensor_type == T.F32 and np.array_equal(np.asarray(norm.data), src["model.layers.0.input_layernorm.weight"])
    assert got["model.layers.0.self_attn.q_proj.bias"].tensor_type == T.F32
    # 48 columns do not split into Q8_0 blocks of 32: kept F16, counted in the report.
    o = got["model.layers.0.self_attn.o_proj.weight"]
    assert o.tensor_type == T.F16 and "F16 fallback for row length: 1" in r.stdout
    assert np.array_equal(np.asarray(o.data).reshape(64, 48), src["model.layers.0.self_attn.o_proj.weight"])
    ex = got["model.layers.0.mlp.experts.down_proj.weight"]
    assert ex.tensor_type == T.Q4_K and list(ex.shape) == [256, 32, 2]
    deq = quants.dequantize(np.asarray(ex.data), T.Q4_K).reshape(2, 32, 256)
    ref = src["model.layers.0.mlp.experts.down_proj.weight"]
    rel = np.sqrt(((deq - ref) ** 2).sum() / (ref ** 2).sum())
    assert 0.01 < rel < 0.12, rel
    tid = got["model.layers.0.mlp.gate.tid2eid"]
    assert tid.tensor_type == T.I32 and np.array_equal(np.asarray(tid.data).reshape(16, 2), src["model.layers.0.mlp.gate.tid2eid"])


def test_inspect_rejects_bad_file(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 8)
    r = subprocess.run([str(BIN / "ds4server"), "inspect", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert str(bad) in r.stderr and "header" in r.stderr
