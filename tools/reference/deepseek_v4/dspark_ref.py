"""Torch reference of DeepSeek V4's speculative draft head as the golden master runs it.

Golden master: antirez/ds4 (snapshot 8d57664), which drafts with the checkpoint's MTP block
(`mtp.0.*`), not with MTPLX's DSpark (see docs/reference-differences.md, DeepSeek section:
DSpark is a different 3-stage K5 drafter that ds4 does not have). Read from ds4.c:
  * struct ds4_mtp_weights / mtp_weights_bind / mtp_weights_validate_layout: e_proj, h_proj
    {E,E}; enorm, hnorm, norm {E}; hc_head_fn {HC, HC*E}, hc_head_base {HC}, hc_head_scale
    {1}; one full block (hc_attn_*, attention with sinks and q/kv/output LoRA, hc_ffn_*,
    top-k routed MoE with exp_probs_b bias + shared expert) and NO compressor, indexer or
    tid2eid: a sliding-window-only, top-k-routed layer.
  * metal_graph_eval_mtp_draft_from_hc(): one draft row =
        e   = e_proj(rms_norm(embed(token), enorm))                      {E}, same for all HC
        h_s = h_proj(rms_norm(prev_hc[s], hnorm))     per stream s        {HC, E}
        x   = e + h_s                                                     {HC, E}
        y   = block(x) as layer index 1 (metal_graph_encode_decode_layer(il=1): compress
              ratio 0, main rope theta, freq scale 1), with the head's OWN raw SWA cache
        logits = output(rms_norm(hc_head(y), norm))   base model's output matrix;
              hc_head = ds4's output-HC collapse (flat rms_norm, hc_head_fn, sigmoid(pre *
              scale + base) + eps weights), here HF's DeepseekV4HyperHead.
    y is the next draft's prev_hc.
  * ds4_session_eval_internal() + ds4_session_eval_speculative_argmax(): after the target
    consumed token t_p at position p, draft 0 = head(prev_hc = the target's final HC state at
    p, token = t_p, position p); draft 0 must equal argmax(target logits at p) (ds4 checks
    it "for free"); draft k >= 1 = head(prev_hc = the head's y of draft k-1, token = draft
    k-1, position p + k). Drafts are greedy argmax. After a prefill the head's cache is
    empty (mtp_n_raw = 0); each decode step that probes the head appends its row.
  * Confidence: ds4 gates on the draft's top-1 minus top-2 logit (mtp_margin, default 3.0,
    DS4_MTP_MIN_MARGIN), applied when exactly 2 drafts were made and not in strict mode.
The block itself is HF's DeepseekV4DecoderLayer (same math as ds4's layer, per the trunk
golden tests), built from a copy of the trunk config whose single layer is
"sliding_attention" + "moe".
"""
import copy

import torch
from torch import nn
from transformers.models.deepseek_v4.modeling_deepseek_v4 import (
    DeepseekV4DecoderLayer,
    DeepseekV4HyperHead,
    DeepseekV4RMSNorm,
)


def block_config(cfg):
    c = copy.deepcopy(cfg)
    c.num_hidden_layers = 1
    c.layer_types = ["sliding_attention"]
    c.mlp_layer_types = ["moe"]
    c._attn_implementation = "eager"
    return c


