"""`ds4server run` with the tiny DeepSeek V4 model reproduces HF's greedy tokens."""
import os
import subprocess

import numpy as np
from safetensors.numpy import load_file

ROOT = os.environ.get("DS4_ROOT", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BIN = os.environ.get("DS4_BIN", os.path.join(ROOT, "build", "debug", "bin"))
DATA = os.path.join(ROOT, "tests", "data", "deepseek_v4")


def test_run_greedy_matches_golden():
    g = load_file(os.path.join(DATA, "golden.safetensors"))
    for n in (7, 64):
        tokens = ",".join(str(int(t)) for t in g[f"p{n}.tokens"])
        out = subprocess.run(
            [os.path.join(BIN, "ds4server"), "run", "--model", os.path.join(DATA, "model"), "--tokens", tokens,
             "--max-tokens", "16"],
            check=True, capture_output=True, text=True, timeout=300)
        got = [int(x) for x in out.stdout.split()]
        assert got == [int(x) for x in g[f"p{n}.greedy"][:16]], out.stderr
        assert "deepseek_v4" in out.stderr


def test_run_rejects_out_of_vocab_token():
    out = subprocess.run(
        [os.path.join(BIN, "ds4server"), "run", "--model", os.path.join(DATA, "model"), "--tokens", "5,4096"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert "4096" in out.stderr
