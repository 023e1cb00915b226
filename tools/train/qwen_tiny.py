"""The default model: a tiny Qwen3.8 Flash Next (HF `qwen4_exp` text part) plus its MTP head.

Trunk: transformers' Qwen4ExpForCausalLM (GDN + QSA layers, hyper-connections, MoE with a
shared expert, PLE on one linear-attention layer) at small width.

MTP head: follows MTPLX (youssofal/MTPLX, mtplx/models/qwen4_exp.py, class Qwen4ExpMTP,
_prepare_inputs_eager / fuse_and_run; TextModel.mtp_forward): the trunk's PRE-mixer widened
stream {B,S,hc*d} is RMS-normed at full width (pre_fc_norm_hidden), every d-wide stream goes
through the shared fc_hidden {d,d}, the normed token embedding goes through fc_embedding and
is broadcast-added to every stream; one full-attention (QSA) decoder layer with its own
tensors runs on that, and the head's own hyper_connection_mixer collapses to d for the shared
lm_head. Deeper drafts feed the head's own pre-mixer output back in. The qwen branch had no
reference MTP module when this was written (tools/reference/qwen/ absent): if one lands there,
this duplicate should be replaced by it.

Checkpoint layout = the real Qwen3.8 Flash Next one: model.language_model.*, lm_head.weight,
mtp.*; config.json = {"model_type": "qwen4_exp", "text_config": {...}}.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers.models.qwen4_exp import modeling_qwen4_exp as hf
from transformers.models.qwen4_exp.configuration_qwen4_exp import Qwen4ExpTextConfig

EOT_ID = 8166  # <|endoftext|> in our tokenizer (prep_data.py CONTROL_TOKENS order)
IM_END_ID = 8168

TEXT_CONFIG = dict(
    vocab_size=8192, hidden_size=192, num_hidden_layers=4,
    layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    num_attention_heads=4, num_key_value_heads=2, head_dim=64,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
    linear_value_head_dim=32, linear_conv_kernel_dim=4, output_gate_type="sigmoid",
    num_experts=8, num_experts_per_tok=2, moe_intermediate_size=48,
    shared_expert_intermediate_size=96, norm_topk_prob=True, router_aux_loss_coef=0.001,
    hc_count=4, hc_lowrank=16,
    ple_layer_ids=[2], ple_embed_dim=64, ple_conv_kernel_size=4, ngram_size=3, heads_per_ngram=2,
    ngram_vocab_size_base=2003, make_ngram_vocab_size_divisible_by=128, seed=1234,
    split_ngram_parts=1,
    indexer_n_heads=2, indexer_kv_heads=1, indexer_head_dim=32, indexer_budget=512,
    indexer_compress_ratio=4,
    rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                     "mrope_section": [3, 3, 2], "mrope_interleaved": True},
    hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=4096, initializer_range=0.02,
    tie_word_embeddings=False, eos_token_id=EOT_ID, pad_token_id=EOT_ID, bos_token_id=None,
)
# Stored in config.json only (the HF text config does not model the MTP head).
MTP_FIELDS = {"mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False}
NON_WEIGHT_BUFFERS = ("layer_multipliers", "ngram_heads_vocab_sizes", "ngram_heads_offsets")


def make_config(overrides: dict | None = None) -> Qwen4ExpTextConfig:
    cfg = Qwen4ExpTextConfig(**{**TEXT_CONFIG, **(overrides or {})})
    cfg._attn_implementation = "sdpa"
    return cfg


# ---- QSA indexer fast path ------------------------------------------------------------------
# With at most indexer_budget visible keys per query the indexer selects every complete block
# plus the tail, i.e. exactly the visible set: its mask is then the attention mask itself. HF's
# reference loops over every (batch, query) in Python, far too slow for training, so take the
# identity whenever it provably holds and fall back to HF otherwise.
_hf_indexer_forward = hf.Qwen4ExpTextQSAIndexer.forward


def _indexer_forward(self, hidden_states, position_embeddings, attention_mask, cache=None, **kw):
    visible = attention_mask if attention_mask.dtype == torch.bool else attention_mask == 0
    if cache is None:
        if visible.shape[-1] <= self.token_budget or int(visible.sum(-1).max()) <= self.token_budget:
            return visible
    return _hf_indexer_forward(self, hidden_states, position_embeddings, attention_mask, cache, **kw)


hf.Qwen4ExpTextQSAIndexer.forward = _indexer_forward


# ---- MTP head --------------------------------------------------------------------------------
def mtp_layer_index(cfg) -> int:
    """MTPLX Qwen4ExpMTP: the head's layer is built like the first full-attention non-PLE layer."""
    return next(i for i, t in enumerate(cfg.layer_types)
                if t != "linear_attention" and (i + 1) not in cfg.ple_layer_ids)


class MTPHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.hc, self.d = cfg.hc_count, d
        self.pre_fc_norm_embedding = hf.Qwen4ExpTextRMSNorm(d, eps=eps)
        self.pre_fc_norm_hidden = hf.Qwen4ExpTextRMSNorm(d * cfg.hc_count, eps=eps)  # full width
        self.fc_embedding = nn.Linear(d, d, bias=False)
        self.fc_hidden = nn.Linear(d, d, bias=False)
        self.layers = nn.ModuleList([hf.Qwen4ExpTextDecoderLayer(cfg, mtp_layer_index(cfg))])
        self.hyper_connection_mixer = hf.Qwen4ExpTextGatedResidual(cfg, use_combine=False)

    def fuse(self, widened, tok_emb):
        # widened {B,S,hc*d}, tok_emb {B,S,d} -> {B,S,hc*d}
        b, s, w = widened.shape
        hn = self.pre_fc_norm_hidden(widened).view(b, s, self.hc, self.d)
        en = self.fc_embedding(self.pre_fc_norm_embedding(tok_emb))
        return (self.fc_hidden(hn) + en[:, :, None, :]).reshape(b, s, w)