class MTPHead(nn.Module):
    """ds4's mtp.0 head. State-dict names (prefix `mtp.0.` in the safetensors file):
    e_proj/h_proj/enorm/hnorm/norm, hc_head.{hc_fn,hc_base,hc_scale}, block.<HF decoder
    layer names> (self_attn.*, mlp.*, attn_hc.*, ffn_hc.*, input_layernorm, ...)."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.hidden_size
        self.hc = cfg.hc_mult
        self.window = cfg.sliding_window
        self.e_proj = nn.Linear(d, d, bias=False)
        self.h_proj = nn.Linear(d, d, bias=False)
        self.enorm = DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
        self.hnorm = DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
        self.norm = DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
        self.hc_head = DeepseekV4HyperHead(cfg)
        self.block = DeepseekV4DecoderLayer(block_config(cfg), 0)

    def inputs(self, prev_hc, tok_emb):
        # prev_hc {S, HC, E}, tok_emb {S, E} -> block input {S, HC, E}
        e = self.e_proj(self.enorm(tok_emb))
        return e[:, None, :] + self.h_proj(self.hnorm(prev_hc))

    def run(self, x, positions, rotary):
        """Block over the head's history rows x {S, HC, E} at `positions` {S}: causal with
        the sliding window (ds4 raw SWA cache), no compression. Returns y {S, HC, E}."""
        S = x.shape[0]
        pos = torch.as_tensor(positions, dtype=torch.long).view(1, S)
        cos_sin = rotary(x, pos, layer_type="main")
        i = torch.arange(S).view(S, 1)
        j = torch.arange(S).view(1, S)
        ok = (j <= i) & (i - j < self.window)
        mask = torch.where(ok, 0.0, torch.finfo(torch.float32).min).view(1, 1, S, S)
        return self.block(x[None], position_embeddings={"main": cos_sin}, position_ids=pos,
                          attention_mask=mask, input_ids=None, cache=None)[0]

    def logits(self, y_row, lm_head):
        # y_row {HC, E} -> {vocab}
        return lm_head(self.norm(self.hc_head(y_row[None, None])))[0, 0]


def init_head(head: MTPHead, seed: int) -> None:
    """Random head weights drawn like tools/reference/deepseek_v4/make_tiny.py randomize()."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(head.named_parameters()):
            shape = p.shape
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(shape, generator=g))
            elif name.endswith(".scale") or name.endswith("hc_scale"):
                p.copy_(0.5 + 0.5 * torch.rand(shape, generator=g))
            elif name.endswith(".base") or name.endswith("hc_base"):
                p.copy_(0.5 * torch.randn(shape, generator=g))
            elif name.endswith("sinks"):
                p.copy_(torch.randn(shape, generator=g))
            elif name.endswith(".fn") or name.endswith("hc_fn"):
                p.copy_(0.1 * torch.randn(shape, generator=g))
            elif p.dim() >= 2:
                p.copy_(torch.randn(shape, generator=g) * (1.5 / shape[-1] ** 0.5))
            else:
                p.copy_(0.1 * torch.randn(shape, generator=g))
        for name, b in sorted(head.named_buffers()):
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.05 * torch.randn(b.shape, generator=g))


@torch.no_grad()
def trunk_hc(model, tokens):
    """Target's final HC state (last layer output, before hc_head) {n, HC, E} + logits."""
    out = []
    hook = model.model.layers[-1].register_forward_hook(lambda _m, _i, o: out.append(o))
    logits = model(input_ids=torch.as_tensor(tokens, dtype=torch.long)[None],
                   use_cache=False).logits[0]
    hook.remove()
    return out[0][0], logits


@torch.no_grad()
def draft_chain(model, head: MTPHead, tokens, next_token: int, depth: int, hist: int = 1):
    """ds4's draft chain after the target consumed `next_token` at position n = len(tokens).

    The head's cache holds `hist` rows made by earlier decode-step probes (ds4 appends one
    per committed token): row for position q pairs the target's HC state at q with token
    t_q, for q = n-hist+1 .. n (hist = 1: the state right after a prefill + one decode).
    Draft k >= 1 appends (the head's y of the previous row, draft k-1) at position n + k.
    Returns ({depth, vocab} logits, {depth} greedy drafts, {depth} top1-top2 margins).
    """
    seq = list(tokens) + [int(next_token)]
    n = len(tokens)
    hcs, _ = trunk_hc(model, seq)
    emb = model.model.embed_tokens
    lo = n - hist + 1
    rows = head.inputs(hcs[lo:n + 1], emb(torch.tensor(seq[lo:n + 1])))
    positions = list(range(lo, n + 1))
    logits, drafts, margins = [], [], []
    for k in range(depth):
        y = head.run(rows, positions, model.model.rotary_emb)
        lg = head.logits(y[-1], model.lm_head).float()
        top2 = torch.topk(lg, 2).values
        d = int(torch.argmax(lg))
        logits.append(lg)
        drafts.append(d)
        margins.append(float(top2[0] - top2[1]))
        nxt = head.inputs(y[-1:], emb(torch.tensor([d])))
        rows = torch.cat([rows, nxt], dim=0)
        positions.append(n + k + 1)
    return (torch.stack(logits), torch.tensor(drafts, dtype=torch.int32),
            torch.tensor(margins, dtype=torch.float32))
