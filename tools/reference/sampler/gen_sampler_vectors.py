#!/usr/bin/env python3
"""Sampler reference vectors for both golden-master samplers (SPEC.md §2).

Qwen path (MTPLX): NumPy `default_rng(seed)` (SeedSequence -> PCG64), softmax in float64,
top-p *then* top-k with ties broken by vocabulary id, one `Generator.choice(p=...)` draw per
token. Semantics read from youssofal/MTPLX mtplx/sampling.py:
  softmax()                    -> float64, logits/T minus max, exp, / sum
  deterministic_top_k_order()  -> order by (-prob, id)
  apply_top_p_top_k()          -> keep ranked[i] while the cumulative mass *before* it < top_p,
                                  intersect with the top-k set, renormalise; empty -> argmax
  sample_from_distribution()   -> probs / probs.sum(), rng.choice(arange(V), p=probs)
NumPy's Generator.choice with p: cdf = cumsum(p); cdf /= cdf[-1]; u = random();
idx = searchsorted(cdf, u, side="right") (one double per draw).

ds4 path: a NumPy port of antirez/ds4 ds4.c sample_top_p_min_p() / sample_full_vocab() /
sample_rng_next() / sample_rng_f32(), float32 arithmetic like the C code (expf, float sums).

Output: tests/data/sampler/{qwen_vectors.json, ds4_vectors.json, pcg64_vectors.json}.
Deterministic: re-running gives byte-identical files (numpy version recorded in each file).
"""
import json
import math
import pathlib
import sys

import numpy as np

OUT = pathlib.Path(__file__).resolve().parents[3] / "tests" / "data" / "sampler"
M64 = (1 << 64) - 1

# ---------------------------------------------------------------- raw generator vectors


def pcg64_vectors():
    cases = []
    for seed in [0, 1, 42, 12345, 2**32 + 5, 2**64 - 1, 2**100 + 3]:
        ss = np.random.SeedSequence(seed)
        state_u32 = [int(x) for x in ss.generate_state(8, np.uint32)]
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
        raw = [str(int(x)) for x in rng.bit_generator.random_raw(6)]
        rng = np.random.default_rng(seed)
        doubles = [float(rng.random()) for _ in range(6)]
        cases.append({"seed": str(seed), "seedseq_state_u32": state_u32, "raw_u64": raw,
                      "doubles": doubles})
    return cases

# ---------------------------------------------------------------- MTPLX (Qwen) sampler


def mtplx_softmax(logits, temperature):
    logits = np.asarray(logits, dtype=np.float64)
    if temperature <= 0:
        out = np.zeros_like(logits)
        out[int(np.argmax(logits))] = 1.0
        return out
    scaled = logits / float(temperature)
    scaled = scaled - np.max(scaled)
    e = np.exp(scaled)
    return e / np.sum(e)


def ranked_ids(values, count):
    ids = np.arange(values.shape[0], dtype=np.int64)
    order = np.lexsort((ids, -values))  # ties by vocabulary id
    return order[:count]


def mtplx_filter(probs, top_p, top_k):
    size = probs.shape[0]
    k = int(top_k) if top_k and 0 < int(top_k) < size else 0
    mask = np.ones(size, dtype=bool)
    ranked = ranked_ids(probs, k) if k else None
    if 0 < top_p < 1.0:
        order = ranked if ranked is not None else ranked_ids(probs, size)
        cum = np.cumsum(probs[order])
        before = np.concatenate(([0.0], cum[:-1]))
        nucleus = np.zeros(size, dtype=bool)
        nucleus[order[before < top_p]] = True
        mask &= nucleus
    if k:
        top = np.zeros(size, dtype=bool)
        top[ranked] = True
        mask &= top
    filtered = np.where(mask, probs, 0.0)
    total = filtered.sum()
    if total <= 0:
        filtered[int(np.argmax(probs))] = 1.0
        return filtered
    return filtered / total


def mtplx_sample(rng, logits, t, top_p, top_k):
    probs = mtplx_filter(mtplx_softmax(logits, t), top_p, top_k)
    probs = probs / probs.sum()
    return int(rng.choice(np.arange(probs.shape[0]), p=probs)), probs


def f32list(a):
    # JSON has no infinities: -inf logits are written as null.
    return [float(x) if np.isfinite(x) else None for x in np.asarray(a, dtype=np.float32)]


def logits_rows(rs, steps, vocab, kind):
    # Multiples of 1/64: exact in float32 and short in JSON.
    rows = (np.round(rs.standard_normal((steps, vocab)) * 3.0 * 64.0) / 64.0).astype(np.float32)
    if kind == "ties":
        rows = np.round(rows).astype(np.float32)  # many exact ties
    if kind == "peaked":
        rows[:, 7] += np.float32(12.0)
    if kind == "neg_inf":
        rows[:, ::3] = -np.inf
    return rows


