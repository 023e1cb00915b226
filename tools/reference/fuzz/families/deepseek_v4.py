"""Fuzzer family: DeepSeek V4 Flash (HF `deepseek_v4`, our `deepseek_v4`).

Config fields the HF modeling code (transformers 5.17 .. 5.25) reads, all drawn here:
  vocab_size, hidden_size, num_hidden_layers, num_attention_heads, head_dim,
  partial_rotary_factor (legacy spelling qk_rope_head_dim), q_lora_rank, o_groups,
  o_lora_rank, n_routed_experts, num_experts_per_tok, moe_intermediate_size,
  routed_scaling_factor, scoring_func, layer_types (legacy compress_ratios),
  mlp_layer_types (legacy num_hash_layers), compress_rates (legacy compress_rate_csa /
  compress_rate_hca), rope_theta, compress_rope_theta, rope_parameters (yarn or default,
  main / compress), hc_mult, hc_sinkhorn_iters, hc_eps, swiglu_limit, sliding_window,
  index_n_heads, index_head_dim, index_topk, rms_norm_eps, max_position_embeddings,
  tie_word_embeddings, hidden_act (silu only: the only activation the golden master has),
  mlp_bias (False only).
Written by the config but never read by the modeling code, drawn anyway so our loader must
accept what transformers accepts: num_key_value_heads (the KV head is always one),
n_shared_experts (always one shared MLP), norm_topk_prob (the router always normalizes).
num_nextn_predict_layers: HF does not build the MTP block; on those cases we add a random
ds4-layout MTP head (mtp.safetensors) so the loader binds it; the trunk logits compared do
not read it. One case in three is written in the legacy spellings (_write_legacy_spelling).

The reference (reference()): HF with ds4's lowest-index rule at top-k ties, and the first row
past a near-tie at a top-k edge, where float noise may legitimately pick the other entry.
docs/reference-differences.md, "Fuzzer findings: deepseek_v4".
"""
from __future__ import annotations

import contextlib
import copy
import json
import sys
from pathlib import Path

import numpy as np

FAMILY = "deepseek_v4"
TOLERANCE = 1e-3

LAYER_TYPES = ("sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention")


def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def _layer_types(rng, n: int) -> list[str]:
    """Random orders, with the structured ones (all one type, one type alone, compressed
    first / last) drawn often enough to appear in a few dozen cases."""
    style = int(rng.integers(6))
    if style == 0:  # all the same type
        return [_pick(rng, LAYER_TYPES)] * n
    if style == 1:  # one layer of a type, alone among another
        base, odd = rng.choice(len(LAYER_TYPES), size=2, replace=False)
        out = [LAYER_TYPES[base]] * n
        out[int(rng.integers(n))] = LAYER_TYPES[odd]
        return out
    if style == 2:  # ds4's schedule: sliding bootstrap, then CSA / HCA alternating
        k = int(rng.integers(0, min(n, 2) + 1))
        return ["sliding_attention"] * k + [LAYER_TYPES[1 + (i % 2)] for i in range(n - k)]
    return [_pick(rng, LAYER_TYPES) for _ in range(n)]


