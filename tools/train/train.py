#!/usr/bin/env python3
"""Train the default model (tiny Qwen3.8 Flash Next + MTP head) for a fixed wall-clock budget.

Resumable: --init DIR starts from the weights in DIR (config.json + model-fp32-*.safetensors,
what a previous run wrote); --resume FILE.pt also restores the optimizer, step and clock.
Writes into --out: model.safetensors (bf16, the shipped file), model-fp32-0000N-of-0000M
.safetensors (resume weights, shards under 15 MiB), config.json, loss_log.jsonl,
summary.json, samples.txt; and FILE.pt when --save-pt is given.

Loss = LM cross-entropy + sum_k w_k * MTP depth-k cross-entropy (+ MoE balance loss).
Example (CPU smoke test): python tools/train/train.py --data build/train/data --out /tmp/t \
    --device cpu --batch 2 --seq 64 --time-budget 20
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen_tiny as q  # noqa: E402

T0 = time.time()


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="dir with train.bin, val.bin, tokenizer.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--init", default=None, help="dir with weights to start from")
    ap.add_argument("--resume", default=None, help=".pt with weights + optimizer state")
    ap.add_argument("--save-pt", default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=96)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--mtp-weights", default="0.3,0.2,0.1")
    ap.add_argument("--aux-coef", type=float, default=0.01)
    ap.add_argument("--time-budget", type=float, default=390.0, help="training seconds")
    ap.add_argument("--hard-deadline", type=float, default=1e9,
                    help="stop training this many seconds after process start")
    ap.add_argument("--save-every", type=float, default=90.0, help="seconds between saves")
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--val-batches", type=int, default=40)
    ap.add_argument("--sample-tokens", type=int, default=48, help="0: no samples.txt")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


class Batches:
    """Random windows of seq+depth+1 tokens from a uint16 token file, kept on the device."""

    def __init__(self, path, device, seq, extra):
        self.tokens = torch.from_numpy(np.fromfile(path, dtype=np.uint16).astype(np.int64)).to(device)
        self.n, self.seq, self.extra = self.tokens.numel(), seq, extra
        self.offs = torch.arange(seq + extra, device=device)

    def sample(self, batch, gen):
        starts = torch.randint(0, self.n - self.seq - self.extra, (batch,), generator=gen,
                               device="cpu").to(self.tokens.device)
        return self.tokens[starts[:, None] + self.offs[None, :]]

    def sequential(self, batch, i):
        span = self.seq + self.extra
        starts = (torch.arange(batch, device=self.tokens.device) + i * batch) * span
        starts = starts % (self.n - span)
        return self.tokens[starts[:, None] + self.offs[None, :]]


def losses(model, head, widened, win, seq, mtp_w, aux_coef):
    """win {B, seq+D+1}. Returns (total, parts dict of floats-as-tensors)."""
    depth = len(mtp_w)
    x = win[:, :seq]
    out = model(input_ids=x, use_cache=False, output_router_logits=aux_coef > 0)
    lm = q.ce(out.logits, win[:, 1:seq + 1])
    parts = {"lm": lm}
    total = lm
    if aux_coef > 0 and out.aux_loss is not None:
        parts["aux"] = out.aux_loss
        total = total + aux_coef * out.aux_loss
    if depth:
        toks = [win[:, k + 1:k + 1 + seq] for k in range(depth)]
        hs = q.mtp_chain(model, head, widened.value, toks, depth)
        for k, h in enumerate(hs):
            l_k = q.ce(model.lm_head(h), win[:, k + 2:k + 2 + seq])
            parts[f"mtp{k + 1}"] = l_k
            total = total + mtp_w[k] * l_k
    return total, parts


def lr_at(args, step, frac):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    frac = min(max(frac, 0.0), 1.0)
    return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))


def save(out: Path, cfg, model, head, tag=""):
    from safetensors.torch import save_file
    out.mkdir(parents=True, exist_ok=True)
    sd = {k: v.detach().float().cpu().contiguous() for k, v in q.state_dict(model, head).items()}
    (out / "config.json").write_text(json.dumps(q.config_json(cfg), indent=2) + "\n")
    save_file({k: v.to(torch.bfloat16) for k, v in sd.items()}, str(out / "model.safetensors"),
              metadata={"format": "pt", "note": "ds4server default model " + tag})
    shards, cur, size = [], {}, 0
    for k in sorted(sd):
        nbytes = sd[k].numel() * 4
        if cur and size + nbytes > 15 * 2**20:
            shards.append(cur)
            cur, size = {}, 0
        cur[k] = sd[k]
        size += nbytes
    shards.append(cur)
    for old in out.glob("model-fp32-*.safetensors"):
        old.unlink()
    for i, sh in enumerate(shards):
        save_file(sh, str(out / f"model-fp32-{i + 1:05d}-of-{len(shards):05d}.safetensors"))


@torch.no_grad()
def evaluate(model, head, widened, val: Batches, args, mtp_w, amp):
    model.eval(), head.eval()
    sums, n = {}, 0
    for i in range(args.val_batches):
        win = val.sequential(args.batch, i)
        with amp():
            _, parts = losses(model, head, widened, win, args.seq, mtp_w, 0.0)
        for k, v in parts.items():
            sums[k] = sums.get(k, 0.0) + float(v)
        n += 1
    model.train(), head.train()
    return {k: v / n for k, v in sums.items()}


@torch.no_grad()
def samples(model, data_dir: Path, device, amp, n_new=48):
    try:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(data_dir / "tokenizer.json"))
    except Exception as e:  # the device's tokenizers may differ; samples are optional
        return f"(no samples: {e})"
    prompts = [
        "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\nWhat does \"river\" mean?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\nWrite a Python function that reverses a string.<|im_end|>\n"
        "<|im_start|>assistant\n",
        "The Python tutorial explains",
    ]
    model.eval()
    texts = []
    for p in prompts:
        ids = tok.encode(p, add_special_tokens=False).ids
        for _ in range(n_new):
            x = torch.tensor([ids], device=device)
            with amp():
                nxt = int(model(input_ids=x, use_cache=False).logits[0, -1].argmax())
            ids.append(nxt)
            if nxt in (q.IM_END_ID, q.EOT_ID):
                break
        texts.append(tok.decode(ids, skip_special_tokens=False))
    model.train()
    return "\n-----\n".join(texts)


def main():
    args = parse()
    torch.manual_seed(args.seed)
    dev = torch.device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    mtp_w = [float(w) for w in args.mtp_weights.split(",") if w]
    if args.init:
        cfg, model, head = q.load_dir(args.init)
    else:
        cfg, model, head = q.build()
    model.to(dev).train()
    head.to(dev).train()
    widened = q.Widened(model)
    params = [p for p in list(model.parameters()) + list(head.parameters()) if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8,
                            fused=dev.type == "cuda")
    step, trained_s, tokens_seen = 0, 0.0, 0
    if args.resume:
        ck = torch.load(args.resume, map_location=dev)
        q.load_state(model, head, ck["weights"])
        opt.load_state_dict(ck["optim"])
        step, trained_s, tokens_seen = ck["step"], ck["trained_s"], ck["tokens"]
    use_amp = dev.type == "cuda"

    def amp():
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp)

    data = Path(args.data)
    extra = len(mtp_w) + 1
    train = Batches(data / "train.bin", dev, args.seq, extra)
    val = Batches(data / "val.bin", dev, args.seq, extra)
    gen = torch.Generator().manual_seed(args.seed + step)
    counts = q.count_params(model, head)
    print(json.dumps({"params": counts, "train_tokens": train.n, "val_tokens": val.n,
                      "device": str(dev), "startup_s": round(time.time() - T0, 1)}), flush=True)
    log = open(out / "loss_log.jsonl", "a")
    t_start = time.time()
    last_save = t_start
    run_tokens_per_step = args.batch * args.seq
    while True:
        now = time.time()
        elapsed = now - t_start
        if elapsed >= args.time_budget or now - T0 >= args.hard_deadline:
            break
        frac = (trained_s + elapsed) / max(trained_s + args.time_budget, 1e-9)
        lr = lr_at(args, step, frac)
        for g in opt.param_groups:
            g["lr"] = lr
        win = train.sample(args.batch, gen)
        with amp():
            total, parts = losses(model, head, widened, win, args.seq, mtp_w, args.aux_coef)
        opt.zero_grad(set_to_none=True)
        total.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        step += 1
        tokens_seen += run_tokens_per_step
        if step % args.log_every == 0 or step == 1:
            rec = {"step": step, "t": round(trained_s + time.time() - t_start, 2), "lr": lr,
                   "tokens": tokens_seen, "gnorm": round(float(gnorm), 4)}
            rec.update({k: round(float(v.detach()), 4) for k, v in parts.items()})
            log.write(json.dumps(rec) + "\n")
            log.flush()
            print(json.dumps(rec), flush=True)
        if time.time() - last_save > args.save_every:
            save(out, cfg, model, head, f"step {step}")
            last_save = time.time()
    trained_s += time.time() - t_start
    save(out, cfg, model, head, f"step {step}")
    val_losses = evaluate(model, head, widened, val, args, mtp_w, amp)
    summary = {"steps": step, "train_seconds": round(trained_s, 1), "tokens": tokens_seen,
               "params": counts, "val": val_losses, "batch": args.batch, "seq": args.seq,
               "lr": args.lr, "mtp_weights": mtp_w, "wall_s": round(time.time() - T0, 1)}
    print(json.dumps(summary), flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    if args.sample_tokens > 0:
        (out / "samples.txt").write_text(samples(model, data, dev, amp, args.sample_tokens))
    if args.save_pt:
        torch.save({"weights": q.state_dict(model, head), "optim": opt.state_dict(), "step": step,
                    "trained_s": trained_s, "tokens": tokens_seen}, args.save_pt)
    print("done", round(time.time() - T0, 1), "s", flush=True)


if __name__ == "__main__":
    main()