def qwen_cases():
    rs = np.random.RandomState(7)  # only for making logits, not part of the sampler
    specs = [
        # name, T, top_p, top_k, seed, vocab, kind
        ("defaults", 1.0, 0.95, 20, 12345, 300, "normal"),
        ("ties", 1.0, 0.95, 20, 12345, 64, "ties"),
        ("hot_T", 1.7, 0.9, 50, 1, 200, "normal"),
        ("cold_T", 0.3, 1.0, 0, 99, 200, "normal"),
        ("topk_only", 1.0, 1.0, 5, 2024, 100, "normal"),
        ("topp_only", 0.8, 0.5, 0, 7, 100, "normal"),
        ("peaked", 1.0, 0.95, 20, 12345, 128, "peaked"),
        ("seed0", 1.0, 0.95, 20, 0, 128, "normal"),
        ("big_seed", 1.0, 0.95, 20, 2**64 + 17, 128, "normal"),
        ("neg_inf", 1.0, 0.95, 20, 12345, 90, "neg_inf"),
        ("greedy", 0.0, 0.95, 20, 12345, 64, "ties"),
    ]
    cases = []
    for name, t, top_p, top_k, seed, vocab, kind in specs:
        rows = logits_rows(rs, 12, vocab, kind)
        rng = np.random.default_rng(seed)
        ids, first_probs = [], None
        for r in rows:
            if t <= 0:
                ids.append(int(np.argmax(r.astype(np.float64))))  # MTPLX greedy: argmax, no draw
                continue
            tok, probs = mtplx_sample(rng, r, t, top_p, top_k)
            ids.append(tok)
            if first_probs is None:
                first_probs = probs
        case = {"name": name, "temperature": t, "top_p": top_p, "top_k": top_k,
                "seed": str(seed), "vocab": vocab,
                "logits": [f32list(r) for r in rows], "ids": ids}
        if first_probs is not None:
            nz = np.flatnonzero(first_probs)
            case["first_probs"] = {"ids": [int(i) for i in nz],
                                   "p": [float(first_probs[i]) for i in nz]}
        cases.append(case)
    return cases

# ---------------------------------------------------------------- ds4 sampler (float32)

F = np.float32


def ds4_rng_next(state):
    # ds4.c sample_rng_next(): xorshift64* with a fixed non-zero replacement for state 0.
    x = state
    if x == 0:
        x = 0x9E3779B97F4A7C15
    x ^= x >> 12
    x ^= (x << 25) & M64
    x ^= x >> 27
    return x, (x * 0x2545F4914F6CDD1D) & M64


def ds4_rng_f32(state):
    # ds4.c sample_rng_f32(): top 24 bits of the output / 2^24, in float.
    state, out = ds4_rng_next(state)
    return state, F((out >> 40) & 0xFFFFFF) / F(16777216.0)


def expf(x):
    return F(math.exp(float(F(x))))


def ds4_argmax(logits):
    best, best_v = 0, -np.inf
    for i, v in enumerate(logits):
        if v > best_v:
            best, best_v = i, v
    return best


def ds4_full_vocab(logits, t, top_p, min_p, state):
    # ds4.c sample_full_vocab()
    finite = [i for i, v in enumerate(logits) if np.isfinite(v)]
    if not finite:
        return ds4_argmax(logits), state
    best, max_logit = 0, F(-np.inf)
    for i in finite:
        if logits[i] > max_logit:
            max_logit, best = logits[i], i
    if top_p >= 1.0:
        min_rel = F(min_p if min_p > 0 else 0)
        total = F(0)
        for i in finite:
            p = expf((logits[i] - max_logit) / F(t))
            if p < min_rel:
                continue
            total = F(total + p)
        if total <= 0 or not np.isfinite(total):
            return best, state
        state, u = ds4_rng_f32(state)
        r = F(u * total)
        for i in finite:
            p = expf((logits[i] - max_logit) / F(t))
            if p < min_rel:
                continue
            r = F(r - p)
            if r <= 0:
                return i, state
        return best, state
    cand = []
    total = F(0)
    for i in finite:
        p = expf((logits[i] - max_logit) / F(t))
        cand.append((i, logits[i], p))
        total = F(total + p)
    if total <= 0 or not np.isfinite(total):
        return best, state
    cand.sort(key=lambda c: -float(c[1]))  # stable: glibc qsort (mergesort) keeps id order
    min_prob = F(F(cand[0][2] / total) * F(min_p if min_p > 0 else 0))
    fsum, n = F(0), 0
    for i, (_, _, p) in enumerate(cand):
        if i > 0 and F(p / total) < min_prob:
            break
        fsum = F(fsum + p)
        n += 1
        if F(fsum / total) >= F(top_p):
            break
    state, u = ds4_rng_f32(state)
    r = F(u * fsum)
    for i in range(n):
        r = F(r - cand[i][2])
        if r <= 0:
            return cand[i][0], state
    return cand[n - 1][0], state