def random_config(rng: np.random.Generator) -> dict:
    heads = int(_pick(rng, (1, 2, 3, 4, 6, 8)))
    o_groups = int(_pick(rng, [g for g in (1, 2, 3, 4) if heads % g == 0]))
    head_dim = int(_pick(rng, (8, 12, 16, 24, 32, 48, 64)))
    rope_dim = int(_pick(rng, [r for r in (2, 4, 6, 8, 16, 32) if r <= head_dim]))
    index_head_dim = int(_pick(rng, [d for d in (4, 8, 12, 16, 32) if d >= rope_dim] or [rope_dim]))
    n_layers = int(rng.integers(1, 7))
    experts = int(rng.integers(1, 9))
    window = int(_pick(rng, (2, 3, 4, 5, 8, 16, 33, 64, 128)))
    csa = int(_pick(rng, (1, 2, 3, 4, 4, 4, 5, 8)))
    hca = int(_pick(rng, (2, 3, 7, 8, 16, 16, 32, 128)))
    yarn = bool(rng.random() < 0.6)
    rope_parameters = {"rope_type": "default"}
    if yarn:
        rope_parameters = {"rope_type": "yarn", "factor": float(_pick(rng, (2.0, 4.0, 16.0))),
                           "original_max_position_embeddings": int(_pick(rng, (64, 256, 4096, 65536))),
                           "beta_fast": float(_pick(rng, (32.0, 16.0))), "beta_slow": float(_pick(rng, (1.0, 2.0)))}
    if rng.random() < 0.2:  # the nested {main, compress} form: yarn may then scale the main rope too
        prf = rope_dim / head_dim

        def sub(theta):
            d = {"rope_type": "default", "rope_theta": theta, "partial_rotary_factor": prf}
            if rng.random() < 0.5:
                d.update(rope_type="yarn", factor=float(_pick(rng, (2.0, 8.0))), attention_factor=1.0,
                         original_max_position_embeddings=int(_pick(rng, (32, 512))), beta_fast=32.0, beta_slow=1.0)
            return d
        rope_parameters = {"main": sub(float(_pick(rng, (10000.0, 300.0)))), "compress": sub(float(_pick(rng, (160000.0, 2000.0))))}
    cfg = dict(
        vocab_size=int(rng.integers(48, 513)),
        hidden_size=int(_pick(rng, (16, 24, 32, 48, 64))),
        moe_intermediate_size=int(_pick(rng, (8, 16, 24, 32, 48))),
        num_hidden_layers=n_layers,
        num_attention_heads=heads,
        head_dim=head_dim,
        partial_rotary_factor=rope_dim / head_dim,
        q_lora_rank=int(_pick(rng, (8, 16, 32, 48))),
        o_groups=o_groups,
        o_lora_rank=int(_pick(rng, (4, 8, 16, 32))),
        n_routed_experts=experts,
        num_experts_per_tok=int(rng.integers(1, experts + 1)),
        scoring_func=_pick(rng, ("sqrtsoftplus", "sqrtsoftplus", "sigmoid")),
        routed_scaling_factor=float(_pick(rng, (1.0, 1.5, 2.5, 0.7))),
        layer_types=_layer_types(rng, n_layers),
        mlp_layer_types=[_pick(rng, ("hash_moe", "moe")) for _ in range(n_layers)],
        compress_rates={"compressed_sparse_attention": csa, "heavily_compressed_attention": hca},
        rope_theta=float(_pick(rng, (10000.0, 500.0, 1e6))),
        compress_rope_theta=float(_pick(rng, (160000.0, 10000.0, 1000.0))),
        rope_parameters=rope_parameters,
        max_position_embeddings=1 << 20,
        hc_mult=int(_pick(rng, (1, 2, 3, 4, 4))),
        hc_sinkhorn_iters=int(_pick(rng, (1, 2, 5, 20, 20))),
        hc_eps=float(_pick(rng, (1e-6, 1e-3))),
        swiglu_limit=float(_pick(rng, (0.5, 1.5, 10.0))),
        sliding_window=window,
        index_n_heads=int(_pick(rng, (4, 8, 16, 16))),
        index_head_dim=index_head_dim,
        index_topk=int(_pick(rng, (1, 2, 3, 8, 16, 64))),
        num_nextn_predict_layers=int(rng.random() < 0.25),
        norm_topk_prob=bool(rng.random() < 0.8),  # the fields below are never read by the modeling
        num_key_value_heads=int(_pick(rng, (1, 1, 2))),
        n_shared_experts=int(_pick(rng, (1, 1, 2))),
        rms_norm_eps=float(_pick(rng, (1e-6, 1e-5))),
        tie_word_embeddings=bool(rng.random() < 0.15),
        hidden_act="silu",
        bos_token_id=0,
        eos_token_id=1,
    )
    return cfg


