"""Tiny random DeepSeek V4 Flash (HF `deepseek_v4`) for the golden tests.

Built with HF's own classes (transformers.DeepseekV4ForCausalLM), float32, fixed seed.
Keeps every structural feature of the real model live (SPEC.md §1 shapes, scaled down):
  - ds4's layer schedule (ds4.c ds4_layer_compress_ratio): layers 0-1 sliding-window only,
    then ratio-4 compressed sparse attention (CSA, with lightning indexer) on even layers
    and heavily compressed attention (HCA) on odd layers;
  - hash-routed MoE in the first 3 layers (tid2eid table), sqrt-softplus top-k after,
    shared expert, swiglu clamp small enough that it really clips;
  - 4 hyper-connection streams with 20 Sinkhorn iterations;
  - sliding window 16, HCA ratio 16, index_topk 8, so a 300-token prompt exceeds every
    budget (the indexer really drops compressed rows);
  - partial interleaved rope on the head tail, yarn on the compressed layers.
Random init gives near-flat logits, so weights are drawn larger than HF's default
(std 0.02) to keep top-2 logit margins well above float32 noise.

Usage: make_tiny.py OUT_DIR   (writes config.json + model.safetensors)
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

SEED = 1234


def tiny_config() -> DeepseekV4Config:
    return DeepseekV4Config(
        vocab_size=1024,
        hidden_size=64,
        moe_intermediate_size=32,
        num_hidden_layers=5,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        qk_rope_head_dim=8,
        q_lora_rank=32,
        o_groups=2,
        o_lora_rank=16,
        n_routed_experts=5,
        num_experts_per_tok=2,
        n_shared_experts=1,
        routed_scaling_factor=1.5,
        layer_types=[
            "sliding_attention",
            "sliding_attention",
            "compressed_sparse_attention",
            "heavily_compressed_attention",
            "compressed_sparse_attention",
        ],
        mlp_layer_types=["hash_moe", "hash_moe", "hash_moe", "moe", "moe"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
        rope_theta=10000.0,
        compress_rope_theta=160000.0,
        rope_parameters={
            "rope_type": "yarn",
            "factor": 16.0,
            "original_max_position_embeddings": 65536,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        },
        max_position_embeddings=1048576,
        hc_mult=4,
        hc_sinkhorn_iters=20,
        hc_eps=1e-6,
        swiglu_limit=1.5,
        sliding_window=16,
        index_n_heads=16,
        index_head_dim=16,
        index_topk=8,
        num_nextn_predict_layers=0,
        rms_norm_eps=1e-6,
        bos_token_id=0,
        eos_token_id=1,
        tie_word_embeddings=False,
        dtype="float32",
    )


def randomize(model: DeepseekV4ForCausalLM, cfg: DeepseekV4Config, seed: int = SEED) -> None:
    """Also the fuzzer's init (tools/reference/fuzz/families/deepseek_v4.py)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            shape = p.shape
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(shape, generator=g))
            elif name.endswith(".scale") or name.endswith("hc_scale"):
                p.copy_(0.5 + 0.5 * torch.rand(shape, generator=g))
            elif name.endswith(".base") or name.endswith("hc_base"):
                p.copy_(0.5 * torch.randn(shape, generator=g))
            elif name.endswith("sinks"):
                p.copy_(torch.randn(shape, generator=g))
            elif name.endswith("position_bias"):
                p.copy_(0.5 * torch.randn(shape, generator=g))
            elif name.endswith(".fn") or name.endswith("hc_fn"):
                p.copy_(0.1 * torch.randn(shape, generator=g))
            elif p.dim() >= 2:
                fan_in = shape[-1]
                p.copy_(torch.randn(shape, generator=g) * (1.5 / fan_in**0.5))
            else:
                p.copy_(0.1 * torch.randn(shape, generator=g))
        for name, b in sorted(model.named_buffers()):
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.05 * torch.randn(b.shape, generator=g))
            elif name.endswith("tid2eid"):
                # distinct experts per token, like the real table
                rows = [torch.randperm(cfg.n_routed_experts, generator=g)[: cfg.num_experts_per_tok]
                        for _ in range(cfg.vocab_size)]
                b.copy_(torch.stack(rows).to(b.dtype))


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)
    cfg = tiny_config()
    model = DeepseekV4ForCausalLM(cfg).to(torch.float32).eval()
    randomize(model, cfg)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    # tid2eid is int64 in HF; int32 is what ds4 stores and halves the size.
    for k in list(state):
        if k.endswith("tid2eid"):
            state[k] = state[k].to(torch.int32)
    save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    d = cfg.to_dict()
    d["architectures"] = ["DeepseekV4ForCausalLM"]
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(d, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
