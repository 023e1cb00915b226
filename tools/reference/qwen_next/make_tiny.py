#!/usr/bin/env python3
"""Tiny random Qwen3.8 Flash Next (HF `qwen4_exp` text part) + its MTP head.

Every structural feature of the real model stays live at toy size:
  * layer schedule lin,lin,lin,QSA repeated (HF `full_attention_interval` 4), 8 layers;
  * GDN with grouped value heads (4 v-heads over 2 k-heads), conv kernel 4;
  * QSA with indexer (8 heads x 16, one key head), block ratio 4, token budget 32:
    a 300-token prompt has 75 complete blocks, top-8 are kept, so positions really drop;
  * partial rotary (factor 0.25 of head_dim 32 -> 8 rotary dims);
  * 4-stream hyper-connections (GatedResidual), hc_lowrank 16;
  * MoE 8 experts top-2 + shared expert with sigmoid gate;
  * PLE n-gram embedding (3-grams, 2 heads per n-gram) on layer 2 (one-indexed);
    small prime vocabularies (ngram_vocab_size_base 1000) keep the table at ~4k rows;
  * the MTP head (mtp.* tensors), wired as MTPLX's Qwen4ExpMTP (see mtp_ref.py).

Init is scaled (std 0.1, random non-zero norm weights and PLE conv) so that every path
moves the logits and top-2 margins stay well above float32 noise.

Usage: make_tiny.py OUT_DIR   (writes config.json + model.safetensors)
"""
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mtp_ref  # noqa: E402

from transformers.models.qwen4_exp.configuration_qwen4_exp import Qwen4ExpTextConfig
from transformers.models.qwen4_exp.modeling_qwen4_exp import Qwen4ExpForCausalLM

SEED = 1234


def tiny_config() -> Qwen4ExpTextConfig:
    return Qwen4ExpTextConfig(
        vocab_size=1024,
        hidden_size=32,
        num_hidden_layers=8,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        hidden_act="silu",
        output_gate_type="sigmoid",  # the shipped Flash-Next gate
        max_position_embeddings=4096,
        initializer_range=0.1,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                         "mrope_section": [2, 1, 1], "mrope_interleaved": True},
        linear_conv_kernel_dim=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=24,
        num_experts=8,
        num_experts_per_tok=2,
        norm_topk_prob=True,
        hc_count=4,
        hc_lowrank=16,
        ple_layer_ids=[2],
        ple_embed_dim=32,
        ple_conv_kernel_size=4,
        ngram_size=3,
        heads_per_ngram=2,
        ngram_vocab_size_base=1000,
        make_ngram_vocab_size_divisible_by=128,
        seed=1234,
        split_ngram_parts=1,
        indexer_n_heads=8,  # many heads: relu-sum scores are rarely exactly 0, so top-k never cuts through ties
        indexer_kv_heads=1,
        indexer_head_dim=16,
        indexer_budget=32,
        indexer_compress_ratio=4,
        eos_token_id=1000,
        bos_token_id=None,
        pad_token_id=None,
    )


def randomize(model: torch.nn.Module, seed: int = SEED + 1) -> None:
    """Non-trivial values where HF init leaves constants (norms, PLE conv). Also the fuzzer's
    (tools/reference/fuzz/families/qwen_next.py), with its own seed."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm" in name or "norm_" in name or "hc_norm" in name:
                if name.endswith("linear_attn.norm.weight"):  # one-centered gated norm
                    p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
                else:  # zero-centered (1 + w) norms
                    p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("ple.conv1d.weight"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("ngram_embedding.weight"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
        model.lm_head.weight.mul_(3.0)


def build():
    torch.manual_seed(SEED)
    cfg = tiny_config()
    cfg._attn_implementation = "eager"
    model = Qwen4ExpForCausalLM(cfg).float().eval()
    randomize(model)
    mtp = mtp_ref.MTPHead(cfg)
    mtp_ref.init_head(mtp, SEED + 2)
    return cfg, model, mtp


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/qwen_next/model")
    out.mkdir(parents=True, exist_ok=True)
    cfg, model, mtp = build()
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    # Buffers HF recomputes from config (n-gram multipliers, prime sizes, offsets) are
    # derived data: keep them out, as the real checkpoint does.
    tensors = {k: v for k, v in tensors.items()
               if not any(s in k for s in ("layer_multipliers", "ngram_heads_vocab_sizes", "ngram_heads_offsets"))}
    for k, v in mtp.state_dict().items():
        tensors["mtp." + k] = v.detach().contiguous().clone()
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    d = cfg.to_dict()
    d["architectures"] = ["Qwen4ExpForCausalLM"]
    d["mtp_num_hidden_layers"] = 1
    for k in ("transformers_version", "_attn_implementation_autoset", "dtype", "torch_dtype"):
        d.pop(k, None)
    d["torch_dtype"] = "float32"
    (out / "config.json").write_text(json.dumps(d, indent=2, sort_keys=True) + "\n")
    print(f"wrote {out}: {sum(v.numel() for v in tensors.values())} params")


if __name__ == "__main__":
    main()
