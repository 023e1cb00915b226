#!/usr/bin/env python3
"""Self-distill the default model's MTP head on the trunk's own answers (issue #13).

Greedy speculative decoding keeps a draft exactly when it equals the trunk's argmax, so the
head is trained to predict the trunk's argmax, not the data, in the contexts it drafts in:
the trunk's own answers to chat prompts. The answers come from the shipped engine
(`ds4server run --batch`, onpolicy_prompts.py writes the prompts); the trunk's weights come
from the folder given (with gguf_to_fp32.py's model-fp32-*.safetensors there: the shipped
quantized values). One frozen trunk pass caches, per sequence, the pre-mixer widened stream
and the argmax of every position; the head then trains on those caches alone (depth-k target
at t = the engine's own token at t+k+2, i.e. the trunk's argmax at t+k+1; loss only where the
head drafts: from the last prompt position on). Windows are the last 512 tokens of prompt +
answer (QSA's indexer keeps every key up to its budget of 512, so HF's slow per-query
selection never runs); where that cuts a prompt's start, the engine's tokens still give the
true targets (torch's argmax on the cut context can differ, so it is only a diagnostic). Held-out chained acceptance (the share of depth-1..D drafts greedy
verification would keep, a draft counting only when all shallower ones do) picks the best
head. Trunk tensors are copied byte for byte into the output, so every trunk golden stays.

Usage: python tools/train/distill_mtp.py --model DIR --master models/default
       --pair PROMPTS.txt ANSWERS.txt [--pair ...] --out OUT [--device cuda] [--train-budget 240]
Writes OUT/model.safetensors (the master's bf16 tensors, mtp.* replaced), OUT/distill.json.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import qwen_tiny as q  # noqa: E402

WINDOW = 512  # = indexer_budget: QSA's fast path (every visible key kept) stays exact


def read_sequences(pairs, depth):
    """[(tokens, first drafting position, engine answer)] cut to the last WINDOW tokens, from
    (prompts file, answers file) pairs (answers: 'prompt line index<TAB>ids' per line)."""
    seqs = []
    for prompts_path, path in pairs:
        prompts = [list(map(int, ln.split())) for ln in open(prompts_path)]
        for ln in open(path):
            idx, _, ids = ln.rstrip("\n").partition("\t")
            ans = list(map(int, ids.split()))
            if not ans:
                continue
            full = prompts[int(idx)] + ans
            cut = max(0, len(full) - WINDOW)
            seqs.append((full[cut:], max(0, len(prompts[int(idx)]) - 1 - cut), ans))
    return [s for s in seqs if len(s[0]) - s[1] > depth + 1]


def make_loops(seqs, ids, n, rng):
    """Synthetic loop continuations (the tiny trunk often ends up repeating a phrase, and the
    head must then copy rather than guess): an on-policy prefix, then a span of its answer
    repeated. Only positions where the trunk itself greedily continues the loop are trained
    (batch_tensors' on-policy rule), so these are contexts greedy decoding really reaches."""
    out = []
    while len(out) < n:
        tk, start, _ = seqs[rng.choice(ids)]
        ans = tk[start + 1:]
        if len(ans) < 8:
            continue
        p = rng.randint(3, min(24, len(ans) // 2))
        j = rng.randint(0, len(ans) - p)
        span = ans[j:j + p]
        loop_len = rng.randint(4 * p, 12 * p)
        base = tk[:start + 1 + rng.randint(0, len(ans))][-(WINDOW - loop_len):]
        loop = (span * (loop_len // p + 1))[:loop_len]
        out.append((base + loop, len(base) - 1, loop))
    return out


@torch.no_grad()
def cache_trunk(model, widened, seqs, device, batch=64):
    """Per sequence: (widened {L,hc*d} bf16, trunk argmax {L})."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i][0]))
    cache = [None] * len(seqs)
    for b in range(0, len(order), batch):
        ids = order[b:b + batch]
        width = max(len(seqs[i][0]) for i in ids)
        x = torch.full((len(ids), width), q.EOT_ID, dtype=torch.long, device=device)
        for r, i in enumerate(ids):
            x[r, :len(seqs[i][0])] = torch.tensor(seqs[i][0], device=device)
        labels = model(input_ids=x, use_cache=False).logits.argmax(-1)
        for r, i in enumerate(ids):
            n = len(seqs[i][0])
            cache[i] = (widened.value[r, :n].to(torch.bfloat16), labels[r, :n].to(torch.int32))
    return cache


def engine_agreement(seqs, cache, ids):
    """Share of engine answer tokens equal to torch's argmax: both run the same trunk (cut
    windows, whose context lost its start, lower it)."""
    same = total = 0
    for i in ids:
        tk, start, _ = seqs[i]
        pred = cache[i][1][start:len(tk) - 1].tolist()
        same += sum(p == e for p, e in zip(pred, tk[start + 1:]))
        total += len(tk) - start - 1
    return same / max(total, 1)


def batch_tensors(seqs, cache, ids, depth, device):
    """Right-padded batch: widened {B,S,w}, draft tokens per depth {B,S}, targets, mask.

    Target of depth k at t: the trunk's argmax at t+k+1. A (t, k) trains only where greedy
    decoding reaches it: t at or after the last prompt position and the trunk's own argmax
    equals the text at t..t+k (the drafted tokens a greedy verify would have accepted)."""
    s = max(len(seqs[i][0]) for i in ids) - depth
    w = cache[ids[0]][0].shape[-1]
    wide = torch.zeros(len(ids), s, w, device=device, dtype=torch.bfloat16)
    toks = torch.full((len(ids), s + depth), q.EOT_ID, dtype=torch.long, device=device)
    lab = torch.zeros(len(ids), s + depth, dtype=torch.long, device=device)
    ok = torch.zeros(len(ids), s + depth, dtype=torch.bool, device=device)
    start_mask = torch.zeros(len(ids), s, dtype=torch.bool, device=device)
    for r, i in enumerate(ids):
        tk, start, _ = seqs[i]
        n = len(tk)
        wide[r, :min(n, s)] = cache[i][0][:s]
        toks[r, :n] = torch.tensor(tk, device=device)
        lab[r, :n] = cache[i][1].long()
        ok[r, :n - 1] = lab[r, :n - 1] == toks[r, 1:n]  # ok[p]: the trunk itself chose token p+1
        start_mask[r, start:n - 1] = True
    # on-policy run from t over k+1 positions: cumulative product of ok[t..t+k]
    runs = torch.stack([ok[:, k:k + s] for k in range(depth)], -1).int().cumprod(-1).bool()
    mask = runs & start_mask[..., None]
    return wide, [toks[:, k + 1:k + 1 + s] for k in range(depth)], [lab[:, k + 1:k + 1 + s] for k in range(depth)], mask


def chained(model, head, seqs, cache, ids, depth, device, batch=32):
    """Per-depth agreement and chained acceptance on the masked (drafting) positions."""
    hits, chain_hits, n = [0] * depth, 0, 0
    with torch.no_grad():
        for b in range(0, len(ids), batch):
            wide, toks, labs, mask = batch_tensors(seqs, cache, ids[b:b + batch], depth, device)
            with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=device != "cpu"):
                hs = q.mtp_chain(model, head, wide.float(), toks, depth)
            ok = torch.stack([model.lm_head(h.float()).argmax(-1) == labs[k] for k, h in enumerate(hs)], -1)
            full = mask.all(-1)  # positions where all depths have a target
            run = torch.cumprod(ok.int(), -1)  # a draft counts only if the shallower ones hit
            for k in range(depth):
                hits[k] += int((ok[..., k] & full).sum())
            chain_hits += int((run.sum(-1) * full).sum())
            n += int(full.sum())
    return [h / max(n, 1) for h in hits], chain_hits / max(n * depth, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="folder: config.json + the trunk's weights")
    ap.add_argument("--master", default="models/default", help="folder of the bf16 model.safetensors to patch")
    ap.add_argument("--pair", nargs=2, action="append", required=True, metavar=("PROMPTS", "ANSWERS"),
                    help="a prompts file and the answers `ds4server run --batch` wrote for it (repeatable)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--train-budget", type=float, default=240.0, help="seconds of head training")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--depth-weights", default="1.0,0.8,0.6")
    ap.add_argument("--val", type=int, default=256, help="held-out sequences")
    ap.add_argument("--eval-every", type=int, default=150)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--loops", type=int, default=4000, help="synthetic loop sequences (make_loops)")
    ap.add_argument("--loop-frac", type=float, default=0.3, help="share of loop sequences in a batch")
    args = ap.parse_args()
    t0 = time.time()
    torch.manual_seed(args.seed)
    from safetensors.torch import load_file, save_file
    cfg, model, head = q.load_dir(args.model, args.device)
    widened = q.Widened(model)
    for p in model.parameters():
        p.requires_grad_(False)
    w = [float(v) for v in args.depth_weights.split(",")]
    depth = len(w)
    seqs = read_sequences(args.pair, depth)
    perm = torch.randperm(len(seqs), generator=torch.Generator().manual_seed(args.seed)).tolist()
    n_val = min(args.val, len(seqs) // 10)
    val, train = perm[:n_val], perm[n_val:]
    rng = random.Random(args.seed)
    n_on = len(seqs)
    seqs += make_loops(seqs, train, args.loops, rng) + make_loops(seqs, val, n_val, rng)
    train_loops = list(range(n_on, n_on + args.loops))
    val_loops = list(range(n_on + args.loops, len(seqs)))
    cache = cache_trunk(model, widened, seqs, args.device)
    same = engine_agreement(seqs, cache, range(n_on))
    tokens = sum(len(s[2]) for s in seqs[:n_on])
    print(f"{n_on} sequences, {tokens} answer tokens, {len(seqs) - n_on} loop sequences; torch argmax == "
          f"engine token on {same:.4f}; {time.time() - t0:.0f} s", flush=True)

    def evaluate():
        head.eval()
        agree, acc = chained(model, head, seqs, cache, val, depth, args.device)
        _, acc_loop = chained(model, head, seqs, cache, val_loops, depth, args.device)
        return agree, acc, acc_loop

    before = evaluate()
    print("held-out before: agreement", [round(a, 4) for a in before[0]], "chained", round(before[1], 4),
          "loops", round(before[2], 4), flush=True)

    opt = torch.optim.AdamW([p for p in head.parameters() if p.requires_grad], lr=args.lr, weight_decay=0.0)
    score = lambda e: (e[1] + e[2]) / 2  # noqa: E731  on-policy and loop contexts weigh alike
    best = (score(before), {k: v.detach().clone() for k, v in head.state_dict().items()}, 0)
    step, t_train, log = 0, time.time(), []
    gen = torch.Generator().manual_seed(args.seed + 1)
    while time.time() - t_train < args.train_budget:
        head.train()
        n_loop = int(round(args.batch * args.loop_frac)) if train_loops else 0
        ids = ([train[i] for i in torch.randint(0, len(train), (args.batch - n_loop,), generator=gen).tolist()] +
               [train_loops[i] for i in torch.randint(0, len(train_loops), (n_loop,), generator=gen).tolist()])
        wide, toks, labs, mask = batch_tensors(seqs, cache, ids, depth, args.device)
        with torch.autocast(device_type=args.device.split(":")[0], dtype=torch.bfloat16, enabled=args.device != "cpu"):
            hs = q.mtp_chain(model, head, wide.float(), toks, depth)
            loss = 0.0
            for k, h in enumerate(hs):
                ce = torch.nn.functional.cross_entropy(model.lm_head(h).float().flatten(0, 1), labs[k].flatten(),
                                                       reduction="none").view(mask.shape[:2])
                loss = loss + w[k] * (ce * mask[..., k]).sum() / mask[..., k].sum().clamp(min=1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        frac = min(1.0, (time.time() - t_train) / args.train_budget)
        for g in opt.param_groups:
            g["lr"] = args.lr * (0.05 + 0.95 * 0.5 * (1 + torch.cos(torch.tensor(3.14159265 * frac)).item()))
        opt.step()
        step += 1
        if step % args.eval_every == 0:
            e = evaluate()
            log.append({"step": step, "loss": round(float(loss.detach()), 4), "agreement": [round(a, 4) for a in e[0]],
                        "chained": round(e[1], 4), "loops": round(e[2], 4), "s": round(time.time() - t0, 1)})
            print(json.dumps(log[-1]), flush=True)
            if score(e) > best[0]:
                best = (score(e), {k: v.detach().clone() for k, v in head.state_dict().items()}, step)
    head.load_state_dict(best[1])
    after = evaluate()
    print("held-out best (step", best[2], "): agreement", [round(a, 4) for a in after[0]], "chained",
          round(after[1], 4), "loops", round(after[2], 4), flush=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    orig = load_file(str(Path(args.master) / "model.safetensors"))
    trained = {k: v.detach().cpu().to(torch.bfloat16).contiguous()
               for k, v in q.state_dict(model, head).items() if k.startswith("mtp.")}
    assert set(trained) == {k for k in orig if k.startswith("mtp.")}, "MTP tensor names changed"
    merged = {k: (trained[k] if k in trained else v) for k, v in orig.items()}
    save_file(merged, str(out / "model.safetensors"), metadata={"format": "pt", "note": "ds4server default model, MTP self-distilled"})
    report = {"sequences": len(seqs), "answer_tokens": tokens, "torch_argmax_equals_engine": round(same, 5),
              "steps": step, "best_step": best[2], "before": {"agreement": before[0], "chained": before[1], "loops": before[2]},
              "after": {"agreement": after[0], "chained": after[1], "loops": after[2]}, "log": log, "args": vars(args),
              "seconds": round(time.time() - t0, 1)}
    (out / "distill.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: report[k] for k in ("sequences", "answer_tokens", "steps", "best_step", "seconds")}))


if __name__ == "__main__":
    main()
