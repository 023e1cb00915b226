#!/usr/bin/env python3
"""Self-distill the default model's MTP head on the trunk's own greedy text (issue #13).

Greedy speculative decoding accepts a draft exactly when it equals the trunk's argmax, so the
head is trained to predict the trunk's argmax, not the data: the trunk (frozen, lm_head
included) first answers a few thousand chat prompts greedily (on-policy text, the contexts the
head sees when it drafts), then windows of that text train the head with depth-k targets =
the trunk's argmax at position t+k (teacher-forced, one trunk forward per batch). The trunk's
tensors are copied byte for byte into the output, so every trunk golden stays valid.

Prompts come from this project's own templates (synth_chat.py greetings, explanations, code
tasks, arithmetic), short-story requests, and summaries / continuations of Python standard
library docstrings (PSF licence, the same source as the training data); nothing is downloaded.

Usage: python tools/train/distill_mtp.py --model models/default --out OUT [--device cuda]
       [--prompts 4096] [--new-tokens 192] [--gen-budget 150] [--train-budget 200]
Writes OUT/model.safetensors (bf16: trunk unchanged, mtp.* trained), OUT/distill.json.
"""
from __future__ import annotations

import argparse
import inspect
import json
import pydoc
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen_tiny as q  # noqa: E402
import synth_chat as sc  # noqa: E402

STORY_SUBJECTS = ["a robot", "a small dog", "a lighthouse keeper", "a lost key", "a dragon", "a baker",
                  "a train", "a river", "an old clock", "a student", "a cat", "a garden", "the moon",
                  "a sailor", "a library", "a bicycle", "a snowman", "a fox", "a violin", "a tree"]
STORY_TWISTS = ["who learns to paint", "that cannot sleep", "on a rainy day", "in a quiet town",
                "who finds a map", "that wants to fly", "at the end of winter", "who makes a friend",
                "in the mountains", "that tells the truth"]
STORY_ASKS = ["Write a short story about {}.", "Tell me a story about {}.", "Write a very short story about {}."]
SUMMARY_ASKS = ["Summarize the following text in a few sentences:\n\n{}", "Summarize this:\n\n{}",
                "What is this text about?\n\n{}", "Give a short summary of this documentation:\n\n{}"]
STDLIB = ["os", "os.path", "json", "re", "math", "random", "itertools", "functools", "collections",
          "pathlib", "string", "textwrap", "datetime", "statistics", "heapq", "bisect", "shutil",
          "subprocess", "argparse", "logging", "csv", "time", "typing", "dataclasses", "enum",
          "fractions", "decimal", "operator", "copy", "pprint", "glob", "tempfile", "zipfile"]


def docstrings(rng):
    """(name, docstring) pairs of stdlib modules and their public callables."""
    out = []
    for mod_name in STDLIB:
        mod = pydoc.locate(mod_name)
        if mod is None:
            continue
        for name in [None] + sorted(n for n in dir(mod) if not n.startswith("_")):
            obj = mod if name is None else getattr(mod, name, None)
            doc = inspect.getdoc(obj) if obj is not None else None
            if doc and 80 <= len(doc) <= 1500:
                out.append((mod_name + ("." + name if name else ""), doc))
    rng.shuffle(out)
    return out


def user_prompts(n, seed):
    rng = random.Random(seed)
    docs = docstrings(rng)
    gens = [lambda: sc.gen_greeting(rng)[0], lambda: sc.gen_explain(rng)[0], lambda: sc.gen_code(rng)[0],
            lambda: sc.gen_math(rng)[0],
            lambda: rng.choice(STORY_ASKS).format(rng.choice(STORY_SUBJECTS) + " " + rng.choice(STORY_TWISTS)),
            lambda: rng.choice(SUMMARY_ASKS).format(rng.choice(docs)[1]),
            lambda: f"Explain what {rng.choice(docs)[0]} does in Python.",
            lambda: f"Continue this text:\n\n{rng.choice(docs)[1][:300]}"]
    weights = [1, 1, 2, 1, 3, 3, 1, 1]
    return [rng.choices(gens, weights)[0]() for _ in range(n)], rng


def render(user, thinking):
    head = f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    return head + ("<think>\n" if thinking else "<think>\n\n</think>\n\n")


@torch.no_grad()
def greedy_batch(model, prompts, new_tokens, device, stop):
    """Greedy answers of a batch by full recomputation over right-padded rows: every layer is
    causal, so pads to the right of a row never change its logits (exact, no cache needed)."""
    rows = [list(p) for p in prompts]
    done = [False] * len(rows)
    for _ in range(new_tokens):
        width = max(len(r) for r in rows)
        x = torch.full((len(rows), width), q.EOT_ID, dtype=torch.long, device=device)
        for i, r in enumerate(rows):
            x[i, :len(r)] = torch.tensor(r, device=device)
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=device != "cpu"):
            logits = model(input_ids=x, use_cache=False).logits
        ends = torch.tensor([len(r) - 1 for r in rows], device=device)
        nxt = logits[torch.arange(len(rows), device=device), ends].argmax(-1).tolist()
        for i, t in enumerate(nxt):
            if not done[i]:
                rows[i].append(t)
                done[i] = t in stop
        if all(done):
            break
    return rows