def corpus_config(cfg: dict) -> dict:
    """The committed corpus's version of a random config (corpus.py): the same layer orders,
    windows, compress ratios, top-k, HC streams and routing, with the widths cut so a case
    is tens of KB (the corpus must stay a few MB and check in seconds under ASan)."""
    c = copy.deepcopy(cfg)
    n = min(c["num_hidden_layers"], 3)
    c["num_hidden_layers"] = n
    c["layer_types"], c["mlp_layer_types"] = c["layer_types"][:n], c["mlp_layer_types"][:n]
    c["vocab_size"] = min(c["vocab_size"], 64)
    c["num_nextn_predict_layers"] = 0  # the MTP head is not compared; no bytes for it here
    c["hidden_size"], c["moe_intermediate_size"], c["q_lora_rank"], c["o_lora_rank"] = 16, 8, 8, 4
    c["n_routed_experts"] = min(c["n_routed_experts"], 4)
    c["num_experts_per_tok"] = min(c["num_experts_per_tok"], c["n_routed_experts"])
    c["num_attention_heads"] = min(c["num_attention_heads"], 2)
    c["o_groups"] = min(c["o_groups"], c["num_attention_heads"])
    rope = round(cfg["head_dim"] * cfg["partial_rotary_factor"])
    c["head_dim"] = min(c["head_dim"], 16)
    rope = min(rope, c["head_dim"])
    c["partial_rotary_factor"] = rope / c["head_dim"]
    for sub in c["rope_parameters"].values():  # the nested form sizes each rope by its own factor
        if isinstance(sub, dict):
            sub["partial_rotary_factor"] = c["partial_rotary_factor"]
    c["index_n_heads"] = min(c["index_n_heads"], 8)
    c["index_head_dim"] = max(rope, min(c["index_head_dim"], 8))
    return c


def hf_config(cfg: dict):
    from transformers import DeepseekV4Config
    from transformers.utils import logging
    logging.set_verbosity_error()  # yarn factor vs max_position_embeddings chatter
    c = DeepseekV4Config(**copy.deepcopy(cfg))  # HF's __post_init__ edits rope_parameters in place
    c._attn_implementation = "eager"
    return c


def build(cfg: dict, seed: int):
    import torch
    from transformers import DeepseekV4ForCausalLM
    torch.manual_seed(seed)
    c = hf_config(cfg)
    model = DeepseekV4ForCausalLM(c).to(torch.float32).eval()
    # make_tiny's init: weights well above HF's std 0.02 so the logits spread out (top-2
    # margins far above float noise), distinct hash experts per token
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deepseek_v4"))
    from make_tiny import randomize  # noqa: PLC0415
    randomize(model, c, seed)
    if c.tie_word_embeddings:
        model.tie_weights()
    model._fuzz_seed = seed
    return model


def save(model, cfg: dict, out_dir) -> None:
    import torch
    from safetensors.torch import save_file
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import common  # noqa: PLC0415
    out_dir = Path(out_dir)
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)  # a tied checkpoint ships the embedding only
    for k in list(state):
        if k.endswith("tid2eid"):
            state[k] = state[k].to(torch.int32)  # what ds4 stores
    save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    common.write_config_json(model.config, out_dir, {"architectures": ["DeepseekV4ForCausalLM"]})
    seed = int(getattr(model, "_fuzz_seed", 0))
    if seed % 3 == 1:  # one case in three in the legacy spellings transformers still loads
        _write_legacy_spelling(model, out_dir)
    if cfg.get("num_nextn_predict_layers"):
        _save_mtp(model, out_dir)


_RATIO_OF = {"sliding_attention": 0, "compressed_sparse_attention": 4, "heavily_compressed_attention": 128}


