#!/usr/bin/env python3
"""Speculative acceptance vectors: one MTPLX draft/verify cycle per case (NumPy port).

Source read: youssofal/MTPLX (golden master for Qwen, SPEC.md §1):
  mtplx/sampling.py
    softmax(), apply_top_p_top_k(), distribution_from_logits()  -> filtered target/draft rows
    acceptance_probability(p, q, tok) = 1 if q<=0<p, 0 if q<=0, else min(1, p/q)
    residual_distribution(p, q)       = max(p-q, 0) over the union support (ids ascending),
                                         normalised; empty -> the target itself
    sample_from_distribution()        -> rng.choice(ids, p=probs): ONE double per draw,
                                         cdf = cumsum(p); cdf /= cdf[-1];
                                         idx = searchsorted(cdf, u, side="right")
  mtplx/generation.py
    _sample_draft_from_logits(): T>0 -> sample the FILTERED draft row with the shared rng
        (q = that filtered row); T<=0 -> argmax, and a one-hot q when the target samples.
    generate_mtpk(), per cycle (the primary is already known: sampled from the previous
        logits or the pending bonus/correction):
        1. drafts d_1..d_k: one draw each, in depth order, BEFORE the verify pass;
        2. verify rows p_1..p_{k+1} (row i scores d_i, row k+1 is the bonus row);
        3. for i in 1..k: u = rng.random(); accept iff u <= accept_prob(p_i, q_i, d_i);
           an accepted stop token ends the loop (no bonus);
           on reject: correction = one draw from residual(p_i, q_i); stop;
        4. all k accepted, no stop among them, room left: bonus = one draw from p_{k+1}.
    Greedy (T<=0): no draws at all; accept iff d_i == argmax p_i, correction = argmax p_i,
        bonus = argmax p_{k+1}.
  Sparse vs dense: MTPLX's sparse rows keep ids ascending (flatnonzero / argsort by id), so
  the choice over the support equals the dense choice over arange(V) (zero entries never
  win searchsorted(side="right")). This port uses dense rows.

Output: tests/data/speculative/mtplx_accept_vectors.json (format: README.md there).
Deterministic: re-running gives a byte-identical file.
"""
import json
import pathlib
import sys

import numpy as np

OUT = pathlib.Path(__file__).resolve().parents[3] / "tests" / "data" / "speculative"


