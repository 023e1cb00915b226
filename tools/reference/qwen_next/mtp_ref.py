"""Torch reference of the Qwen3.8 Flash Next MTP (multi-token prediction) draft head.

Transformers ships only the trunk; the golden master for the head is MTPLX
(youssofal/MTPLX, mtplx/models/qwen4_exp.py):
  * class Qwen4ExpMTP: modules pre_fc_norm_embedding [d], pre_fc_norm_hidden [hc*d]
    (a FULL-width RMSNorm, not grouped), fc_embedding [d,d], fc_hidden [d,d] (shared by all
    hc substreams), layers[0] = one decoder layer built with the index of the first
    attention layer that carries no PLE (so: QSA attention + MoE + hyper-connections with
    its own weights), hyper_connection_mixer = GatedResidual(use_combine=False).
  * Qwen4ExpMTP._prepare_inputs_eager: fused = fc_hidden(norm_h(widened) per substream)
    + fc_embedding(norm_e(tok_emb)) broadcast into every substream.
  * TextModel.mtp_forward / mtp_update_cache: `widened` is the trunk's PRE-mixer widened
    stream [B,S,hc*d] (Qwen4ExpTextModel._forward keeps it as _last_widened); the token is
    the NEXT token (row i pairs trunk state i with token i+1); logits go through the trunk
    lm_head (TextModel._head_logits). Deeper drafts recurse on the head's own pre-mixer
    output (fuse_and_run returns it).
  * make_mtp_cache: the head keeps its own QSA cache; positions are that cache's offset
    (contract mtp_position_mode="cache"), i.e. 0, 1, 2, ... over the head's own history.
  * Model.attach_mtp: pre_fc norms ship zero-centered ((1+w) convention), like every
    Qwen4ExpTextRMSNorm in an HF checkpoint.
"""
import torch
from torch import nn

from transformers.models.qwen4_exp.modeling_qwen4_exp import (
    Qwen4ExpTextDecoderLayer,
    Qwen4ExpTextGatedResidual,
    Qwen4ExpTextRMSNorm,
    Qwen4ExpTextRotaryEmbedding,
)


def head_layer_index(cfg) -> int:
    """MTPLX Qwen4ExpMTP.__init__: first non-linear layer that is not a PLE layer."""
    return next(i for i, t in enumerate(cfg.layer_types)
                if t != "linear_attention" and (i + 1) not in cfg.ple_layer_ids)


class MTPHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg.hidden_size
        self.hc = cfg.hc_count
        self.pre_fc_norm_embedding = Qwen4ExpTextRMSNorm(d, eps=cfg.rms_norm_eps)
        self.pre_fc_norm_hidden = Qwen4ExpTextRMSNorm(d * cfg.hc_count, eps=cfg.rms_norm_eps)
        self.fc_embedding = nn.Linear(d, d, bias=False)
        self.fc_hidden = nn.Linear(d, d, bias=False)
        self.layers = nn.ModuleList([Qwen4ExpTextDecoderLayer(cfg, head_layer_index(cfg))])
        self.hyper_connection_mixer = Qwen4ExpTextGatedResidual(cfg, use_combine=False)
        self.rotary = Qwen4ExpTextRotaryEmbedding(cfg)

    def prepare(self, widened, tok_emb):
        # widened {B,S,hc*d}, tok_emb {B,S,d}
        B, S, W = widened.shape
        hn = self.pre_fc_norm_hidden(widened).reshape(B, S, self.hc, -1)
        en = self.fc_embedding(self.pre_fc_norm_embedding(tok_emb))
        return (self.fc_hidden(hn) + en[:, :, None, :]).reshape(B, S, W)

    def run(self, fused):
        """The head's decoder layer over rows at positions 0..S-1 (its own history),
        causal, no cache: equal to MTPLX's incremental cache path row by row."""
        B, S, _ = fused.shape
        pos = torch.arange(S).view(1, 1, S).expand(3, B, S)
        cos_sin = self.rotary(fused, pos)
        mask = torch.full((S, S), torch.finfo(torch.float32).min).triu(1).view(1, 1, S, S)
        return self.layers[0](fused, position_embeddings=cos_sin, attention_mask=mask,
                              conv_mask=None, cache=None, ple_input_ids=None)


def init_head(head: MTPHead, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in head.named_parameters():
            if p.ndim == 1 and ("norm" in name or "layernorm" in name):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith("A_log"):
                p.copy_(torch.empty(p.shape).uniform_(0.01, 16, generator=g).log())
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


@torch.no_grad()
def draft_chain(model, head: MTPHead, widened, tokens, next_token, depth: int):
    """Draft logits for depths 1..depth after the prompt.

    widened {1,n,hc*d}: trunk pre-mixer stream of the n prompt rows; tokens {n}: prompt;
    next_token: the trunk's token after the prompt. Row i of the head's history pairs
    widened[i] with token i+1; the last row pairs widened[n-1] with next_token and yields
    the depth-1 draft. Depth k+1 appends (head pre-mixer output of the previous row, the
    greedy depth-k draft) as one more row. Returns ({depth, vocab} logits, {depth} drafts).
    """
    emb = model.model.embed_tokens
    nxt = torch.cat([tokens[1:], torch.tensor([next_token])]).view(1, -1)
    rows = head.prepare(widened, emb(nxt))
    logits, drafts = [], []
    for _ in range(depth):
        out = head.run(rows)  # {1,S,hc*d}, pre-mixer
        last = out[:, -1:]
        lg = model.lm_head(head.hyper_connection_mixer(last))[0, 0]
        d = int(lg.argmax())
        logits.append(lg)
        drafts.append(d)
        rows = torch.cat([rows, head.prepare(last, emb(torch.tensor([[d]])))], dim=1)
    return torch.stack(logits), torch.tensor(drafts, dtype=torch.int32)
