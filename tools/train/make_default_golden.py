#!/usr/bin/env python3
"""Golden greedy tokens of models/default from the torch reference (HF qwen4_exp, float32 CPU,
bf16 weights upcast), for tests/python/default_model. Each case stops before the first
<|endoftext|> / <|im_end|>; min_margin is the smallest top-1 minus top-2 logit gap seen.
Usage: /work/refvenv/bin/python tools/train/make_default_golden.py [models/default] [out.json]
"""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval as ev  # noqa: E402
import qwen_tiny as q  # noqa: E402

CASES = [
    ("chat_hello", [{"role": "user", "content": "Hello!"}], 16),
    ("chat_code", [{"role": "user", "content": "Write a Python function that adds two numbers."}], 40),
    ("chat_define", [{"role": "user", "content": "What does \"river\" mean?"}], 24),
]
TEXT_CASES = [("text_python", "The Python tutorial explains", 24)]


@torch.no_grad()
def greedy(r, ids, n):
    ids, out, margin = list(ids), [], float("inf")
    for _ in range(n):
        logits = r.trunk(ids)[0][-1]
        top = torch.topk(logits, 2).values
        nxt = int(logits.argmax())
        if nxt in (q.EOT_ID, q.IM_END_ID):
            break
        margin = min(margin, float(top[0] - top[1]))
        ids.append(nxt)
        out.append(nxt)
    return out, margin


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else "models/default"
    dst = sys.argv[2] if len(sys.argv) > 2 else "tests/data/default_model/greedy.json"
    r = ev.Runner(model, "build/train/data")
    cases = []
    prompts = [(n, r.tok.encode(r.render(m), add_special_tokens=False).ids, k) for n, m, k in CASES]
    prompts += [(n, r.tok.encode(t, add_special_tokens=False).ids, k) for n, t, k in TEXT_CASES]
    for name, ids, n in prompts:
        out, margin = greedy(r, ids, n)
        cases.append({"name": name, "prompt": ids, "greedy": out, "min_margin": round(margin, 5),
                      "text": r.tok.decode(out, skip_special_tokens=False)})
        print(name, len(ids), out, round(margin, 4), flush=True)
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    Path(dst).write_text(json.dumps({"model": "models/default", "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main()
