#!/usr/bin/env python3
"""Evaluate the default model with the torch reference on CPU (issue #13).

- held-out loss (LM and MTP depths) on windows of val.bin,
- greedy samples, a three-turn chat rendered with the Qwen chat template,
- MTP speculative decoding, greedy, depth 3: the head drafts 3 tokens from the trunk's
  widened stream (MTPLX semantics, see qwen_tiny.mtp_chain), the trunk verifies them; the
  output is checked to be identical to plain greedy decoding.
Example: /work/refvenv/bin/python tools/train/eval.py --model models/default \
    --data build/train/data --out build/train/eval.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jinja2
import numpy as np
import torch
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen_tiny as q  # noqa: E402

STOP = (q.IM_END_ID, q.EOT_ID)
SPEC_PROMPTS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "user", "content": "Who are you?"}],
    [{"role": "user", "content": "What is a list in Python?"}],
    [{"role": "user", "content": "Explain recursion."}],
    [{"role": "user", "content": "Write a Python function that checks if a number is prime."}],
    [{"role": "user", "content": "Write a function in Python that computes the factorial of n."}],
    [{"role": "user", "content": "What does \"harbor\" mean?"}],
    [{"role": "user", "content": "What is 7 plus 5?"}],
    [{"role": "user", "content": "What does the Python function os.getcwd do?"}],
    [{"role": "user", "content": "Tell me about the moon."}],
]
TEXT_PROMPTS = ["The Python tutorial explains", "A dictionary maps", "river (noun):"]
THREE_TURNS = ["Hello!", "What is a dictionary in Python?",
               "Write a Python function that returns the square of a number."]


class Runner:
    def __init__(self, model_dir, data_dir):
        torch.set_num_threads(2)
        self.cfg, self.model, self.head = q.load_dir(model_dir)
        self.widened = q.Widened(self.model)
        self.tok = Tokenizer.from_file(str(Path(model_dir) / "tokenizer.json"))
        tmpl = (Path(__file__).resolve().parent / "chat_template.jinja").read_text()
        self.tmpl = jinja2.Environment().from_string(tmpl)
        self.data_dir = Path(data_dir)

    def render(self, messages, thinking=False):
        return self.tmpl.render(messages=messages, add_generation_prompt=True,
                                enable_thinking=thinking, tools=None)

    @torch.no_grad()
    def trunk(self, ids):
        out = self.model(input_ids=torch.tensor([ids]), use_cache=False)
        return out.logits[0], self.widened.value

    @torch.no_grad()
    def greedy(self, ids, n):
        ids = list(ids)
        for _ in range(n):
            nxt = int(self.trunk(ids)[0][-1].argmax())
            ids.append(nxt)
            if nxt in STOP:
                break
        return ids

    @torch.no_grad()
    def draft(self, ids, widened, y, depth):
        """Greedy D-token draft for the position after y."""
        toks = [torch.tensor([ids[1:] + [y]])]
        drafts = []
        for k in range(depth):
            hs = q.mtp_chain(self.model, self.head, widened, toks, k + 1)
            d = int(self.model.lm_head(hs[k][0, -1]).argmax())
            drafts.append(d)
            nxt = toks[-1].clone()
            nxt[0, -1] = d
            toks.append(nxt)
        return drafts

    @torch.no_grad()
    def speculative(self, ids, n, depth=3):
        ids, stats = list(ids), {"steps": 0, "drafted": 0, "accepted": 0,
                                 "per_depth": [0] * depth, "reached": [0] * depth}
        start = len(ids)
        while len(ids) - start < n:
            logits, widened = self.trunk(ids)
            y = int(logits[-1].argmax())
            if y in STOP:
                ids.append(y)
                break
            drafts = self.draft(ids, widened, y, depth)
            vlogits, _ = self.trunk(ids + [y] + drafts)
            preds = vlogits[len(ids):].argmax(-1).tolist()  # after y, d1, d2, d3
            acc = 0
            while acc < depth and drafts[acc] == preds[acc]:
                acc += 1
            for k in range(min(acc + 1, depth)):
                stats["reached"][k] += 1
                stats["per_depth"][k] += int(k < acc)
            stats["steps"] += 1
            stats["drafted"] += depth
            stats["accepted"] += acc
            new = [y] + drafts[:acc] + [preds[acc]]
            for t in new:
                ids.append(t)
                if t in STOP:
                    return ids, stats
        return ids, stats

    @torch.no_grad()
    def heldout(self, windows, seq):
        data = np.fromfile(self.data_dir / "val.bin", dtype=np.uint16).astype(np.int64)
        span = seq + 4
        starts = np.linspace(0, data.size - span - 1, windows).astype(np.int64)
        win = torch.tensor(np.stack([data[s:s + span] for s in starts]))
        sums = {}
        for i in range(windows):
            x = win[i:i + 1]
            import train as T  # noqa: E402  (shares the loss definition)
            _, parts = T.losses(self.model, self.head, self.widened, x, seq, [1, 1, 1], 0.0)
            for k, v in parts.items():
                sums[k] = sums.get(k, 0.0) + float(v) / windows
        return sums


def val_spec(r, args, t0):
    """D3 acceptance on held-out text: prefixes cut from val.bin (documents and chats)."""
    data = np.fromfile(r.data_dir / "val.bin", dtype=np.uint16).astype(np.int64)
    starts = np.linspace(0, data.size - 200, args.val_prompts).astype(np.int64)
    tot = {"steps": 0, "drafted": 0, "accepted": 0}
    for i, s0 in enumerate(starts):
        prompt = [int(t) for t in data[s0:s0 + 48]]
        _, st = r.speculative(prompt, args.new_tokens)
        for k in tot:
            tot[k] += st[k]
        print(i, st, round(time.time() - t0), flush=True)
    tot["acceptance_rate"] = tot["accepted"] / max(tot["drafted"], 1)
    tot["mean_accepted_per_step"] = tot["accepted"] / max(tot["steps"], 1)
    Path(args.out).write_text(json.dumps({"val_prefix_spec": tot}, indent=2) + "\n")
    print(json.dumps(tot))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/default")
    ap.add_argument("--data", default="build/train/data")
    ap.add_argument("--out", default="build/train/eval.json")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--windows", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--val-prompts", type=int, default=0,
                    help="only run speculative decoding on N 48-token prefixes taken from val.bin")
    ap.add_argument("--lossless-checks", type=int, default=2,
                    help="prompts whose speculative output is compared with plain greedy")
    args = ap.parse_args()
    r = Runner(args.model, args.data)
    t0 = time.time()
    if args.val_prompts:
        return val_spec(r, args, t0)
    res = {"params": q.count_params(r.model, r.head)}
    res["heldout"] = r.heldout(args.windows, args.seq)
    print("heldout", res["heldout"], round(time.time() - t0), flush=True)
    dec = lambda ids: r.tok.decode(ids, skip_special_tokens=False)  # noqa: E731
    totals = {"steps": 0, "drafted": 0, "accepted": 0, "per_depth": [0, 0, 0], "reached": [0, 0, 0]}
    res["spec"], lossless = [], True
    for i, msgs in enumerate(SPEC_PROMPTS):
        prompt = r.tok.encode(r.render(msgs), add_special_tokens=False).ids
        out, st = r.speculative(prompt, args.new_tokens)
        if i < args.lossless_checks:
            ref = r.greedy(prompt, len(out) - len(prompt))
            lossless &= out == ref[:len(out)]
        print(i, st, round(time.time() - t0), flush=True)
        for k in totals:
            totals[k] = ([a + b for a, b in zip(totals[k], st[k])] if isinstance(st[k], list)
                         else totals[k] + st[k])
        res["spec"].append({"prompt": msgs[-1]["content"], "answer": dec(out[len(prompt):]),
                            "stats": st})
    totals["acceptance_rate"] = totals["accepted"] / max(totals["drafted"], 1)
    totals["mean_accepted_per_step"] = totals["accepted"] / max(totals["steps"], 1)
    totals["tokens_per_trunk_step"] = 1 + totals["mean_accepted_per_step"]
    totals["depth_conditional_rate"] = [a / max(b, 1) for a, b in zip(totals["per_depth"],
                                                                      totals["reached"])]
    totals["lossless_vs_greedy"] = lossless
    res["mtp_d3_greedy"] = totals
    res["text_samples"] = [dec(r.greedy(r.tok.encode(p).ids, 48)) for p in TEXT_PROMPTS]
    msgs, chat = [], []
    for turn in THREE_TURNS:
        msgs.append({"role": "user", "content": turn})
        prompt = r.tok.encode(r.render(msgs), add_special_tokens=False).ids
        out = r.greedy(prompt, 96)
        text = r.tok.decode(out[len(prompt):], skip_special_tokens=True)
        answer = text.split("</think>")[-1].strip()
        msgs.append({"role": "assistant", "content": answer})
        chat.append({"user": turn, "assistant_raw": dec(out[len(prompt):])})
    res["three_turn_chat"] = chat
    res["thinking_off_sample"] = dec(r.greedy(r.tok.encode(
        r.render([{"role": "user", "content": "Hi, how are you?"}], thinking=False),
        add_special_tokens=False).ids, 48))
    res["eval_seconds"] = round(time.time() - t0, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: res[k] for k in ("params", "heldout", "mtp_d3_greedy")}, indent=2))


if __name__ == "__main__":
    main()