def head_agreement(model, head, widened, windows, seq, depth, device):
    """Per depth: fraction of positions where the head's draft equals the trunk's argmax at
    that position (teacher-forced; the drafts' share that greedy verification would keep)."""
    hits, total = [0] * depth, 0
    with torch.no_grad():
        for w in windows:
            w = w.to(device)
            labels = model(input_ids=w, use_cache=False).logits.argmax(-1)  # {B, seq+depth}
            toks = [w[:, k + 1:k + 1 + seq] for k in range(depth)]
            hs = q.mtp_chain(model, head, widened.value[:, :seq], toks, depth)
            for k, h in enumerate(hs):
                hits[k] += int((model.lm_head(h).argmax(-1) == labels[:, k + 1:k + 1 + seq]).sum())
            total += w.shape[0] * seq
    return [h / max(total, 1) for h in hits]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/default")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--prompts", type=int, default=4096)
    ap.add_argument("--gen-batch", type=int, default=256)
    ap.add_argument("--new-tokens", type=int, default=192)
    ap.add_argument("--gen-budget", type=float, default=150.0, help="seconds of generation at most")
    ap.add_argument("--train-budget", type=float, default=200.0, help="seconds of head training")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--depth-weights", default="1.0,0.7,0.5")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    t0 = time.time()
    torch.manual_seed(args.seed)
    from safetensors.torch import load_file, save_file
    from tokenizers import Tokenizer
    src = Path(args.model)
    tok = Tokenizer.from_file(str(src / "tokenizer.json"))
    cfg, model, head = q.load_dir(src, args.device)
    widened = q.Widened(model)
    for p in model.parameters():
        p.requires_grad_(False)
    w = [float(v) for v in args.depth_weights.split(",")]
    depth = len(w)

    users, rng = user_prompts(args.prompts, args.seed)
    prompts = [tok.encode(render(u, rng.random() < 0.5), add_special_tokens=False).ids[-1024:] for u in users]
    texts, t_gen = [], time.time()
    for i in range(0, len(prompts), args.gen_batch):
        if time.time() - t_gen > args.gen_budget:
            break
        texts += greedy_batch(model, prompts[i:i + args.gen_batch], args.new_tokens, args.device,
                              (q.IM_END_ID, q.EOT_ID))
        print(f"generated {len(texts)} answers, {time.time() - t0:.0f} s", flush=True)
    stream = [t for r in texts for t in r + [q.EOT_ID]]
    span = args.seq + depth + 1
    data = torch.tensor(stream[: len(stream) // span * span]).view(-1, span)
    perm = torch.randperm(data.shape[0], generator=torch.Generator().manual_seed(args.seed))
    data = data[perm]
    n_val = max(1, min(64, data.shape[0] // 10))
    val = [data[:n_val]]
    train = data[n_val:]
    before = head_agreement(model, head, widened, val, args.seq, depth, args.device)
    print("agreement before", [round(a, 4) for a in before], flush=True)

    opt = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.0)
    head.train()
    step, t_train, losses = 0, time.time(), []
    while time.time() - t_train < args.train_budget:
        idx = torch.randint(0, train.shape[0], (args.batch,))
        win = train[idx].to(args.device)
        with torch.no_grad(), torch.autocast(device_type=args.device.split(":")[0], dtype=torch.bfloat16,
                                             enabled=args.device != "cpu"):
            labels = model(input_ids=win[:, :args.seq + depth], use_cache=False).logits.argmax(-1)
        wide = widened.value[:, :args.seq].float()
        toks = [win[:, k + 1:k + 1 + args.seq] for k in range(depth)]
        with torch.autocast(device_type=args.device.split(":")[0], dtype=torch.bfloat16, enabled=args.device != "cpu"):
            hs = q.mtp_chain(model, head, wide, toks, depth)
            loss = sum(w[k] * q.ce(model.lm_head(h), labels[:, k + 1:k + 1 + args.seq]) for k, h in enumerate(hs))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        frac = (time.time() - t_train) / args.train_budget
        for g in opt.param_groups:
            g["lr"] = args.lr * (0.1 + 0.9 * 0.5 * (1 + torch.cos(torch.tensor(3.14159265 * frac)).item()))
        opt.step()
        step += 1
        if step % 50 == 0:
            losses.append((step, round(float(loss), 4)))
            print(f"step {step} loss {float(loss):.4f} {time.time() - t0:.0f} s", flush=True)
    head.eval()
    after = head_agreement(model, head, widened, val, args.seq, depth, args.device)
    print("agreement after", [round(a, 4) for a in after], flush=True)

    # Trunk tensors byte for byte from the source file; mtp.* from the trained head (bf16).
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    orig = load_file(str(src / "model.safetensors"))
    trained = {k: v.detach().cpu().to(torch.bfloat16).contiguous()
               for k, v in q.state_dict(model, head).items() if k.startswith("mtp.")}
    assert set(trained) == {k for k in orig if k.startswith("mtp.")}, "MTP tensor names changed"
    merged = {k: (trained[k] if k in trained else v) for k, v in orig.items()}
    save_file(merged, str(out / "model.safetensors"), metadata={"format": "pt", "note": "ds4server default model, MTP self-distilled"})
    report = {"answers": len(texts), "tokens": len(stream), "windows": int(data.shape[0]), "steps": step,
              "agreement_before": before, "agreement_after": after, "loss_log": losses,
              "args": vars(args), "seconds": round(time.time() - t0, 1)}
    (out / "distill.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: report[k] for k in ("answers", "tokens", "steps", "agreement_before", "agreement_after", "seconds")}))


if __name__ == "__main__":
    main()
