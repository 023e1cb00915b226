#!/usr/bin/env python3
"""HF transformers peer for `ds4-bench --compare` on models/default (qwen4_exp, CPU, float32).

Same flags and CSV as ds4-bench / antirez's ds4-bench, same work: the prompt file's tokens
repeated to fill the context, frontiers ctx_start, ctx_start*2 (or + step), ..., ctx_max; each
row times only the newly appended tokens as one prefill (HF cache object), then
gen_tokens greedy decode steps on a copy of the cache (EOS not a stop). Torch threads =
--threads. Runs with /work/refvenv (torch + transformers with qwen4_exp); never in CI.

  ds4-bench -m models/default --prompt-file README.md --ctx-start 512 --ctx-max 4000 \
    --compare '/work/refvenv/bin/python bench/hf_peer/hf_bench.py -m {model} --prompt-file {prompt_file} \
      --ctx-start {ctx_start} --ctx-max {ctx_max} --step-incr {step_incr} --gen-tokens {gen_tokens} --csv {csv}'
"""
import argparse
import copy
import sys
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "train"))
import qwen_tiny as q  # noqa: E402


def frontiers(start, mx, step):
    f, c = [], start
    while c < mx:
        f.append(c)
        c = c + step if step > 0 else c * 2
    return f + [mx]


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--prompt-file", required=True)
    ap.add_argument("--ctx-start", type=int, default=512)
    ap.add_argument("--ctx-max", type=int, default=4096)
    ap.add_argument("--step-incr", type=int, default=0)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    _, model, _ = q.load_dir(a.model)
    text = Tokenizer.from_file(str(Path(a.model) / "tokenizer.json")).encode(Path(a.prompt_file).read_text()).ids
    ids = (text * (a.ctx_max // len(text) + 1))[:a.ctx_max]
    out = open(a.csv, "w")
    out.write("ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes\n")
    cache, pos, logits = None, 0, None
    for f in frontiers(a.ctx_start, a.ctx_max, a.step_incr):
        t0 = time.perf_counter()
        o = model(input_ids=torch.tensor([ids[pos:f]]), cache=cache, use_cache=True)
        dt = time.perf_counter() - t0
        cache, logits, n = o.cache if hasattr(o, "cache") and o.cache is not None else o.past_key_values, o.logits[0, -1], f - pos
        pos = f
        g, gl = copy.deepcopy(cache), logits
        t0 = time.perf_counter()
        for _ in range(a.gen_tokens):
            o = model(input_ids=gl.argmax().view(1, 1), cache=g, use_cache=True)
            g, gl = (o.cache if getattr(o, "cache", None) is not None else o.past_key_values), o.logits[0, -1]
        gt = time.perf_counter() - t0
        gen_tps = a.gen_tokens / gt if a.gen_tokens else 0.0
        out.write(f"{f},{n},{n / dt:.2f},{a.gen_tokens},{gen_tps:.2f},0\n")
        out.flush()
        print(f"hf peer: ctx {f} prefill {n / dt:.1f} tok/s gen {gen_tps:.1f} tok/s", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
