"""The shipped default model (models/default, issue #13): files, shapes, tokenizer, and that the
C++ engine reproduces the torch reference's greedy tokens on it.

Golden tokens (tests/data/default_model/greedy.json) come from tools/train/make_default_golden.py
(HF transformers qwen4_exp, float32 on CPU, the bf16 weights upcast).
"""
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest
from tokenizers import Tokenizer

ROOT = Path(os.environ.get("DS4_ROOT", Path(__file__).resolve().parents[3]))
MODEL = ROOT / "models/default"
GOLDEN = ROOT / "tests/data/default_model/greedy.json"
CONTROL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
           "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>",
           "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>",
           "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
           "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
           "<think>", "</think>"]


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


@pytest.fixture(scope="module")
def cfg():
    return json.loads((MODEL / "config.json").read_text())["text_config"]


@pytest.fixture(scope="module")
def tok():
    return Tokenizer.from_file(str(MODEL / "tokenizer.json"))


def test_size_budget():
    # Issue #13: the shipped (quantized) default under 40 MB; the bf16 master rides along.
    total = sum(p.stat().st_size for p in MODEL.iterdir() if p.is_file())
    assert total <= 20 * 2**20, total
    assert (MODEL / "model.gguf").stat().st_size < 8 * 2**20


def test_tensors_match_config(cfg):
    h = {k: v for k, v in header(MODEL / "model.safetensors").items() if k != "__metadata__"}
    assert {v["dtype"] for v in h.values()} == {"BF16"}
    v, d, e = cfg["vocab_size"], cfg["hidden_size"], cfg["num_experts"]
    assert h["model.language_model.embed_tokens.weight"]["shape"] == [v, d]
    assert h["lm_head.weight"]["shape"] == [v, d]
    assert h["mtp.fc_hidden.weight"]["shape"] == [d, d]
    assert h["mtp.pre_fc_norm_hidden.weight"]["shape"] == [cfg["hc_count"] * d]
    for i in range(cfg["num_hidden_layers"]):
        gu = h[f"model.language_model.layers.{i}.mlp.experts.gate_up_proj"]["shape"]
        assert gu == [e, 2 * cfg["moe_intermediate_size"], d]
        kind = "linear_attn" if cfg["layer_types"][i] == "linear_attention" else "self_attn"
        assert any(k.startswith(f"model.language_model.layers.{i}.{kind}.") for k in h)
    ple = [k for k in h if ".ple." in k]
    assert ple and all(k.startswith("model.language_model.layers.1.ple.") for k in ple)
    params = 0
    for t in h.values():
        n = 1
        for s in t["shape"]:
            n *= s
        params += n
    assert params == 5_875_320


def test_tokenizer_control_tokens(cfg, tok):
    assert tok.get_vocab_size() == cfg["vocab_size"] == 8192
    ids = [tok.token_to_id(t) for t in CONTROL]
    assert ids == list(range(8192 - len(CONTROL), 8192))
    # <|endoftext|> first: HF and the engine take the first id as the PLE segment marker.
    assert cfg["eos_token_id"] == [tok.token_to_id("<|endoftext|>"), tok.token_to_id("<|im_end|>")]
    assert cfg["eos_token_id"] == [8166, 8168]
    tc = json.loads((MODEL / "tokenizer_config.json").read_text())
    special = {v["content"]: v["special"] for v in tc["added_tokens_decoder"].values()}
    assert special["<|im_end|>"] and not special["<think>"]
    assert tc["eos_token"] == "<|im_end|>"


def test_chat_roundtrip(tok):
    text = ("<|im_start|>user\nWrite a Python function that adds two numbers.<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\ndef add(a, b):\n    return a + b"
            "<|im_end|>\n")
    enc = tok.encode(text, add_special_tokens=False)
    assert tok.decode(enc.ids, skip_special_tokens=False) == text
    assert enc.ids[0] == 8167 and enc.ids.count(8168) == 2
    assert tok.decode(tok.encode("naïve café 東京 🙂").ids) == "naïve café 東京 🙂"


def test_engine_reproduces_reference_greedy():
    golden = json.loads(GOLDEN.read_text())
    binary = Path(os.environ.get("DS4_BIN", ROOT / "build/debug/bin")) / "ds4server"
    assert binary.exists(), f"{binary} not built"
    for case in golden["cases"]:
        n = len(case["greedy"])
        proc = subprocess.run([str(binary), "run", "--model", str(MODEL), "--tokens",
                               ",".join(map(str, case["prompt"])), "--max-tokens", str(n)],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        got = [int(t) for t in proc.stdout.replace(",", " ").split()]
        assert got[:n] == case["greedy"], (case["name"], got, case["greedy"])


def test_shipped_gguf_is_the_converted_master(tmp_path):
    """models/default/model.gguf is byte-for-byte ds4-convert's Q8_0 of the bf16 master."""
    bindir = Path(os.environ.get("DS4_BIN", ROOT / "build/debug/bin"))
    gguf = tmp_path / "model.gguf"
    conv = subprocess.run([str(bindir / "ds4-convert"), str(MODEL), str(gguf), "--quant", "Q8_0"],
                          capture_output=True, text=True, timeout=600)
    assert conv.returncode == 0, conv.stderr
    assert gguf.read_bytes() == (MODEL / "model.gguf").read_bytes()


def test_run_stops_at_im_end():
    """A plain `run` (no chat template) ends the answer at <|im_end|>: chat_hello's golden answer
    is 9 tokens followed by <|im_end|>, so a 50-token budget stops at 9 with finish eos."""
    bindir = Path(os.environ.get("DS4_BIN", ROOT / "build/debug/bin"))
    case = next(c for c in json.loads(GOLDEN.read_text())["cases"] if c["name"] == "chat_hello")
    proc = subprocess.run([str(bindir / "ds4server"), "run", "--model", str(MODEL / "model.gguf"),
                           "--tokens", ",".join(map(str, case["prompt"])), "--max-tokens", "50"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert [int(t) for t in proc.stdout.split()] == case["greedy"]
    assert "generated 9 (eos)" in proc.stderr


def test_q8_gguf_reproduces_reference_greedy():
    """The shipped Q8_0 GGUF (6.6 MiB) keeps every golden greedy token of the bf16 reference."""
    bindir = Path(os.environ.get("DS4_BIN", ROOT / "build/debug/bin"))
    gguf = MODEL / "model.gguf"
    for case in json.loads(GOLDEN.read_text())["cases"]:
        n = len(case["greedy"])
        proc = subprocess.run([str(bindir / "ds4server"), "run", "--model", str(gguf), "--tokens",
                               ",".join(map(str, case["prompt"])), "--max-tokens", str(n)],
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        assert [int(t) for t in proc.stdout.split()][:n] == case["greedy"], case["name"]
