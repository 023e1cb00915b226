"""Shared machinery of the reference fuzzer: one case = one random valid configuration of a
family, a tiny random model written the way our loader reads it, and several prompt lengths.

For each (config, length):
  * the HF reference generates GEN greedy tokens with its cache, then one no-cache pass over
    prompt + those tokens gives the reference rows (row i = logits after P + i tokens);
  * `ds4server logits` computes the same rows with the prompt fed in one pass, token by token,
    in chunks of 7 (and, where asked, as a verify pass);
  * a row matches when max |ours - ref| <= the family's tolerance, and our argmax equals the
    reference token wherever the reference's top-2 margin exceeds twice that tolerance (a
    closer margin is a tie float noise may flip; it is counted, not failed).

A family module (families/<name>.py) provides:
  FAMILY                        our family name ("qwen_next", "glm5", "deepseek_v4")
  random_config(rng) -> dict    a random *valid* config (kwargs of the HF config class)
  build(cfg: dict, seed) -> M   the HF model in float32 eval mode, randomized
  save(model, cfg, out_dir)     config.json + model.safetensors our loader reads
  boundaries(cfg) -> [int]      prompt lengths at this config's window/block/pool edges
  corpus_config(cfg) -> dict    optional: a smaller config for the committed corpus (corpus.py)
  prompt(cfg, rng, n) -> ids    optional: random prompt ids (default: uniform over vocab)
  TOLERANCE                     optional: absolute logit tolerance (default 1e-3)
  reference(model, ids, gen)    optional: (greedy tokens, no-cache rows) if the default HF
                                calls do not fit the family, or (greedy, rows, unstable_from):
                                rows >= unstable_from (>= 0) follow a discrete choice the
                                reference made on a float near-tie (a top-k edge within
                                rounding), which float noise may flip: counted as ties there
"""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
GEN = 12
STANDARD_LENGTHS = (1, 2, 17, 150, 600, 2000)
DEFAULT_MODES = ("onepass", "steps", "chunk7")


def family_module(name: str):
    return importlib.import_module(f"families.{name}")


def default_bin() -> Path:
    env = os.environ.get("DS4_BIN")
    return Path(env) / "ds4server" if env else ROOT / "build/release/bin/ds4server"


def candidate_lengths(fam, cfg: dict, max_len: int) -> list[int]:
    """The standard lengths plus every boundary of this config and its neighbours, <= max_len."""
    out = set(STANDARD_LENGTHS)
    for b in fam.boundaries(cfg):
        for d in (-2, -1, 0, 1, 2):
            out.add(b + d)
    return sorted(n for n in out if 1 <= n <= max_len)


def hf_reference(model, ids: np.ndarray, gen: int):
    """Greedy tokens with the HF cache path, then the no-cache rows over prompt + tokens."""
    import torch
    with torch.no_grad():
        x = torch.tensor(ids, dtype=torch.long)[None]
        # An explicit all-ones mask: without it generate() infers one from pad_token_id, and a
        # prompt token equal to it (id 0 here, common in 150+ token random prompts) becomes
        # padding: masked out and position ids shifted (5.24+), unlike the no-cache rows.
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=gen, do_sample=False,
                             min_new_tokens=gen, eos_token_id=None, pad_token_id=0)
        seq = out[0].numpy().astype(np.int64)
        full = model(torch.tensor(seq, dtype=torch.long)[None], use_cache=False).logits[0].float().numpy()
    p = len(ids)
    return seq[p:], full[p - 1:]


@dataclass
class RowReport:
    max_err: float = 0.0
    argmax_mismatch: int = 0   # rows where argmax differs and the margin is clear
    ties: int = 0              # rows where the margin is within noise (not failed)
    first_bad_row: int = -1


@dataclass
class CaseResult:
    length: int
    ok: bool
    modes: dict = field(default_factory=dict)
    error: str = ""
    unstable_from: int = -1  # rows from here on not compared (reference near-tie)

    def summary(self) -> str:
        if self.error:
            return f"len {self.length}: ERROR {self.error.strip().splitlines()[-1] if self.error.strip() else ''}"
        parts = [f"{m} err {r.max_err:.2e} bad {r.argmax_mismatch}" + (f" ties {r.ties}" if r.ties else "")
                 + (f" first_bad_row {r.first_bad_row}" if r.first_bad_row >= 0 else "")
                 for m, r in self.modes.items()]
        tie = f" (near-tie: rows >= {self.unstable_from} not compared)" if self.unstable_from >= 0 else ""
        return f"len {self.length}: {'ok' if self.ok else 'MISMATCH'}{tie} | " + "; ".join(parts)