class CountingRng:
    """default_rng(seed) that logs every double it hands out (for the `draws` list)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.log = []

    def random(self, why):
        u = float(self.rng.random())
        self.log.append({"why": why, "u": u})
        return u

    def choice(self, probs, why):
        # numpy Generator.choice(a, p=probs) with a 1-D a: exactly this (one double).
        probs = np.asarray(probs, dtype=np.float64)
        cdf = np.cumsum(probs)
        cdf /= cdf[-1]
        u = self.random(why)
        # Far from every cdf edge: a port that sums in another order draws the same id.
        assert np.min(np.abs(cdf - u)) > 1e-9, (why, u)
        return int(np.searchsorted(cdf, u, side="right"))


def softmax(logits, t):
    x = np.asarray(logits, dtype=np.float32).astype(np.float64)
    if t <= 0:
        out = np.zeros_like(x)
        out[int(np.argmax(x))] = 1.0
        return out
    x = x / float(t)
    x = x - np.max(x)
    e = np.exp(x)
    return e / np.sum(e)


def ranked(values, count):
    ids = np.arange(values.shape[0], dtype=np.int64)
    return np.lexsort((ids, -values))[:count]  # value desc, ties by id


def filtered(logits, t, top_p, top_k):
    """MTPLX distribution_from_logits (no penalties): softmax, top-p then top-k."""
    probs = softmax(logits, t)
    size = probs.shape[0]
    k = int(top_k) if top_k and 0 < int(top_k) < size else 0
    mask = np.ones(size, dtype=bool)
    order_k = ranked(probs, k) if k else None
    if 0 < top_p < 1.0:
        order = order_k if order_k is not None else ranked(probs, size)
        cum = np.cumsum(probs[order])
        before = np.concatenate(([0.0], cum[:-1]))
        keep = np.zeros(size, dtype=bool)
        keep[order[before < top_p]] = True
        mask &= keep
    if k:
        top = np.zeros(size, dtype=bool)
        top[order_k] = True
        mask &= top
    out = np.where(mask, probs, 0.0)
    total = out.sum()
    if total <= 0:
        out[int(np.argmax(probs))] = 1.0
        return out
    return out / total


def accept_prob(p, q, tok):
    pv, qv = float(p[tok]), float(q[tok])
    if qv <= 0:
        return 1.0 if pv > 0 else 0.0
    return min(1.0, pv / qv)


def residual(p, q):
    r = np.maximum(p - q, 0.0)
    r = np.where(np.isfinite(r) & (r > 0), r, 0.0)
    total = r.sum()
    if not np.isfinite(total) or total <= 0:
        r = np.where(p > 0, p, 0.0)
        total = r.sum()
    return r / total


def run_cycle(c):
    """One generate_mtpk cycle; returns the expected outputs of case `c`."""
    t, top_p, top_k = c["temperature"], c["top_p"], c["top_k"]
    draft_t = c.get("draft_temperature", t)
    stop = set(c.get("stop_ids", []))
    rng = CountingRng(int(c["seed"]))
    drows = np.asarray(c["_draft_logits"], dtype=np.float32)
    trows = np.asarray(c["_target_logits"], dtype=np.float32)
    k = drows.shape[0]
    drafts, qs = [], []
    for i in range(k):  # 1. drafts, one draw each (none when the draft sampler is greedy)
        if draft_t > 0:
            q = filtered(drows[i], draft_t, top_p, top_k)
            d = rng.choice(q, f"draft{i}")
        else:
            d = int(np.argmax(drows[i].astype(np.float64)))
            q = np.zeros(drows.shape[1])
            q[d] = 1.0
        drafts.append(d)
        qs.append(q)
    probs, accepted, correction, bonus = [], 0, None, None
    stopped = False
    for i, d in enumerate(drafts):  # 3. accept loop
        if t <= 0:
            tgt = int(np.argmax(trows[i].astype(np.float64)))
            ok = d == tgt
            probs.append(1.0 if ok else 0.0)
            if not ok:
                correction = tgt
        else:
            p = filtered(trows[i], t, top_p, top_k)
            a = accept_prob(p, qs[i], d)
            probs.append(a)
            u = rng.random(f"coin{i}")
            assert a == 1.0 or a == 0.0 or abs(u - a) > 1e-9, (c["name"], i, u, a)
            ok = u <= a
            if not ok:
                correction = rng.choice(residual(p, qs[i]), f"residual{i}")
        if not ok:
            break
        accepted += 1
        if d in stop:
            stopped = True
            break
    if accepted == k and not stopped:  # 4. bonus
        if t <= 0:
            bonus = int(np.argmax(trows[k].astype(np.float64)))
        else:
            bonus = rng.choice(filtered(trows[k], t, top_p, top_k), "bonus")
    emitted = drafts[:accepted] + ([correction] if correction is not None else []) + \
        ([bonus] if bonus is not None else [])
    return {"drafts": drafts, "accept_probs": probs, "accepted": accepted,
            "correction": correction, "bonus": bonus, "emitted": emitted,
            "draws": rng.log, "next_double": float(rng.rng.random()),
            "draft_q0": sparse(qs[0]), "target_p0": sparse(filtered(trows[0], t, top_p, top_k))
            if t > 0 else None}


def sparse(dist):
    nz = np.flatnonzero(dist)
    return {"ids": [int(i) for i in nz], "p": [float(dist[i]) for i in nz]}


def f32list(a):
    return [float(x) if np.isfinite(x) else None for x in np.asarray(a, dtype=np.float32)]


def q64(a):
    return (np.round(np.asarray(a) * 64.0) / 64.0).astype(np.float32)  # exact in float32


def make_cases():
    rs = np.random.RandomState(2026)  # only makes logits; not part of the sampler
    V = 48
    cases = []

    def base(name, k, seed, t=1.0, top_p=0.95, top_k=20, **extra):
        c = {"name": name, "temperature": t, "top_p": top_p, "top_k": top_k,
             "seed": str(seed), "vocab": V, "depth": k}
        c.update(extra)
        return c

    def spread(n, scale=1.5):
        return q64(rs.standard_normal((n, V)) * scale)

    # Point-mass rows: the draft row is certain of token a (top-p keeps one id), the target
    # row is either certain of a too (accept with probability 1) or puts a outside its
    # top-k support (-inf), so acceptance is 0 and the residual is the target row itself.
    def certain(row, tok):
        row = row.copy()
        row[tok] = np.float32(40.0)
        return row

    def exclude(row, tok):
        row = row.copy()
        row[tok] = -np.inf
        return row

    k = 3
    favs = [5, 17, 29]
    d = np.stack([certain(r, favs[i]) for i, r in enumerate(spread(k))])
    tgt = spread(k + 1)
    tgt_all = np.stack([certain(tgt[i], favs[i]) for i in range(k)] + [tgt[k]])
    cases.append(base("accept_all_bonus", k, 12345, _draft_logits=d, _target_logits=tgt_all))
    for j in range(k):
        rows = [certain(tgt[i], favs[i]) if i < j else tgt[i] for i in range(k)] + [tgt[k]]
        rows[j] = exclude(tgt[j], favs[j])
        cases.append(base(f"reject_slot{j}", k, 12345 + j, _draft_logits=d,
                          _target_logits=np.stack(rows)))
    # Overlapping spread rows: real min(1, p/q) coins and residual draws. Seeds picked so that
    # the set covers partial acceptance at every depth (see the README's case table).
    dk = spread(4, 1.2)
    tk = q64(np.concatenate([dk[:, :] + q64(rs.standard_normal((4, V)) * 0.9),
                             spread(1)]))
    for seed in [12345, 2**32 + 5]:
        cases.append(base(f"stochastic_seed{seed}", 4, seed, _draft_logits=dk, _target_logits=tk))
    # The first seed (1, 2, ...) whose cycle accepts exactly n drafts, for n = 0..4: a
    # coin rejection (and residual draw) at every depth, and one full acceptance.
    for n in range(5):
        seed = next(s for s in range(1, 10000) if run_cycle(
            base("", 4, s, _draft_logits=dk, _target_logits=tk))["accepted"] == n)
        cases.append(base(f"stochastic_accept{n}", 4, seed, _draft_logits=dk, _target_logits=tk))
    cases.append(base("stochastic_hot", 4, 4242, t=1.6, top_p=0.9, top_k=30,
                      _draft_logits=dk, _target_logits=tk))
    cases.append(base("stochastic_topk_only", 4, 5, t=0.8, top_p=1.0, top_k=8,
                      _draft_logits=dk, _target_logits=tk))
    cases.append(base("stochastic_no_filter", 4, 6, t=1.0, top_p=1.0, top_k=0,
                      _draft_logits=dk, _target_logits=tk))
    # Draft sampler greedy, target stochastic: q is one-hot, accept prob = p(d), residual =
    # p without d (MTPLX _sample_draft_from_logits need_distribution=True).
    cases.append(base("point_mass_draft", 4, 2024, draft_temperature=0.0,
                      _draft_logits=dk, _target_logits=tk))
    # Accepted stop token inside the draft: the loop ends there, no bonus, no correction.
    stop_rows = np.stack([certain(tgt[i], favs[i]) for i in range(k)] + [tgt[k]])
    cases.append(base("stop_in_draft", k, 77, stop_ids=[favs[1]], _draft_logits=d,
                      _target_logits=stop_rows))
    # Greedy: no draws; argmax compare, correction = target argmax, bonus = argmax.
    g_t = np.stack([certain(tk[i], int(np.argmax(dk[i]))) for i in range(4)] + [tk[4]])
    g_t[2] = certain(tk[2], (int(np.argmax(dk[2])) + 1) % V)  # depth 3 disagrees
    cases.append(base("greedy_reject_slot2", 4, 12345, t=0.0, _draft_logits=dk,
                      _target_logits=g_t))
    g_all = np.stack([certain(tk[i], int(np.argmax(dk[i]))) for i in range(4)] + [tk[4]])
    cases.append(base("greedy_accept_all", 4, 12345, t=0.0, _draft_logits=dk,
                      _target_logits=g_all))
    # Depth 1 and depth 5 (SPEC.md §2 range D1..D5).
    cases.append(base("depth1", 1, 3, _draft_logits=dk[:1], _target_logits=tk[:2]))
    d5 = spread(5, 1.2)
    t5 = q64(np.concatenate([d5 + q64(rs.standard_normal((5, V)) * 0.5), spread(1)]))
    seed5 = next(s for s in range(1, 10000) if run_cycle(
        base("", 5, s, _draft_logits=d5, _target_logits=t5))["accepted"] == 4)
    cases.append(base("depth5", 5, seed5, _draft_logits=d5, _target_logits=t5))
    return cases


def main():
    cases = []
    for c in make_cases():
        exp = run_cycle(c)
        out = {key: v for key, v in c.items() if not key.startswith("_")}
        out["draft_logits"] = [f32list(r) for r in c["_draft_logits"]]
        out["target_logits"] = [f32list(r) for r in c["_target_logits"]]
        out["expected"] = exp
        cases.append(out)
    doc = {"source": "NumPy port of youssofal/MTPLX generate_mtpk accept loop "
                     "(tools/reference/speculative/gen_accept_vectors.py)",
           "numpy": np.__version__, "cases": cases}
    OUT.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=None, separators=(",", ":"), sort_keys=False) + "\n"
    (OUT / "mtplx_accept_vectors.json").write_text(text)
    for c in cases:
        e = c["expected"]
        print(f'{c["name"]:24s} drafts={e["drafts"]} acc={e["accepted"]} '
              f'corr={e["correction"]} bonus={e["bonus"]} draws={len(e["draws"])}',
              file=sys.stderr)


if __name__ == "__main__":
    main()
