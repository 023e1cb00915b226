"""glm5 (GLM 5.x Flash, HF `glm5_next`) for the reference fuzzer (see ../common.py).

Every field Glm5NextTextModel reads (transformers 5.25, modeling_glm5_next.py) is drawn here:
  shapes      vocab_size, hidden_size, intermediate_size, moe_intermediate_size,
              num_hidden_layers, num_attention_heads (= num_key_value_heads, HF requires it),
              q_lora_rank, kv_lora_rank, qk_nope_head_dim, v_head_dim (qk_rope_head_dim = 0:
              HF refuses RoPE), index_n_heads, index_head_dim, linear_num_heads,
              linear_head_dim, linear_conv_kernel_dim, hc_mult
  schedules   layer_types (KDA "linear_attention" / DSA "indexed_attention", any order, in any
              spelling 5.17..5.25 load), mlp_layer_types, indexer_types (or the
              index_topk_pattern / index_topk_freq / index_skip_topk_offset forms)
  DSA         index_topk, index_kpool (budget = topk / kpool pools, small against the prompt),
              index_kpool_always_select_tail (true; false is refused, see config.cpp)
  MoE         n_routed_experts (or num_local_experts), n_shared_experts, num_experts_per_tok,
              n_group, topk_group, routed_scaling_factor, norm_topk_prob, swiglu_limit
  KDA         linear_lower_bound (a float or null: the softplus gate), or linear_attn_config
  HC          hc_mult, hc_sinkhorn_iters, hc_eps; rms_norm_eps
  head        tie_word_embeddings (then the checkpoint has no lm_head.weight)
  fixed       hidden_act silu, attention_bias false (both refused otherwise, see config.cpp),
              attention_dropout (eval), initializer_range / pad_token_id (init only)
The checkpoint is written flat or in the multimodal layout (text_config + model.language_model.),
optionally with an integrated MTP layer (tools/reference/glm5/mtp_ref.py), which must not change
the trunk's logits.

Selections that float noise may flip: the DSA indexer keeps the top pools and the router the
top experts, both by float scores. Exact ties (ReLU-zero pool scores, common with few indexer
heads; repeated tokens under index_kpool 1) are broken by the lower index on both sides
(_LowerIndexTopk). A prompt whose selection boundary (in any row of the reference pass over
prompt + greedy tokens) has a nonzero relative gap below SELECT_GAP is redrawn (prompt()):
HF and we sum in different orders, so such a boundary is a coin toss, not a bug. Most models
also get indexer weights that keep scores off the ReLU zeros (_positive_indexer).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "glm5"))  # make_tiny, mtp_ref

FAMILY = "glm5"
TOLERANCE = 1e-3
SELECT_GAP = 5e-6     # relative gap at a top-k boundary below which a prompt is redrawn
PROMPT_TRIES = 6

LINEAR_NAMES = ("linear_attention", "linear_attention", "mamba")          # 5.25 remaps mamba
INDEXED_NAMES = ("indexed_attention", "full_attention", "deepseek_sparse_attention",
                 "qwen_sparse_attention")                                 # all load as DSA


def _layer_kinds(rng, n):
    """True = DSA layer. Orders: random, all one kind, the single other kind first / last."""
    mode = rng.choice(["random", "random", "all_dsa", "all_kda", "one_dsa", "one_kda", "dsa_ends", "kda_ends"])
    if mode == "all_dsa":
        return [True] * n
    if mode == "all_kda":
        return [False] * n
    if mode in ("one_dsa", "one_kda"):
        k = [mode == "one_kda"] * n
        k[int(rng.choice([0, n - 1, rng.integers(n)]))] = mode == "one_dsa"
        return k
    if mode in ("dsa_ends", "kda_ends"):
        k = [mode == "kda_ends"] * n
        k[0] = k[-1] = mode == "dsa_ends"
        return k
    return [bool(rng.random() < 0.5) for _ in range(n)]


def _indexer_types(rng, kinds):
    """'shared' only on a DSA layer right after a full DSA layer (HF passes top-k only there)."""
    out = []
    for l, dsa in enumerate(kinds):
        can_share = dsa and l > 0 and kinds[l - 1] and out[l - 1] == "full"
        if dsa:
            out.append("shared" if can_share and rng.random() < 0.5 else "full")
        else:
            out.append(str(rng.choice(["full", "shared"])))  # ignored by KDA layers
    return out


def _valid_sharing(kinds, itypes):
    return all(not (d and t == "shared") or (l > 0 and kinds[l - 1] and itypes[l - 1] == "full")
               for l, (d, t) in enumerate(zip(kinds, itypes)))


def _freq_schedule(n, freq, offset):
    """HF's default indexer_types from index_topk_freq / index_skip_topk_offset."""
    freq = max(freq, 1)
    return ["full" if (max(i - offset + 1, 0) % freq) == 0 else "shared" for i in range(n)]