def compare_rows(ours: np.ndarray, ref: np.ndarray, tokens: np.ndarray, tol: float,
                 unstable_from: int = -1) -> RowReport:
    rep = RowReport()
    err = np.abs(ours - ref).max(axis=1)
    compared = err[:unstable_from] if unstable_from >= 0 else err  # rows past a near-tie: ties
    rep.max_err = float(compared.max()) if len(compared) else 0.0
    srt = np.sort(ref, axis=1)
    margin = srt[:, -1] - srt[:, -2]
    for i in range(len(ref)):
        want = int(np.argmax(ref[i])) if i >= len(tokens) else int(tokens[i])
        got = int(np.argmax(ours[i]))
        bad_err = err[i] > tol
        if 0 <= unstable_from <= i and (bad_err or got != want):
            rep.ties += 1  # after a reference near-tie: not comparable
            continue
        if got != want:
            if margin[i] > 2 * tol:
                rep.argmax_mismatch += 1
                bad_err = True
            else:
                rep.ties += 1
        if bad_err and rep.first_bad_row < 0:
            rep.first_bad_row = i
    return rep


def run_ours(bin_path: Path, model_dir: Path, seq: np.ndarray, p: int, modes, backend: str, vocab: int,
             threads: int = 1) -> dict:
    with tempfile.TemporaryDirectory() as td:
        tf = Path(td) / "tokens.txt"
        tf.write_text(" ".join(map(str, seq.tolist())))
        cmd = [str(bin_path), "logits", "--model", str(model_dir), "--tokens-file", str(tf), "--prompt-len", str(p),
               "--out", str(Path(td) / "o"), "--modes", ",".join(modes), "--backend", backend,
               "--threads", str(threads)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            raise RuntimeError(f"ds4server logits failed ({r.returncode}): {r.stderr[-2000:]}")
        rows = len(seq) - p + 1
        out = {}
        for m in modes:
            a = np.fromfile(Path(td) / f"o.{m}.f32", dtype=np.float32)
            if a.size != rows * vocab:
                raise RuntimeError(f"mode {m}: {a.size} floats, want {rows} x {vocab}")
            out[m] = a.reshape(rows, vocab)
        return out


def check_length(bin_path, model_dir, ids, greedy, ref_rows, modes, backend, tol, unstable_from=-1) -> CaseResult:
    p = len(ids)
    seq = np.concatenate([ids, greedy]).astype(np.int64)
    res = CaseResult(length=p, ok=True, unstable_from=unstable_from)
    try:
        ours = run_ours(bin_path, model_dir, seq, p, modes, backend, ref_rows.shape[1])
    except Exception as e:  # noqa: BLE001 - reported per case
        res.ok, res.error = False, str(e)
        return res
    for m in modes:
        rep = compare_rows(ours[m], ref_rows, greedy, tol, unstable_from)
        res.modes[m] = rep
        if rep.max_err > tol or rep.argmax_mismatch:
            res.ok = False
    return res


def tolerance(fam) -> float:
    return float(getattr(fam, "TOLERANCE", 1e-3))


def make_prompt(fam, cfg: dict, rng: np.random.Generator, n: int) -> np.ndarray:
    if hasattr(fam, "prompt"):
        return np.asarray(fam.prompt(cfg, rng, n), dtype=np.int64)
    return rng.integers(0, cfg["vocab_size"], size=n).astype(np.int64)


def reference(fam, model, ids, gen=GEN):
    """(greedy, rows, unstable_from); unstable_from -1 when the family does not say."""
    out = fam.reference(model, ids, gen) if hasattr(fam, "reference") else hf_reference(model, ids, gen)
    return tuple(out) if len(out) == 3 else (*out, -1)


def write_config_json(cfg_obj, out_dir: Path, extra: dict | None = None) -> None:
    """An HF config object's dict as config.json, without the fields that change per run."""
    d = cfg_obj.to_dict()
    for k in ("transformers_version", "_attn_implementation_autoset", "dtype", "torch_dtype"):
        d.pop(k, None)
    d["torch_dtype"] = "float32"
    d.update(extra or {})
    (out_dir / "config.json").write_text(json.dumps(d, indent=2, sort_keys=True) + "\n")
