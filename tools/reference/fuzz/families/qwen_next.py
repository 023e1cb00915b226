"""Fuzzer family: Qwen3.8 Flash Next (HF `qwen4_exp`, text part `Qwen4ExpForCausalLM`).

Config fields the qwen4_exp text modeling code reads (transformers 5.17 .. 5.25), all drawn here:
  vocab_size, hidden_size, num_hidden_layers, layer_types / full_attention_interval,
  num_attention_heads, num_key_value_heads, head_dim, rope_parameters (rope_theta,
  partial_rotary_factor, mrope_section, rope_type 'default'), rms_norm_eps, tie_word_embeddings,
  attention_bias (False only: see config.cpp), hidden_act (silu only: see config.cpp),
  output_gate_type, linear_conv_kernel_dim, linear_{key,value}_head_dim,
  linear_num_{key,value}_heads, num_experts, num_experts_per_tok, moe_intermediate_size,
  shared_expert_intermediate_size, norm_topk_prob, hc_count, hc_lowrank, ple_layer_ids,
  ple_embed_dim, ple_conv_kernel_size, ngram_size, heads_per_ngram, ngram_vocab_size_base,
  make_ngram_vocab_size_divisible_by, seed, eos_token_id, indexer_n_heads, indexer_kv_heads,
  indexer_head_dim, indexer_budget, indexer_compress_ratio; plus the MTP head (mtp.* tensors,
  mtp_num_hidden_layers) that MTPLX reads. Read but inert for logits: max_position_embeddings,
  initializer_range, attention_dropout, pad/bos_token_id, split_ngram_parts, router_aux_loss_coef.

Layer-type spellings: every name some transformers version writes or loads for a layer kind
(5.17 writes `qwen_sparse_attention`, 5.24+ `indexed_attention`, real checkpoints
`full_attention`; 5.25 also remaps `mamba` and `deepseek_sparse_attention`). The HF config
gets the canonical names; config.json keeps the drawn spelling so our loader sees it.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

FAMILY = "qwen_next"
TOLERANCE = 1e-3

LINEAR_SPELLINGS = ("linear_attention", "linear_attention", "linear_attention", "mamba")
QSA_SPELLINGS = ("indexed_attention", "indexed_attention", "full_attention", "qwen_sparse_attention",
                 "deepseek_sparse_attention")
CANONICAL = {"mamba": "linear_attention", "full_attention": "indexed_attention",
             "qwen_sparse_attention": "indexed_attention", "deepseek_sparse_attention": "indexed_attention"}


def _pick(rng, xs):
    return xs[int(rng.integers(len(xs)))]


def _layer_kinds(rng, n: int) -> list[bool]:
    """True = linear (GDN). Shapes: all one kind, QSA first/last/alone, random mixes."""
    shape = int(rng.integers(6))
    if shape == 0:
        return [bool(rng.integers(2))] * n                     # all linear or all QSA
    if shape == 1:
        return [i != 0 for i in range(n)]                     # QSA first
    if shape == 2:
        return [i != n - 1 for i in range(n)]                 # QSA last (the usual schedule end)
    if shape == 3:
        return [i == 0 for i in range(n)] if n > 1 else [True]  # linear first, QSA after
    return [bool(rng.random() < 0.6) for _ in range(n)]


def _small() -> bool:
    """DS4_FUZZ_SMALL=1: the committed corpus's draw. Same fields and layer orders, smaller
    dims (a case ~100 KB instead of ~500 KB) so 20+ cases stay within ~2 MB."""
    return os.environ.get("DS4_FUZZ_SMALL") == "1"


def random_config(rng: np.random.Generator) -> dict:
    small = _small()
    n_layers = int(rng.integers(1, 4 if small else 6))
    kinds = _layer_kinds(rng, n_layers)
    hidden = int(_pick(rng, (16, 24) if small else (16, 24, 32, 48, 64)))
    vocab = int(rng.integers(48, 129 if small else 513))
    heads = int(_pick(rng, (1, 2) if small else (1, 2, 4)))
    kv_heads = int(_pick(rng, [d for d in (1, 2, 4) if heads % d == 0]))
    head_dim = int(_pick(rng, (8,) if small else (8, 16, 32)))
    # partial rotary: an even rotary dim of at least 2 that fits the indexer head
    factors = [f for f in (0.25, 0.5, 0.75, 1.0, 0.125) if int(head_dim * f) >= 2 and int(head_dim * f) % 2 == 0]
    partial = float(_pick(rng, factors))
    rot = int(head_dim * partial)
    idx_dim = int(_pick(rng, [d for d in (8, 16, 32) if d >= rot]))
    ratio = int(_pick(rng, (1, 2, 3, 4, 8)))
    block_topk = int(rng.integers(1, 9))
    rope = {"rope_type": "default", "rope_theta": float(_pick(rng, (10000.0, 1e6, 1e7))),
            "partial_rotary_factor": partial}
    if rng.random() < 0.5:
        rope.update(mrope_section=[2, 1, 1], mrope_interleaved=True)
    k_heads = int(_pick(rng, (1, 2)))
    experts = int(rng.integers(1, 4 if small else 9))
    hc = int(rng.integers(2, 4 if small else 5))
    cfg = dict(
        vocab_size=vocab, hidden_size=hidden, num_hidden_layers=n_layers,
        num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=head_dim,
        hidden_act="silu", output_gate_type=_pick(rng, ("sigmoid", "silu", None)),
        max_position_embeddings=4096, initializer_range=0.1,
        rms_norm_eps=float(_pick(rng, (1e-6, 1e-5))), tie_word_embeddings=bool(rng.random() < 0.2),
        rope_parameters=rope,
        linear_conv_kernel_dim=int(rng.integers(1, 6)),
        linear_key_head_dim=int(_pick(rng, (8,) if small else (8, 16))),
        linear_value_head_dim=int(_pick(rng, (8,) if small else (8, 16))),
        linear_num_key_heads=k_heads, linear_num_value_heads=k_heads * int(_pick(rng, (1, 2, 3))),
        moe_intermediate_size=int(_pick(rng, (8,) if small else (8, 16))),
        shared_expert_intermediate_size=int(_pick(rng, (8,) if small else (8, 16, 24))),
        num_experts=experts, num_experts_per_tok=int(rng.integers(1, experts + 1)),
        norm_topk_prob=bool(rng.random() < 0.7),
        hc_count=hc, hc_lowrank=int(_pick(rng, (4,) if small else (4, 8, 16))),
        # 4+ indexer heads keep most cases clear of tied (all-negative, score 0) blocks; the
        # ties that remain are broken as ours are (_stable_topk)
        indexer_n_heads=int(rng.integers(4, 7 if small else 9)), indexer_kv_heads=1, indexer_head_dim=idx_dim,
        indexer_budget=ratio * block_topk, indexer_compress_ratio=ratio,
        bos_token_id=None, pad_token_id=None, split_ngram_parts=1,
    )
    eos = int(rng.integers(vocab))
    cfg["eos_token_id"] = [eos, int(rng.integers(vocab))] if rng.random() < 0.2 else eos
    linear_ids = [i + 1 for i, lin in enumerate(kinds) if lin]
    if linear_ids and rng.random() < 0.7:
        k = int(rng.integers(1, len(linear_ids) + 1))
        cfg["ple_layer_ids"] = sorted(int(x) for x in rng.choice(linear_ids, size=k, replace=False))
        ngram = int(rng.integers(2, 5))
        hpn = int(rng.integers(1, 4))
        heads_total = (ngram - 1) * hpn
        cfg.update(ngram_size=ngram, heads_per_ngram=hpn,
                   ple_embed_dim=heads_total * int(_pick(rng, (2, 4) if small else (2, 4, 8))),
                   # kernel 1 gives HF's cache a 0-long PLE conv state, which its cache cannot
                   # hold (copy_ size error): transformers cannot generate with it at all
                   ple_conv_kernel_size=int(rng.integers(2, 5)),
                   ngram_vocab_size_base=int(rng.integers(20, 80 if small else 400)),
                   make_ngram_vocab_size_divisible_by=int(_pick(rng, (1, 8, 128))),
                   seed=int(rng.integers(0, 100000)))
    # layer schedule: explicit list in some spelling, or the interval form (no layer_types)
    interval = int(rng.integers(1, 5))
    if rng.random() < 0.15:
        cfg["full_attention_interval"] = interval
        kinds = [(i + 1) % interval != 0 for i in range(n_layers)]
        if "ple_layer_ids" in cfg:
            cfg["ple_layer_ids"] = [i for i in cfg["ple_layer_ids"] if kinds[i - 1]]
            if not cfg["ple_layer_ids"]:
                del cfg["ple_layer_ids"]
    else:
        spell_lin = _pick(rng, LINEAR_SPELLINGS)
        spell_qsa = _pick(rng, QSA_SPELLINGS)
        cfg["layer_types"] = [spell_lin if lin else spell_qsa for lin in kinds]
    cfg["_mtp"] = bool(rng.random() < 0.3) and not all(kinds)
    return cfg


def _hf_kwargs(cfg: dict) -> dict:
    kw = {k: v for k, v in cfg.items() if not k.startswith("_")}
    if "layer_types" in kw:
        kw["layer_types"] = [CANONICAL.get(t, t) for t in kw["layer_types"]]
    return kw


def _hf_config(cfg: dict):
    from transformers.models.qwen4_exp.configuration_qwen4_exp import Qwen4ExpTextConfig
    c = Qwen4ExpTextConfig(**_hf_kwargs(cfg))
    c._attn_implementation = "eager"
    return c


def _stable_topk(indexer) -> None:
    """Tied block scores (a relu-sum is exactly 0 whenever every indexer head is negative, common
    with few heads and short prompts) have no order in torch.topk or MTPLX's argpartition; we
    keep the lower block index (docs/reference-differences.md, "QSA top-k ties"). The reference
    indexer runs with a topk that does the same, so a tie at the budget edge is not a mismatch."""
    import torch
    inner = indexer._select_tokens

    def stable(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - torch's name
        order = torch.sort(x, dim=dim, descending=largest, stable=True).indices.narrow(dim, 0, k)
        return torch.return_types.topk((x.gather(dim, order), order))

    def select(*args, **kwargs):
        saved = torch.Tensor.topk
        torch.Tensor.topk = stable
        try:
            return inner(*args, **kwargs)
        finally:
            torch.Tensor.topk = saved

    indexer._select_tokens = select


def build(cfg: dict, seed: int):
    import torch
    from transformers.models.qwen4_exp.modeling_qwen4_exp import Qwen4ExpForCausalLM
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "qwen_next"))
    import make_tiny
    import mtp_ref
    torch.manual_seed(seed)
    model = Qwen4ExpForCausalLM(_hf_config(cfg)).float().eval()
    make_tiny.randomize(model, seed + 1)  # scaled norms / PLE conv, wide lm_head: clear margins
    for layer in model.model.layers:
        if hasattr(layer, "self_attn"):
            _stable_topk(layer.self_attn.indexer)
    if cfg.get("_mtp"):
        head = mtp_ref.MTPHead(model.config)
        mtp_ref.init_head(head, seed + 2)
        model.__dict__["_fuzz_mtp"] = head  # not a submodule: kept out of model.state_dict()
    return model


def save(model, cfg: dict, out_dir: Path) -> None:
    from safetensors.torch import save_file
    out_dir = Path(out_dir)
    # derived buffers (n-gram multipliers, prime sizes, offsets) are not in real checkpoints
    skip = ("layer_multipliers", "ngram_heads_vocab_sizes", "ngram_heads_offsets")
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()
               if not any(s in k for s in skip)}
    if model.config.tie_word_embeddings:
        tensors.pop("lm_head.weight", None)  # tied checkpoints carry only the embedding
    # HF save_pretrained's layout of the n-gram table: split_ngram_parts row shards. Drawn from
    # the PLE seed (not the rng) so the fuzz cases stay what they were.
    split = 1 + int(cfg.get("seed", 0)) % 3 if model.config.ple_layer_ids else 1
    if split > 1:
        for k in [k for k in tensors if k.endswith("ngram_embedding.weight")]:
            for i, part in enumerate(tensors.pop(k).tensor_split(split, dim=0)):
                tensors[k[: -len("weight")] + f"shard_{i}.weight"] = part.contiguous()
    mtp = model.__dict__.get("_fuzz_mtp")
    if mtp is not None:
        for k, v in mtp.state_dict().items():
            tensors["mtp." + k] = v.detach().contiguous().clone()
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    d = model.config.to_dict()
    for k in ("transformers_version", "_attn_implementation_autoset", "dtype", "torch_dtype"):
        d.pop(k, None)
    d["torch_dtype"] = "float32"
    d["architectures"] = ["Qwen4ExpForCausalLM"]
    d["split_ngram_parts"] = split
    if "layer_types" in cfg:
        d["layer_types"] = list(cfg["layer_types"])  # the drawn spelling, as that version writes it
    else:
        d.pop("layer_types", None)
        d["full_attention_interval"] = cfg["full_attention_interval"]
    if mtp is not None:
        d["mtp_num_hidden_layers"] = 1
    (out_dir / "config.json").write_text(json.dumps(d, indent=2, sort_keys=True) + "\n")


def reference(model, ids, gen):
    """HF's cache path needs at least one attention layer (`get_mask_sizes` raises on an
    all-linear cache), so an all-GDN config is decoded greedily with no-cache passes."""
    import common
    if "indexed_attention" in model.config.layer_types:
        return common.hf_reference(model, ids, gen)
    import torch
    seq = [int(t) for t in ids]
    with torch.no_grad():
        for _ in range(gen):
            x = torch.tensor(seq, dtype=torch.long)[None]
            seq.append(int(model(x, use_cache=False).logits[0, -1].argmax()))
        full = model(torch.tensor(seq, dtype=torch.long)[None], use_cache=False).logits[0].float().numpy()
    p = len(ids)
    return np.asarray(seq[p:], dtype=np.int64), full[p - 1:]


def boundaries(cfg: dict) -> list[int]:
    """Prompt lengths where this config's state changes shape: QSA block completion and the
    point where complete blocks outnumber the block budget (selection starts dropping), the
    GDN conv window and HF's 64-token delta-rule chunk, PLE n-gram context and dilated conv."""
    out = []
    ratio, budget = cfg["indexer_compress_ratio"], cfg["indexer_budget"]
    out += [ratio, budget, budget + ratio, 2 * budget + ratio]
    out += [cfg["linear_conv_kernel_dim"], 64, 128]
    if cfg.get("ple_layer_ids"):
        n = cfg["ngram_size"]
        out += [n - 1, n, (cfg["ple_conv_kernel_size"] - 1) * n + 1]
    return sorted(set(b for b in out if b >= 1))
