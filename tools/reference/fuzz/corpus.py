#!/usr/bin/env python3
"""The committed fuzz corpus: tests/data/fuzz/<family>/<case>/ holds config.json,
model.safetensors (what our loader reads) and ref.safetensors (the HF reference rows).

  corpus.py make  --family F --seed S --count N [--max-len L] [--lengths-per-case K] [--name-prefix c]
                  (needs torch + transformers; case k of seed S is fuzz.py's case k of seed S)
  corpus.py add   --family F --seed S --case K [--max-len L]   (one fuzz case, e.g. a regression)
  corpus.py check [--family F] [--backend cpu|cuda] [--modes ...] [--bin PATH]
                  (numpy only: what CI and the H200 run)

ref.safetensors: for each prompt length n, `n<n>.ids` I64 {n}, `n<n>.greedy` I64 {GEN},
`n<n>.rows` F32 {GEN+1, vocab}; optional `n<n>.unstable_from` I64 {1} (common.reference);
`meta.tolerance` F32 {1}; `meta.lengths` I64.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

CORPUS = common.ROOT / "tests/data/fuzz"


def write_case(family: str, seed: int, k: int, max_len: int, per_case: int, out: Path) -> None:
    import torch
    from safetensors.numpy import save_file
    torch.set_num_threads(1)
    fam = common.family_module(family)
    rng = np.random.default_rng([seed, k])
    cfg = fam.random_config(rng)
    if hasattr(fam, "corpus_config"):  # optional: the family's smaller version for committed cases
        cfg = fam.corpus_config(cfg)
    model = fam.build(cfg, int(rng.integers(1 << 31)))
    lengths = common.candidate_lengths(fam, cfg, max_len)
    if per_case and len(lengths) > per_case:
        # always the longest: it crosses every boundary of the config below max_len
        lengths = sorted(rng.choice(lengths[:-1], size=per_case - 1, replace=False).tolist() + lengths[-1:])
    out.mkdir(parents=True, exist_ok=True)
    fam.save(model, cfg, out)
    ref = {"meta.tolerance": np.array([common.tolerance(fam)], np.float32),
           "meta.lengths": np.array(lengths, np.int64)}
    for n in lengths:
        ids = common.make_prompt(fam, cfg, rng, n)
        greedy, rows, unstable = common.reference(fam, model, ids)
        ref[f"n{n}.ids"] = ids.astype(np.int64)
        ref[f"n{n}.greedy"] = np.asarray(greedy, np.int64)
        ref[f"n{n}.rows"] = np.ascontiguousarray(rows, dtype=np.float32)
        if unstable >= 0:
            ref[f"n{n}.unstable_from"] = np.array([unstable], np.int64)
    save_file(ref, str(out / "ref.safetensors"))
    (out / "fuzz_case.json").write_text(json.dumps({"family": family, "seed": seed, "case": k,
                                                    "max_len": max_len, "config": cfg}, indent=1, default=str) + "\n")
    print(f"wrote {out}: lengths {lengths}", flush=True)


def check_case(case_dir: Path, backend: str, modes, bin_path: Path) -> list[common.CaseResult]:
    from safetensors.numpy import load_file
    ref = load_file(str(case_dir / "ref.safetensors"))
    tol = float(ref["meta.tolerance"][0])
    out = []
    for n in ref["meta.lengths"].tolist():
        unstable = int(ref[f"n{n}.unstable_from"][0]) if f"n{n}.unstable_from" in ref else -1
        r = common.check_length(bin_path, case_dir, ref[f"n{n}.ids"], ref[f"n{n}.greedy"], ref[f"n{n}.rows"],
                                modes, backend, tol, unstable)
        out.append(r)
    return out


def case_dirs(family: str | None) -> list[Path]:
    fams = [family] if family else sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
    return [d for f in fams for d in sorted((CORPUS / f).iterdir()) if (d / "ref.safetensors").exists()]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["make", "add", "check"])
    ap.add_argument("--family")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--case", type=int, default=0)
    ap.add_argument("--max-len", type=int, default=600)
    ap.add_argument("--lengths-per-case", type=int, default=4)
    ap.add_argument("--name-prefix", default="c")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--modes", default=",".join(common.DEFAULT_MODES))
    ap.add_argument("--bin", default=str(common.default_bin()))
    a = ap.parse_args()
    if a.cmd in ("make", "add"):
        ks = range(a.count) if a.cmd == "make" else [a.case]
        for k in ks:
            write_case(a.family, a.seed, k, a.max_len, a.lengths_per_case,
                       CORPUS / a.family / f"{a.name_prefix}s{a.seed}_{k:03d}")
        return 0
    matched = total = 0
    for d in case_dirs(a.family):
        for r in check_case(d, a.backend, a.modes.split(","), Path(a.bin)):
            print(f"{d.parent.name}/{d.name} {r.summary()}", flush=True)
            matched += r.ok
            total += 1
    print(f"configs x lengths matched: {matched}/{total}")
    return 0 if matched == total and total else 1


if __name__ == "__main__":
    sys.exit(main())