def _write_legacy_spelling(model, out_dir: Path) -> None:
    """Rewrite config.json with the top-level legacy fields DeepseekV4Config.__post_init__ folds
    in (compress_ratios, compress_rate_csa / _hca, num_hash_layers, qk_rope_head_dim, a flat
    rope_scaling), wherever they express this config, and check transformers loads the result
    as the same config: our loader must then read it as the same model."""
    import copy as _copy
    from transformers import DeepseekV4Config
    path = out_dir / "config.json"
    d = json.loads(path.read_text())
    c = model.config
    new = _copy.deepcopy(d)
    new["compress_ratios"] = [_RATIO_OF[t] for t in c.layer_types]
    del new["layer_types"]
    new["compress_rate_csa"] = c.compress_rates["compressed_sparse_attention"]
    new["compress_rate_hca"] = c.compress_rates["heavily_compressed_attention"]
    del new["compress_rates"]
    n_hash = sum(t == "hash_moe" for t in c.mlp_layer_types)
    if c.mlp_layer_types == ["hash_moe"] * n_hash + ["moe"] * (len(c.mlp_layer_types) - n_hash):
        new["num_hash_layers"] = n_hash
        del new["mlp_layer_types"]
    main, comp = c.rope_parameters["main"], c.rope_parameters["compress"]
    if main.get("rope_type", "default") == "default" and main["rope_theta"] == c.rope_theta:
        flat = {k: v for k, v in comp.items() if k not in ("rope_theta", "partial_rotary_factor", "attention_factor")}
        new["rope_scaling"] = flat
        new["compress_rope_theta"] = comp["rope_theta"]
        del new["rope_parameters"]
        new["qk_rope_head_dim"] = c.qk_rope_head_dim
        new.pop("partial_rotary_factor", None)
    path.write_text(json.dumps(new, indent=2, sort_keys=True) + "\n")
    back = DeepseekV4Config.from_pretrained(str(out_dir)).to_dict()
    want = c.to_dict()
    for k in ("layer_types", "mlp_layer_types", "compress_rates", "rope_parameters", "partial_rotary_factor"):
        if back.get(k) != want.get(k):
            raise AssertionError(f"legacy spelling of {k} loads as {back.get(k)}, want {want.get(k)}")


def _save_mtp(model, out_dir: Path) -> None:
    """A random ds4-layout MTP head (tools/reference/deepseek_v4/dspark_ref.MTPHead) beside the
    trunk: the loader binds it; the trunk logits the fuzzer compares do not read it."""
    import torch
    from safetensors.torch import save_file
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "deepseek_v4"))
    from dspark_ref import MTPHead, init_head  # noqa: PLC0415
    head = MTPHead(model.config).to(torch.float32).eval()
    init_head(head, int(getattr(model, "_fuzz_seed", 0)) + 1)
    st = {f"mtp.0.{k}": v.detach().contiguous() for k, v in head.state_dict().items()}
    save_file(st, str(out_dir / "mtp.safetensors"), metadata={"format": "pt"})