def random_config(rng) -> dict:
    n = int(rng.integers(1, 7))
    kinds = _layer_kinds(rng, n)
    H = int(rng.choice([16, 24, 32, 48, 64]))
    E = int(rng.integers(2, 9))
    groups = [g for g in range(1, E + 1) if E % g == 0 and E // g >= 2]
    G = int(rng.choice(groups))
    tg = int(rng.integers(1, G + 1))
    k = int(rng.integers(1, min(E, tg * (E // G)) + 1))
    kpool = int(rng.choice([1, 2, 3, 4, 4, 5, 8, 16]))
    budget = int(rng.choice([1, 2, 3, 4, 6, 8, 16, 40]))
    heads = int(rng.integers(1, 5))
    cfg = dict(
        # Mostly small vocabularies: the corpus stores {13, vocab} f32 rows per length.
        vocab_size=int(rng.integers(32, 161) if rng.random() < 0.6 else rng.integers(161, 513)), hidden_size=H,
        intermediate_size=int(rng.integers(8, 65)), moe_intermediate_size=int(rng.integers(4, 25)),
        num_hidden_layers=n, num_attention_heads=heads, num_key_value_heads=heads,
        n_shared_experts=int(rng.choice([0, 1, 1, 1, 2])), n_routed_experts=E, num_experts_per_tok=k,
        n_group=G, topk_group=tg, routed_scaling_factor=float(np.round(rng.uniform(0.5, 3.0), 3)),
        norm_topk_prob=bool(rng.random() < 0.7),
        kv_lora_rank=int(rng.choice([4, 8, 16, 24, 32])), q_lora_rank=int(rng.choice([4, 8, 16, 32, 48])),
        qk_rope_head_dim=0, qk_nope_head_dim=int(rng.choice([4, 8, 16, 32])),
        v_head_dim=int(rng.choice([4, 8, 16, 32])),
        hidden_act="silu", attention_bias=False, max_position_embeddings=4096,
        rms_norm_eps=float(rng.choice([1e-5, 1e-6])), pad_token_id=None, bos_token_id=None,
        eos_token_id=None, tie_word_embeddings=bool(rng.random() < 0.1),
        index_topk=kpool * budget, index_head_dim=int(rng.choice([4, 8, 16])),
        index_n_heads=int(rng.integers(1, 9)), index_kpool=kpool, index_kpool_always_select_tail=True,
        swiglu_limit=float(np.round(rng.choice([0.7, 1.5, 3.0, 10.0]), 3)),
        hc_mult=int(rng.integers(1, 5)), hc_eps=float(rng.choice([1e-6, 1e-4])),
        hc_sinkhorn_iters=int(rng.choice([0, 1, 2, 5, 20, 20])), initializer_range=0.08,
    )
    # KDA: flat fields or the linear_attn_config dict; a float lower bound or the softplus gate.
    lin = dict(head_dim=int(rng.choice([4, 8, 16])), num_heads=int(rng.integers(1, 5)),
               short_conv_kernel_size=int(rng.choice([1, 2, 3, 4, 4, 5])))
    lb = None if rng.random() < 0.3 else float(rng.choice([-5.0, -5.0, -2.0, -8.0]))
    if rng.random() < 0.25:
        la = dict(lin)
        if lb is None:
            la["gate_lower_bound"], la["safe_gate"] = None, False
        else:
            la["gate_lower_bound"] = lb
        cfg["linear_attn_config"] = la
    else:
        cfg.update(linear_head_dim=lin["head_dim"], linear_num_heads=lin["num_heads"],
                   linear_conv_kernel_dim=lin["short_conv_kernel_size"], linear_lower_bound=lb)
    # Schedules, sometimes left to HF's defaults or written in an older spelling.
    default_kinds = [i % 4 == 3 for i in range(n)]
    if rng.random() < 0.15:
        kinds = default_kinds  # layer_types omitted
    else:
        cfg["layer_types"] = [str(rng.choice(INDEXED_NAMES if d else LINEAR_NAMES)) for d in kinds]
    if rng.random() < 0.15:
        pass  # mlp_layer_types omitted: 3 dense layers, then sparse
    else:
        cfg["mlp_layer_types"] = [str(rng.choice(["dense", "sparse"])) for _ in range(n)]
    itypes = _indexer_types(rng, kinds)
    form = rng.choice(["list", "list", "pattern", "freq", "omit"])
    freq, offset = int(rng.integers(1, 4)), int(rng.integers(0, 4))
    if form == "freq" and _valid_sharing(kinds, _freq_schedule(n, freq, offset)):
        cfg["index_topk_freq"], cfg["index_skip_topk_offset"] = freq, offset
    elif form == "omit" and _valid_sharing(kinds, _freq_schedule(n, 1, 2)):
        pass
    elif form == "pattern":
        cfg["index_topk_pattern"] = "".join("S" if t == "shared" else "F" for t in itypes)
    else:
        cfg["indexer_types"] = itypes
    # mtp_ref's init cannot fill empty tensors: no MTP layer without a shared expert.
    cfg["_fuzz"] = dict(nested=bool(rng.random() < 0.3), mtp=bool(rng.random() < 0.2) and cfg["n_shared_experts"] > 0,
                        seed_mtp=int(rng.integers(1 << 30)), positive_indexer=bool(rng.random() < 0.6))
    return cfg


def boundaries(cfg: dict) -> list[int]:
    """Prompt lengths at this config's edges: the dense/sparse switch (the first row whose
    visible complete pools exceed the budget sits at position index_topk + index_kpool - 1:
    a prompt one shorter is dense and its first decode step sparse), pool multiples around
    it, KDA's 64-token chunks (HF's prefill form), the conv window."""
    kp, topk = cfg["index_kpool"], cfg["index_topk"]
    conv = cfg.get("linear_conv_kernel_dim", cfg.get("linear_attn_config", {}).get("short_conv_kernel_size", 4))
    switch = topk + kp - 1
    out = {switch, switch + 1, topk, 2 * topk + kp, 3 * kp, 64, 65, 128, 129, conv, conv + 1}
    out |= {m * kp for m in range(1, 4)}
    return sorted(b for b in out if b >= 1)


# ---- model ------------------------------------------------------------------------------


def _hf_kwargs(cfg: dict) -> dict:
    return {k: v for k, v in cfg.items() if not k.startswith("_")}


class Model:
    """The text half of Glm5NextForConditionalGeneration: Glm5NextTextModel + lm_head."""

    def __init__(self, hf_cfg, text, lm_head, mtp=None):
        self.cfg, self.text, self.lm_head, self.mtp = hf_cfg, text, lm_head, mtp


def _positive_indexer(model, g):
    """Indexer scores kept away from ReLU zeros, whose ties torch.topk orders its own way: a
    constant channel 0 in the embeddings makes every q_resid row mostly positive; wq_b turns
    that into a query along a direction u that the key-norm bias puts into every pool key,
    and weights_proj makes the head weights positive. Pools still differ by the random parts."""
    import torch
    emb = model.embed_tokens.weight
    emb[:, 0] = 3.0
    for layer in model.layers:
        idx = getattr(layer.self_attn, "indexer", None)
        attn = layer.self_attn
        if not hasattr(attn, "q_a_proj"):
            continue
        attn.q_a_proj.weight[:, 0] = 1.0 + 0.2 * torch.rand(attn.q_a_proj.weight.shape[0], generator=g)
        if idx is None:
            continue
        D, R = idx.head_dim, idx.q_lora_rank
        u = torch.randn(D, generator=g)
        u /= u.norm()
        wq = idx.wq_b.weight.view(idx.n_heads, D, R)
        wq.copy_(u[None, :, None] / R ** 0.5 + 0.3 / R ** 0.5 * torch.randn(wq.shape, generator=g))
        idx.k_norm.bias.copy_(2.5 * u * D ** 0.5 + 0.1 * torch.randn(D, generator=g))
        idx.weights_proj.weight[:, 0] = 1.0 + 0.2 * torch.rand(idx.n_heads, generator=g)


def _bf16(name: str, t) -> bool:
    """Stored as BF16: the matrices, except those HF keeps in f32 (router, conv)."""
    return t.dim() >= 2 and "conv1d" not in name and not name.endswith("mlp.gate.weight")


def build(cfg: dict, seed: int) -> Model:
    import torch
    from transformers.models.glm5_next.configuration_glm5_next import Glm5NextTextConfig
    from transformers.models.glm5_next.modeling_glm5_next import Glm5NextTextModel
    from make_tiny import randomize_constants
    torch.manual_seed(seed)
    hf_cfg = Glm5NextTextConfig(**_hf_kwargs(cfg))
    hf_cfg._attn_implementation = "eager"
    text = Glm5NextTextModel(hf_cfg).float().eval()
    # The default grouped_mm experts need 16-byte strides (dims multiple of 4): the eager loop
    # computes the same for any shape.
    hf_cfg._experts_implementation = "eager"
    lm_head = torch.nn.Linear(hf_cfg.hidden_size, hf_cfg.vocab_size, bias=False)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        randomize_constants(text, g, hf_cfg.n_routed_experts)  # make_tiny's (no constant parameters)
        # Logit scale: top-2 margins far above float noise (hidden <= 64, normed output ~1).
        lm_head.weight.copy_(0.5 * torch.randn(lm_head.weight.shape, generator=g))
        text.embed_tokens.weight.copy_(torch.randn(text.embed_tokens.weight.shape, generator=g))
        if cfg.get("_fuzz", {}).get("positive_indexer"):
            _positive_indexer(text, g)
        if hf_cfg.tie_word_embeddings:  # Glm5NextForConditionalGeneration ties lm_head to them
            lm_head.weight.copy_(text.embed_tokens.weight)
        # Matrices bf16-representable and saved as BF16 like a real checkpoint (half the corpus
        # bytes, and our BF16 loading path in every case); the reference computes in f32.
        for name, p in list(text.named_parameters()) + [("lm_head.weight", lm_head.weight)]:
            if _bf16(name, p):
                p.copy_(p.to(torch.bfloat16).float())
    mtp = None
    if cfg.get("_fuzz", {}).get("mtp"):
        from mtp_ref import MTPHead, init_head
        torch.manual_seed(cfg["_fuzz"]["seed_mtp"])
        mtp = MTPHead(hf_cfg).float().eval()
        init_head(mtp, cfg["_fuzz"]["seed_mtp"] + 1, hf_cfg.n_routed_experts)
    m = Model(hf_cfg, text, lm_head, mtp)
    _MODELS.clear()  # one case at a time per process (fuzz.py workers, corpus.py)
    _MODELS[id(cfg)] = m
    return m


def save(model: Model, cfg: dict, out_dir) -> None:
    """config.json in the spelling random_config chose (flat, or nested under text_config with
    the multimodal tensor prefix) + model.safetensors (+ the MTP layer's tensors)."""
    from safetensors.torch import save_file
    out_dir = Path(out_dir)
    extra = cfg.get("_fuzz", {})
    text_cfg = _hf_kwargs(cfg)
    if extra.get("nested"):
        conf = {"model_type": "glm5_next", "architectures": ["Glm5NextForConditionalGeneration"],
                "text_config": dict(text_cfg, model_type="glm5_next_text"), "torch_dtype": "float32"}
        prefix = "model.language_model."
    else:
        conf = dict(text_cfg, model_type="glm5_next", architectures=["Glm5NextForConditionalGeneration"],
                    torch_dtype="float32")
        prefix = "model."
    (out_dir / "config.json").write_text(json.dumps(conf, indent=1, sort_keys=True) + "\n")
    import torch

    def stored(name, v):
        v = v.detach().contiguous().float()
        return v.to(torch.bfloat16) if _bf16(name, v) else v
    sd = {prefix + k: stored(k, v) for k, v in model.text.state_dict().items()}
    if not model.cfg.tie_word_embeddings:  # tied: the checkpoint leaves lm_head out
        sd["lm_head.weight"] = stored("lm_head.weight", model.lm_head.weight)
    if model.mtp is not None:
        for k, v in model.mtp.saved_state(model.cfg.num_hidden_layers).items():
            sd[prefix + k[len("model."):]] = stored(k, v)
    save_file(sd, str(out_dir / "model.safetensors"), metadata={"format": "pt"})


# ---- reference --------------------------------------------------------------------------

_MODELS: dict[int, Model] = {}   # build() -> prompt(): the model of this cfg (one case per process)
_CACHE: dict[bytes, tuple] = {}  # prompt() -> reference(): the result for the ids it chose


class _LowerIndexTopk:
    """torch.topk leaves the order of equal values undefined (HF's indexer and router call it);
    inside this context equal values keep the lower index first, the rule our kernels use
    (src/backend/cpu/topk.h), so exact ties (ReLU-zero pool scores, repeated tokens under
    index_kpool 1) select the same candidates on both sides."""

    def __enter__(self):
        import torch
        self.fn, self.method = torch.topk, torch.Tensor.topk

        def topk(x, k, dim=-1, largest=True, sorted=True, *, out=None):  # noqa: A002
            v, i = torch.sort(x, dim=dim, descending=largest, stable=True)
            return torch.return_types.topk((v.narrow(dim, 0, k), i.narrow(dim, 0, k)))
        torch.topk, torch.Tensor.topk = topk, topk
        return self

    def __exit__(self, *exc):
        import torch
        torch.topk, torch.Tensor.topk = self.fn, self.method


def _greedy_and_rows(model: Model, ids: np.ndarray, gen: int):
    """Greedy tokens through HF's cache path (prefill in one pass, then one token per
    forward), then one no-cache pass over prompt + tokens: rows P-1 .. P+gen-1."""
    import torch
    from transformers import DynamicCache
    with torch.no_grad(), _LowerIndexTopk():
        cache = DynamicCache(config=model.cfg)
        h = model.text(input_ids=torch.tensor(ids)[None], cache=cache, use_cache=True).last_hidden_state
        nxt = int(model.lm_head(h[0, -1]).argmax())
        toks = []
        for _ in range(gen):
            toks.append(nxt)
            h = model.text(input_ids=torch.tensor([[nxt]]), cache=cache, use_cache=True).last_hidden_state
            nxt = int(model.lm_head(h[0, -1]).argmax())
        seq = np.concatenate([ids, np.array(toks, np.int64)])
        gaps = _SelectionGaps(model)
        try:
            full = model.text(input_ids=torch.tensor(seq)[None], use_cache=False).last_hidden_state
        finally:
            gaps.remove()
        rows = model.lm_head(full[0]).float().numpy()
    p = len(ids)
    return np.array(toks, np.int64), rows[p - 1:], gaps.min_gap


class _SelectionGaps:
    """Hooks on every indexer and router of the no-cache pass: the smallest relative gap
    between the last kept and the first dropped candidate over all rows (inf: no boundary)."""

    def __init__(self, model: Model):
        import torch.nn.functional as F  # noqa: F401
        self.min_gap, self.where, self.exact_ties = float("inf"), "", 0
        self.handles = []
        for layer in model.text.layers:
            attn = layer.self_attn
            if getattr(attn, "indexer", None) is not None:
                self.handles.append(attn.indexer.register_forward_hook(self._indexer, with_kwargs=True))
            if hasattr(layer.mlp, "gate"):
                self.handles.append(layer.mlp.gate.register_forward_hook(self._router))

    def remove(self):
        for h in self.handles:
            h.remove()

    def _note(self, kept, dropped, scale, what):
        gap = (kept - dropped) / np.maximum(scale, 1e-30)
        self.exact_ties += int((gap == 0).sum())
        gap = gap[gap > 0]  # exact ties: both sides keep the lower index (_LowerIndexTopk)
        if gap.size and float(gap.min()) < self.min_gap:
            self.min_gap, self.where = float(gap.min()), what

    def _indexer(self, mod, args, kwargs, out):
        import torch
        import torch.nn.functional as F
        x, q_resid = kwargs["hidden_states"][0], kwargs["q_resid"][0]
        S, D, Hh, kp = x.shape[0], mod.head_dim, mod.n_heads, mod.index_kpool
        q = mod.wq_b(q_resid).view(S, Hh, D).double()
        k = mod.k_norm(mod.wk(x)).double()
        gate = F.linear(x, mod.index_kpool_compress_gate).double()
        P = S // kp
        if P == 0:
            return
        logit = gate[:P * kp].view(P, kp, D) + mod.index_kpool_compress_ape.double()[None]
        pk = (logit.softmax(dim=1) * k[:P * kp].view(P, kp, D)).sum(1)           # {P, D}
        sc = torch.relu(torch.einsum("shd,pd->shp", q, pk) * mod.softmax_scale)  # {S, H, P}
        w = mod.weights_proj(x).double() * (Hh ** -0.5)
        score = torch.einsum("sh,shp->sp", w, sc).numpy()
        budget = mod.index_topk // kp
        for t in range(S):
            c = (t + 1) // kp
            if c <= budget:
                continue
            s = np.sort(score[t, :c])[::-1]
            self._note(s[budget - 1:budget], s[budget:budget + 1], np.abs(s).max(), f"indexer row {t}")

    def _router(self, mod, args, out):
        import torch
        x = args[0].reshape(-1, mod.hidden_dim).double()
        scores = torch.sigmoid(x @ mod.weight.double().T)
        choice = (scores + mod.e_score_correction_bias.double()).numpy()
        E, G, k = mod.num_experts, mod.num_group, mod.top_k
        per = E // G
        if G > 1 and mod.topk_group < G:
            gs = np.sort(choice.reshape(-1, G, per), axis=-1)[..., -2:].sum(-1)
            srt = np.sort(gs, axis=-1)[:, ::-1]
            self._note(srt[:, mod.topk_group - 1], srt[:, mod.topk_group], np.abs(srt).max(-1), "router groups")
            keep = np.argsort(-gs, axis=-1, kind="stable")[:, :mod.topk_group]
            mask = np.zeros_like(gs, dtype=bool)
            np.put_along_axis(mask, keep, True, axis=-1)
            choice = np.where(np.repeat(mask, per, axis=-1), choice, -np.inf)
        if k < E:
            srt = np.sort(choice, axis=-1)[:, ::-1]
            ok = np.isfinite(srt[:, k])
            self._note(srt[ok, k - 1], srt[ok, k], np.abs(srt[ok, 0]) + 1.0, "router experts")


def _result(model: Model, ids: np.ndarray, gen: int):
    key = ids.astype(np.int64).tobytes() + bytes([gen])
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = _greedy_and_rows(model, ids, gen)
    return _CACHE[key]


def prompt(cfg: dict, rng, n: int) -> np.ndarray:
    """Random ids, redrawn (up to PROMPT_TRIES) while a top-k boundary is within float noise."""
    from common import GEN
    model = _MODELS.get(id(cfg))
    ids = rng.integers(0, cfg["vocab_size"], size=n).astype(np.int64)
    if model is None:
        return ids
    for _ in range(PROMPT_TRIES - 1):
        if _result(model, ids, GEN)[2] >= SELECT_GAP:
            break
        ids = rng.integers(0, cfg["vocab_size"], size=n).astype(np.int64)
    return ids


def reference(model: Model, ids, gen):
    toks, rows, _ = _result(model, np.asarray(ids, np.int64), gen)
    return toks, rows


if __name__ == "__main__":
    # Quick robustness check without running any model: N random configs (default 300) of
    # seed S must build in HF and save. Usage: python families/glm5.py [N] [S]
    import tempfile
    import time

    n_cases = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    t0, bad = time.time(), 0
    for case in range(n_cases):
        r = np.random.default_rng([seed, case])
        try:
            c = random_config(r)
            model = build(c, int(r.integers(1 << 31)))
            with tempfile.TemporaryDirectory() as td:
                save(model, c, td)
            boundaries(c)
        except Exception as e:  # noqa: BLE001 - listed, then counted
            bad += 1
            print(f"case {case}: {type(e).__name__}: {e}")
    print(f"{n_cases - bad}/{n_cases} configs build and save ({time.time() - t0:.0f} s)")
    sys.exit(1 if bad else 0)
