"""Tiny random GLM 5.x Flash (HF `glm5_next`, text part) for the golden tests.

Built with HF's own classes (Glm5NextTextModel + an lm_head Linear, the text half of
Glm5NextForConditionalGeneration), float32, fixed seed. Every structural feature stays live:
  - KDA linear-attention layers (conv state + recurrent state) and MLA/DSA layers,
  - DSA indexer "full" layers and a "shared" layer that reuses the previous full selection,
  - k-pool groups (kpool 4) with the incomplete-tail rule; index_topk 32 = 8 pools, so any
    context > 35 tokens takes the sparse path (prompts of 64 and 300 tokens really drop pools,
    and decoding after the 7-token prompt crosses the dense/sparse switch at position 35),
  - hyper-connections (4 streams, Sinkhorn 20), dense first layers then MoE (sigmoid routing,
    correction bias, top-3 of 6 + shared), swiglu clamp small enough to bite.
Weights are saved flat like a text-only checkpoint: model.* and lm_head.weight.
Usage: make_tiny.py OUT_DIR
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
from transformers.models.glm5_next.configuration_glm5_next import Glm5NextTextConfig
from transformers.models.glm5_next.modeling_glm5_next import Glm5NextTextModel

CONFIG = dict(
    vocab_size=1024, hidden_size=64, intermediate_size=64, moe_intermediate_size=24,
    num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=4,
    n_shared_experts=1, n_routed_experts=6, num_experts_per_tok=3, n_group=1, topk_group=1,
    routed_scaling_factor=2.5, norm_topk_prob=True,
    kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=0, qk_nope_head_dim=16, v_head_dim=16,
    hidden_act="silu", max_position_embeddings=4096, rms_norm_eps=1e-5,
    pad_token_id=None, bos_token_id=None, eos_token_id=[1023], tie_word_embeddings=False,
    mlp_layer_types=["dense", "dense", "sparse", "sparse", "sparse", "sparse"],
    layer_types=["linear_attention", "indexed_attention", "indexed_attention",
                 "linear_attention", "linear_attention", "indexed_attention"],
    indexer_types=["full", "full", "shared", "full", "full", "full"],
    index_topk=32, index_head_dim=16, index_n_heads=8, index_kpool=4,
    index_kpool_always_select_tail=True,
    swiglu_limit=1.5, linear_head_dim=16, linear_num_heads=4, linear_conv_kernel_dim=4,
    linear_lower_bound=-5.0, hc_mult=4, hc_eps=1e-6, hc_sinkhorn_iters=20,
    initializer_range=0.08,
)


def randomize_constants(model, g, n_experts):
    """HF init leaves several parameters at constants that would hide bugs (norm weights 1,
    hc base 0 / scale 1, indexer pool gate 1 / ape 0, correction bias 0): randomize them
    (also used by the fuzzer, tools/reference/fuzz/families/glm5.py)."""
    for name, p in model.named_parameters():
        if name.endswith("norm.weight") or "layernorm" in name:
            p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
        elif name.endswith("_hc.base"):
            p.copy_(0.5 * torch.randn(p.shape, generator=g))
        elif name.endswith("_hc.scale"):
            p.copy_(0.5 + torch.rand(p.shape, generator=g))
        elif name.endswith("_hc.fn"):
            p.copy_(0.3 * torch.randn(p.shape, generator=g))
        elif "index_kpool_compress" in name:
            p.copy_(0.5 * torch.randn(p.shape, generator=g))
        elif name.endswith("k_norm.bias"):
            p.copy_(0.1 * torch.randn(p.shape, generator=g))
        elif name.endswith("A_log"):
            p.copy_(0.5 * torch.randn(p.shape, generator=g))
        elif name.endswith("conv1d.weight"):
            p.copy_(0.5 * torch.randn(p.shape, generator=g))
    for layer in model.layers:
        if hasattr(layer.mlp, "gate"):
            layer.mlp.gate.e_score_correction_bias.copy_(0.3 * torch.randn(n_experts, generator=g))


def build(seed=1237):
    torch.manual_seed(seed)
    cfg = Glm5NextTextConfig(**CONFIG)
    cfg._attn_implementation = "eager"
    model = Glm5NextTextModel(cfg).float().eval()
    lm_head = torch.nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        randomize_constants(model, g, cfg.n_routed_experts)
        lm_head.weight.copy_(0.5 * torch.randn(lm_head.weight.shape, generator=g))
        model.embed_tokens.weight.copy_(torch.randn(model.embed_tokens.weight.shape, generator=g))
    return cfg, model, lm_head


def state_dict(model, lm_head):
    out = {}
    for k, v in model.state_dict().items():
        out["model." + k] = v.detach().contiguous().float()
    out["lm_head.weight"] = lm_head.weight.detach().contiguous().float()
    return out


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    cfg, model, lm_head = build()
    sd = state_dict(model, lm_head)
    save_file(sd, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    conf = {"model_type": "glm5_next", "architectures": ["Glm5NextForConditionalGeneration"]}
    conf.update(CONFIG)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(conf, f, indent=1, sort_keys=True)
        f.write("\n")
    print("params", sum(v.numel() for v in sd.values()))


if __name__ == "__main__":
    main()