def ds4_sample(logits, t, top_k, top_p, min_p, state):
    # ds4.c sample_top_p_min_p()
    logits = [F(v) for v in logits]
    if t <= 0:
        return ds4_argmax(logits), state
    if top_p <= 0 or top_p > 1:
        top_p = 1.0
    if min_p < 0:
        min_p = 0.0
    if top_k <= 0:
        return ds4_full_vocab(logits, t, top_p, min_p, state)
    top_k = min(top_k, 1024, len(logits))
    ids, vals = [], []
    for i, v in enumerate(logits):  # bounded insertion list: equal values keep id order
        if not np.isfinite(v):
            continue
        if len(vals) == top_k and v <= vals[-1]:
            continue
        if len(vals) == top_k:
            vals.pop()
            ids.pop()
        j = len(vals)
        while j > 0 and vals[j - 1] < v:
            j -= 1
        vals.insert(j, v)
        ids.insert(j, i)
    if not ids:
        return ds4_argmax(logits), state
    probs = [expf((v - vals[0]) / F(t)) for v in vals]
    total = F(0)
    for p in probs:
        total = F(total + p)
    if total <= 0 or not np.isfinite(total):
        return ids[0], state
    min_prob = F(F(probs[0] / total) * F(min_p))
    fsum, n = F(0), 0
    for i, p in enumerate(probs):
        if i > 0 and F(p / total) < min_prob:
            break
        fsum = F(fsum + p)
        n += 1
        if F(fsum / total) >= F(top_p):
            break
    state, u = ds4_rng_f32(state)
    r = F(u * fsum)
    for i in range(n):
        r = F(r - probs[i])
        if r <= 0:
            return ids[i], state
    return ids[n - 1], state


def ds4_cases():
    rs = np.random.RandomState(11)
    specs = [
        # name, T, top_k, top_p, min_p, seed, vocab, kind
        ("ds4_defaults", 1.0, 0, 1.0, 0.05, 12345, 300, "normal"),
        ("server_topk", 1.0, 40, 0.95, 0.05, 7, 300, "normal"),
        ("ties_topk", 1.0, 8, 1.0, 0.0, 3, 64, "ties"),
        ("ties_full_topp", 0.9, 0, 0.9, 0.0, 3, 64, "ties"),
        ("seed0", 1.0, 20, 0.95, 0.0, 0, 128, "normal"),
        ("min_p_high", 1.0, 0, 1.0, 0.5, 99, 128, "normal"),
        ("neg_inf", 0.7, 30, 0.9, 0.1, 5, 90, "neg_inf"),
        ("topk_big", 1.3, 2000, 1.0, 0.0, 123, 1500, "normal"),
        ("greedy_ties", 0.0, 20, 0.95, 0.05, 1, 64, "ties"),
        ("bad_top_p", 1.0, 0, 1.5, -1.0, 77, 64, "normal"),
    ]
    cases = []
    for name, t, top_k, top_p, min_p, seed, vocab, kind in specs:
        rows = logits_rows(rs, 10 if vocab > 1000 else 14, vocab, kind)
        state = seed
        ids, states = [], []
        for r in rows:
            tok, state = ds4_sample(list(r), t, top_k, top_p, min_p, state)
            ids.append(tok)
            states.append(str(state))
        cases.append({"name": name, "temperature": t, "top_k": top_k, "top_p": top_p,
                      "min_p": min_p, "seed": str(seed), "vocab": vocab,
                      "logits": [f32list(r) for r in rows], "ids": ids, "rng_states": states})
    return cases


def dump(name, payload):
    payload = {"generator": "tools/reference/sampler/gen_sampler_vectors.py",
               "numpy": np.__version__, **payload}
    (OUT / name).write_text(json.dumps(payload, separators=(",", ":"), allow_nan=False) + "\n")


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    dump("pcg64_vectors.json", {"cases": pcg64_vectors()})
    dump("qwen_vectors.json", {"cases": qwen_cases()})
    dump("ds4_vectors.json", {"cases": ds4_cases()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
