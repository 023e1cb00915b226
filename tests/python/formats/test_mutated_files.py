"""Mutated model files are refused with the file and the tensor or key named (issue #25's probe):
a GGUF tensor whose declared type changes its byte size, data offsets that make two tensors
share bytes (GGUF and safetensors), and out-of-range or mistyped config values. Each case
is one small file written here and read by `ds4server inspect` (it opens the tensor source:
layout and config checks run there, before any model)."""
import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest
from gguf import GGUFWriter
from safetensors.numpy import save_file

BIN = pathlib.Path(os.environ.get("DS4_BIN", "build/debug/bin"))
NAMES = ["tensor_alpha", "tensor_beta", "tensor_gamma"]
GGML_F32, GGML_F16 = 0, 1


def inspect(path):
    exe = BIN / "ds4server"
    if not exe.exists():
        pytest.skip(f"{exe} not built")
    return subprocess.run([str(exe), "inspect", str(path)], capture_output=True, text=True, timeout=60)


def write_gguf(path, dtype=np.float16):
    w = GGUFWriter(str(path), "llama")  # default alignment 32; 64 f16 = 128 bytes each: no padding
    for i, n in enumerate(NAMES):
        w.add_tensor(n, np.full(64, i, dtype=dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tensor_info_pos(blob: bytes, name: str):
    """Byte positions of a tensor's type (u32) and offset (u64) fields in its tensor info."""
    key = struct.pack("<Q", len(name)) + name.encode()
    p = blob.index(key) + len(key)
    n_dims = struct.unpack_from("<I", blob, p)[0]
    type_pos = p + 4 + 8 * n_dims
    return type_pos, type_pos + 4


@pytest.fixture
def gguf_file(tmp_path):
    p = tmp_path / "ok.gguf"
    write_gguf(p)
    r = inspect(p)
    assert r.returncode == 0, r.stderr
    return p


def mutate(src, dst, edits):
    blob = bytearray(src.read_bytes())
    for pos, fmt, value in edits:
        struct.pack_into(fmt, blob, pos, value)
    dst.write_bytes(bytes(blob))
    return dst


def test_gguf_type_that_doubles_a_tensor_is_refused(gguf_file, tmp_path):
    type_pos, _ = tensor_info_pos(gguf_file.read_bytes(), "tensor_beta")
    r = inspect(mutate(gguf_file, tmp_path / "f32.gguf", [(type_pos, "<I", GGML_F32)]))
    assert r.returncode != 0
    assert "tensor 'tensor_gamma'" in r.stderr and "overlaps tensor 'tensor_beta'" in r.stderr, r.stderr
    assert "f32.gguf" in r.stderr


def test_gguf_type_that_halves_a_tensor_is_refused(tmp_path):
    # f32 tensors declared f16: each claims half of the bytes written for it.
    p = tmp_path / "f32src.gguf"
    write_gguf(p, np.float32)
    assert inspect(p).returncode == 0
    type_pos, _ = tensor_info_pos(p.read_bytes(), "tensor_alpha")
    r = inspect(mutate(p, tmp_path / "half.gguf", [(type_pos, "<I", GGML_F16)]))
    assert r.returncode != 0
    assert "tensor 'tensor_alpha'" in r.stderr and "unused bytes" in r.stderr, r.stderr


def test_gguf_offsets_that_overlap_are_refused(gguf_file, tmp_path):
    blob = gguf_file.read_bytes()
    _, beta_off = tensor_info_pos(blob, "tensor_beta")
    _, gamma_off = tensor_info_pos(blob, "tensor_gamma")
    beta = struct.unpack_from("<Q", blob, beta_off)[0]
    r = inspect(mutate(gguf_file, tmp_path / "overlap.gguf", [(gamma_off, "<Q", beta)]))
    assert r.returncode != 0
    assert "overlaps" in r.stderr and "tensor_beta" in r.stderr and "tensor_gamma" in r.stderr, r.stderr


def rewrite_safetensors_header(src, dst, change):
    blob = src.read_bytes()
    n = struct.unpack_from("<Q", blob, 0)[0]
    header = json.loads(blob[8:8 + n])
    change(header)
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= n
    dst.write_bytes(blob[:8] + text.ljust(n, b" ") + blob[8 + n:])  # trailing spaces are allowed
    return dst


def test_safetensors_offsets_that_overlap_are_refused(tmp_path):
    src = tmp_path / "ok.safetensors"
    save_file({n: np.full(64, i, dtype=np.float32) for i, n in enumerate(NAMES)}, str(src))
    assert inspect(src).returncode == 0

    def overlap(h):
        h["tensor_gamma"]["data_offsets"] = list(h["tensor_beta"]["data_offsets"])
    r = inspect(rewrite_safetensors_header(src, tmp_path / "overlap.safetensors", overlap))
    assert r.returncode != 0
    assert "overlaps" in r.stderr and "tensor_beta" in r.stderr and "tensor_gamma" in r.stderr, r.stderr

    def retype(h):  # same bytes, a type of another size: the size check names the tensor
        h["tensor_beta"]["dtype"] = "F16"
    r = inspect(rewrite_safetensors_header(src, tmp_path / "retype.safetensors", retype))
    assert r.returncode != 0 and "tensor 'tensor_beta'" in r.stderr, r.stderr


CONFIG = {"vocab_size": 1024, "hidden_size": 64, "rope_theta": 1e7, "eos_token_id": 1000, "tie_word_embeddings": False}


@pytest.mark.parametrize("key,value,needle", [
    ("rope_theta", -1, "config field 'rope_theta' = -1"),
    ("eos_token_id", 2 ** 63, "config field 'eos_token_id' = 9223372036854775808"),
    ("tie_word_embeddings", "yes", "config field 'tie_word_embeddings' = \"yes\" is not a boolean"),
    ("hidden_size", [64], "config field 'hidden_size' = [64] is not an integer"),
    ("rms_norm_eps", 0, "config field 'rms_norm_eps' = 0"),
])
def test_config_values_are_refused_naming_file_and_key(tmp_path, key, value, needle):
    save_file({"w": np.zeros(4, dtype=np.float32)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({**CONFIG, key: value}))
    r = inspect(tmp_path)
    assert r.returncode != 0
    assert needle in r.stderr and "config.json" in r.stderr, r.stderr
    assert "json.exception" not in r.stderr
