#!/usr/bin/env python3
"""Random-configuration fuzzer against HF transformers (needs torch + transformers; see
tools/reference/regen.sh for the pinned versions).

  fuzz.py --family qwen_next --cases 500 --seed 1 [--jobs 4] [--max-len 2000]
          [--lengths-per-case K] [--modes onepass,steps,chunk7] [--backend cpu|cuda]
          [--keep-failures DIR] [--bin PATH/ds4server]

Case k uses seed (seed, k): rerun one with --only k. Prints one line per (config, length) and
ends with `configs x lengths matched: M/N` (exit 1 when any mismatch or error).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def run_case(args_tuple):
    family, seed, k, max_len, per_case, modes, backend, bin_path, keep = args_tuple
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch
    torch.set_num_threads(1)
    fam = common.family_module(family)
    rng = np.random.default_rng([seed, k])
    lines, results = [], []
    try:
        cfg = fam.random_config(rng)
        model = fam.build(cfg, int(rng.integers(1 << 31)))
        lengths = common.candidate_lengths(fam, cfg, max_len)
        if per_case and len(lengths) > per_case:
            lengths = sorted(rng.choice(lengths, size=per_case, replace=False).tolist())
        with tempfile.TemporaryDirectory() as td:
            mdir = Path(td) / "model"
            mdir.mkdir()
            fam.save(model, cfg, mdir)
            for n in lengths:
                ids = common.make_prompt(fam, cfg, rng, n)
                greedy, rows, unstable = common.reference(fam, model, ids)
                r = common.check_length(Path(bin_path), mdir, ids, greedy, rows, modes, backend, common.tolerance(fam),
                                        unstable)
                results.append(r.ok)
                lines.append(f"case {k} {r.summary()}")
                if not r.ok and keep:
                    dst = Path(keep) / f"{family}_s{seed}_c{k}"
                    if not dst.exists():
                        shutil.copytree(mdir, dst)
                        (dst / "fuzz_case.json").write_text(json.dumps({"seed": seed, "case": k, "config": cfg},
                                                                       indent=1, default=str))
    except Exception:  # noqa: BLE001 - a config the reference refuses is a generator bug: report it
        lines.append(f"case {k} CRASH {traceback.format_exc().strip().splitlines()[-1]}")
        results.append(False)
    return k, lines, results


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", required=True)
    ap.add_argument("--cases", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", type=int, default=None)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 0))
    ap.add_argument("--max-len", type=int, default=2000)
    ap.add_argument("--lengths-per-case", type=int, default=0, help="0: every candidate length")
    ap.add_argument("--modes", default=",".join(common.DEFAULT_MODES))
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--bin", default=str(common.default_bin()))
    ap.add_argument("--keep-failures", default="")
    a = ap.parse_args()
    ks = [a.only] if a.only is not None else list(range(a.cases))
    work = [(a.family, a.seed, k, a.max_len, a.lengths_per_case, a.modes.split(","), a.backend, a.bin,
             a.keep_failures) for k in ks]
    matched = total = configs_ok = 0
    with mp.get_context("spawn").Pool(a.jobs) as pool:
        for k, lines, results in pool.imap_unordered(run_case, work):
            for ln in lines:
                print(ln, flush=True)
            matched += sum(results)
            total += len(results)
            configs_ok += all(results)
    print(f"family {a.family}: configs matched {configs_ok}/{len(ks)}")
    print(f"configs x lengths matched: {matched}/{total}")
    return 0 if matched == total else 1


if __name__ == "__main__":
    sys.exit(main())