_mask_cache: dict = {}


def chain_mask(s: int, depth: int, device) -> torch.Tensor:
    """{1,1,depth*s,depth*s} bool: row (k, t) sees depth-1 rows 0..t and rows (j, t), j<=k.

    This is the MTP cache at draft time: committed history (depth-1 rows), then the draft
    chain of the current position appended one row per depth.
    """
    key = (s, depth, str(device))
    if key not in _mask_cache:
        t = torch.arange(s, device=device)
        causal = t[None, :] <= t[:, None]
        eye = t[None, :] == t[:, None]
        rows = []
        for k in range(depth):
            blocks = [causal if j == 0 else (eye if j <= k else torch.zeros_like(eye))
                      for j in range(depth)]
            rows.append(torch.cat(blocks, dim=1))
        _mask_cache[key] = torch.cat(rows, dim=0)[None, None]
    return _mask_cache[key]


def mtp_chain(model, head: MTPHead, widened, tokens, depth: int):
    """Run the head `depth` times. widened {B,S,hc*d}; tokens: list of `depth` {B,S} id tensors
    (tokens[k][:, t] = the token at t+k+1). Returns a list of {B,S,d} mixed hidden states.
    """
    emb = model.model.embed_tokens
    b, s, _ = widened.shape
    rows, outs, state = [], [], widened
    for k in range(depth):
        rows.append(head.fuse(state, emb(tokens[k])))
        x = torch.cat(rows, dim=1)  # {B,(k+1)S,hc*d}
        pos = torch.cat([torch.arange(s, device=x.device) + j for j in range(k + 1)])
        pos = pos[None, None, :].expand(1, b, -1)
        pe = model.model.rotary_emb(x, pos)
        mask = chain_mask(s, k + 1, x.device).expand(b, 1, -1, -1)
        y = head.layers[0](x, position_embeddings=pe, attention_mask=mask)
        state = y[:, k * s:]  # this depth's rows: pre-mixer output, the next depth's input
        outs.append(head.hyper_connection_mixer(state))
    return outs


class Widened:
    """Captures the trunk's pre-mixer widened stream (MTPLX TextModel._last_widened)."""

    def __init__(self, model):
        self.value = None
        model.model.hyper_connection_mixer.register_forward_pre_hook(self._hook)

    def _hook(self, _module, args):
        self.value = args[0]


def build(overrides: dict | None = None):
    cfg = make_config(overrides)
    model = hf.Qwen4ExpForCausalLM(cfg)
    head = MTPHead(cfg)
    head.apply(model._init_weights)
    for m in head.modules():  # post_init's zero-centred norms for the head too
        if isinstance(m, hf.Qwen4ExpTextRMSNorm):
            nn.init.zeros_(m.weight)
    return cfg, model, head


# ---- checkpoints -----------------------------------------------------------------------------
def state_dict(model, head) -> dict:
    out = {}
    for k, v in model.state_dict().items():
        if k.endswith(NON_WEIGHT_BUFFERS):
            continue
        if k.startswith("model."):
            out["model.language_model." + k[len("model."):]] = v
        else:
            out[k] = v
    for k, v in head.state_dict().items():
        if not k.endswith(NON_WEIGHT_BUFFERS):
            out["mtp." + k] = v
    return out


def load_state(model, head, tensors: dict):
    trunk, mtp = {}, {}
    for k, v in tensors.items():
        if k.startswith("mtp."):
            mtp[k[4:]] = v
        elif k.startswith("model.language_model."):
            trunk["model." + k[len("model.language_model."):]] = v
        else:
            trunk[k] = v
    for mod, sd in ((model, trunk), (head, mtp)):
        missing, unexpected = mod.load_state_dict(sd, strict=False)
        missing = [m for m in missing if not m.endswith(NON_WEIGHT_BUFFERS)]
        if missing or unexpected:
            raise ValueError(f"checkpoint mismatch: missing={missing} unexpected={unexpected}")


def config_json(cfg) -> dict:
    text = {k: getattr(cfg, k) for k in TEXT_CONFIG}
    text["layer_types"] = ["full_attention" if t == "indexed_attention" else t
                           for t in cfg.layer_types]
    text.update(MTP_FIELDS, model_type="qwen4_exp_text")
    return {"architectures": ["Qwen4ExpForConditionalGeneration"], "model_type": "qwen4_exp",
            "text_config": text, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}


def load_dir(path: str | Path, device="cpu"):
    """Build from <path>/config.json and load every *.safetensors there (fp32 math)."""
    from safetensors.torch import load_file
    path = Path(path)
    conf = json.loads((path / "config.json").read_text())["text_config"]
    over = {k: conf[k] for k in TEXT_CONFIG if k in conf}
    cfg, model, head = build(over)
    files = sorted(path.glob("model-fp32-*.safetensors")) or sorted(path.glob("*.safetensors"))
    tensors = {}
    for f in files:
        tensors.update({k: v.float() for k, v in load_file(str(f)).items()})
    load_state(model, head, tensors)
    return cfg, model.to(device).eval(), head.to(device).eval()


def count_params(model, head) -> dict:
    sd = state_dict(model, head)
    total = sum(v.numel() for v in sd.values())
    mtp = sum(v.numel() for k, v in sd.items() if k.startswith("mtp."))
    emb = sum(v.numel() for k, v in sd.items() if "embed_tokens" in k or k == "lm_head.weight")
    return {"total": total, "mtp": mtp, "embed_and_head": emb, "trunk_layers": total - mtp - emb}


def ce(logits, targets):
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def perplexity(loss: float) -> float:
    return math.exp(min(loss, 50.0))