@contextlib.contextmanager
def _lowest_index_topk():
    """HF's indexer picks its top-k with Tensor.topk, whose order among equal scores is
    unspecified (and changes with the sequence length). Equal scores are common: an entry
    whose dot product is <= 0 for every indexer head scores exactly 0 (ReLU). ds4 (ds4.c
    indexer_allowed_decode_one: repeated strict-> argmax) and we keep the lowest index among
    equals; the reference does the same here, so it is one well-defined function.
    docs/reference-differences.md, "Fuzzer findings: deepseek_v4"."""
    import torch
    orig = torch.Tensor.topk

    def stable(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - torch's signature
        vals, idx = torch.sort(self, dim=dim, descending=largest, stable=True)
        return torch.return_types.topk((vals.narrow(dim, 0, k), idx.narrow(dim, 0, k)))

    torch.Tensor.topk = stable
    try:
        yield
    finally:
        torch.Tensor.topk = orig


# Two scores closer than this many float32 epsilons of their terms' absolute sum can come
# out in either order from sums evaluated in another order (ours, ds4's, HF's): a near-tie.
# The one flip met so far (corpus cs21_000, len 600, position 601) had a gap of 0.16 of
# this bound; the next-closest edges in that sequence were 3.4 and 6.6 times it.
NEAR_TIE_EPS = 8 * 2.0 ** -23


def _edge_unstable(scores, mag, k: int):
    """Per row of scores {S, n} (-inf = not selectable), with mag {S, n} the sum of the absolute
    values of each score's terms: is the k-th / (k+1)-th edge a near-tie? Rows with <= k
    selectable entries take everything, and exact ties are broken by index on both sides:
    both stable."""
    import torch
    if scores.shape[-1] <= k:
        return torch.zeros(scores.shape[0], dtype=torch.bool)
    v, order = scores.sort(dim=-1, descending=True, stable=True)
    m = mag.gather(-1, order)
    a, b = v[:, k - 1], v[:, k]
    gap = a - b
    return torch.isfinite(b) & (gap > 0) & (gap <= NEAR_TIE_EPS * (m[:, k - 1] + m[:, k]))


def _first_unstable_position(model, seq) -> int:
    """Earliest position where the no-cache pass over `seq` makes a discrete choice on a
    near-tie: the indexer's top-k (causal entries only) or a router's biased expert top-k.
    Everything from there on may legitimately differ. -1: none."""
    import torch
    from transformers.models.deepseek_v4 import modeling_deepseek_v4 as M
    cfg = model.config
    ratio, k_idx = cfg.compress_rates["compressed_sparse_attention"], cfg.index_topk
    first = [len(seq)]

    def note(mask):
        hit = torch.nonzero(mask)
        if len(hit):
            first[0] = min(first[0], int(hit[0, 0]))

    def on_scorer(m, inp, out):  # inp: q {1, S, H, D}, keys {1, T, D}, hidden {1, S, E}; out {1, S, T}
        q, keys, hidden = (x[0].float() for x in inp)
        w = (m.weights_proj(hidden[None])[0].float() * m.weights_scaling).abs()  # {S, H}
        mag = []
        for q0 in range(0, q.shape[0], 256):  # {256, H, T} at a time: 2,000-token prompts, ratio 1
            qs, ws = q[q0:q0 + 256], w[q0:q0 + 256]
            live = torch.einsum("shd,td->sht", qs, keys) > 0
            mag.append((torch.einsum("shd,td->sht", qs.abs(), keys.abs()) * live * ws[..., None]).sum(1))
        mag = torch.cat(mag) * m.softmax_scale
        s = out[0].float()
        pos = torch.arange(s.shape[0])
        causal = torch.arange(s.shape[1])[None, :] < ((pos + 1) // ratio)[:, None]
        note(_edge_unstable(torch.where(causal, s, torch.full_like(s, float("-inf"))), mag, k_idx))

    def on_router(m, inp, out):  # inp: hidden {.., E}; out: (logits {S, n}, weights, indices)
        sel = m.score_fn(out[0].float()) + m.e_score_correction_bias
        x = inp[0].reshape(-1, m.hidden_dim).float()
        mag = x.abs() @ m.weight.abs().float().T + m.e_score_correction_bias.abs()  # the logit's terms
        if m.top_k < sel.shape[-1]:
            note(_edge_unstable(sel, mag, m.top_k))

    hooks = [mod.register_forward_hook(on_scorer) for mod in model.modules() if isinstance(mod, M.DeepseekV4IndexerScorer)]
    hooks += [mod.register_forward_hook(on_router) for mod in model.modules() if isinstance(mod, M.DeepseekV4TopKRouter)]
    try:
        with torch.no_grad():
            model(torch.tensor(seq, dtype=torch.long)[None], use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return first[0] if first[0] < len(seq) else -1


def reference(model, ids, gen):
    """HF's greedy tokens and rows with ds4's top-k tie rule, and the first row that follows a
    near-tie (common.reference): such a row is float noise away from another valid answer."""
    import numpy as np
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import common  # noqa: PLC0415
    with _lowest_index_topk():
        greedy, rows = common.hf_reference(model, ids, gen)
        pos = _first_unstable_position(model, np.concatenate([ids, greedy]))
    # row i holds the logits at position len(ids) - 1 + i
    return greedy, rows, (-1 if pos < 0 else max(0, pos - (len(ids) - 1)))


def boundaries(cfg: dict) -> list[int]:
    """Prompt lengths where something in this config changes: the sliding window filling, the
    first and second compressed block of each ratio used (CSA's overlap window reaches back one
    block), the indexer's top-k budget being exceeded (topk + 1 CSA blocks)."""
    out = [cfg["sliding_window"], cfg["sliding_window"] + 1]
    used = set(cfg["layer_types"])
    rates = cfg["compress_rates"]
    if "compressed_sparse_attention" in used:
        m = rates["compressed_sparse_attention"]
        out += [m, 2 * m, 3 * m, (cfg["index_topk"] + 1) * m, (cfg["index_topk"] + 2) * m]
    if "heavily_compressed_attention" in used:
        m = rates["heavily_compressed_attention"]
        out += [m, 2 * m]
    return sorted({b for b in out if b >= 1})
