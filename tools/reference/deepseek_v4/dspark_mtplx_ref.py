"""Torch float32 reference of DSpark, DeepSeek V4's block speculative drafter, as MTPLX runs it.

Source: youssofal/MTPLX `mtplx/models/deepseek_v4_dspark.py` (commit bc8a24e), read through
the search tools; callers checked in `mtplx/deepseek_v4_dspark_generation.py` (22a4025) and the
MTPLX DeepSeek V4 speculative adapter (`draft_greedy`: `start_pos = _append_context(...)`,
`owner.propose_k5(staged_first, ...)`, drafts = `future_tokens[: width - 1]`), and the K5
attention kernel `mtplx/kernels/deepseek_v4_nvfp4_mla.py` (`_run_dspark_k5_nvfp4_mla`, route 5
of `_DECODE_NAX_SOURCE`). The golden master ds4 (snapshot 8d57664) has no DSpark code; see
docs/reference-differences.md, DeepSeek section, "DSpark (MTPLX)".

What MTPLX's DSpark is (names are MTPLX's; constants for the real model in brackets):
  * DSparkTargetRoute.__call__: the trunk runs as usual; after each layer in
    `target_layer_ids` [40, 41, 42] it taps the HC-stream mean of the layer output {S, E}.
  * DeepseekV4DSparkStage.fuse_main_rows (stage 0 only): main = main_norm(main_proj(cat taps))
    {S, E}; main_proj {E, 3E}, main_norm RMSNorm.
  * DeepseekV4DSparkOwner.prefill / _stock_commit_main + DeepseekV4DSparkAttention
    ._stock_project_kv: every stage keeps a context ring of the last `window` [128] rows
    kv_norm(wkv(main)) rope'd at their own positions (no HC, no attn_norm on `main`).
  * DeepseekV4DSparkStage (x3): a V4 decoder layer with compress ratio 0 at layer id
    num_hidden_layers + stage (so score routing, never hash routing): attn_hc.pre,
    attn_norm, DSpark attention, attn_hc.post, ffn_hc.pre, ffn_norm, MoE, ffn_hc.post.
  * DeepseekV4DSparkOwner._stock_propose_k5: block input ids = [primary, noise x 4]
    (DSPARK_BLOCK_SIZE 5, DSPARK_NOISE_TOKEN_ID 128799), embedded with the trunk embedding
    and broadcast to the HC streams; rows at positions start_pos .. start_pos + 4 where
    start_pos = number of context rows (the primary is the target's token for position
    start_pos). Three stages, then the last stage's hc_head, norm, and the trunk lm_head:
    neural_logits {5, V}.
  * K5 attention (`_run_dspark_k5_nvfp4_mla`, kernel route 5): every block row attends to
    the min(start_pos, window) context rows before start_pos AND to all five block rows
    (no causal mask inside the block), plus the per-head sink; start_pos must be > 0
    (`_checked_forward_k5`). Output: inverse rope at the row's position, grouped o_a, o_b
    (`_project_attention_output`).
  * DSparkMarkovHead + _run_greedy_future_tokens_k5: bias(prev) = markov_w2(markov_w1[prev])
    [rank 256]; future[r] = argmax(neural_logits[r] + bias(prev_r)), prev_0 = primary,
    prev_r = future[r-1]. The five futures are the drafts for positions start_pos+1 .. +5.
  * DSparkConfidenceHead: MTPLX declares only `proj = Linear(E + rank, 1, bias=False)` and
    never calls it. Its use follows the DSpark training code (deepseek-ai/DeepSpec
    `predict_confidence_step` + `_predict_confidence_logits`): c_r = sigmoid(proj(cat[h_r,
    markov_w1[prev_r]])) with h_r the normed hidden fed to lm_head and prev_r as above; it
    estimates P(row r and every row before it is accepted). The gate keeps the leading rows
    with c_r >= threshold (SPEC §2: 0.6; 0.8 for stochastic exact sampling when unset).
The stage layers are HF DeepseekV4DecoderLayer modules (same math as MTPLX's
DeepseekV4DecoderLayer for a compress-ratio-0 layer, see the trunk golden tests), built from
dspark_ref.block_config; only the attention is re-wired here for the context ring.
"""
import torch
from torch import nn
from transformers.models.deepseek_v4.modeling_deepseek_v4 import (
    DeepseekV4DecoderLayer,
    DeepseekV4HyperHead,
    DeepseekV4RMSNorm,
    apply_rotary_pos_emb,
    eager_attention_forward,
)

from dspark_ref import block_config

STAGES = 3  # DSPARK_STAGE_COUNT
BLOCK = 5   # DSPARK_BLOCK_SIZE


class MarkovHead(nn.Module):
    """MTPLX DSparkMarkovHead: markov_w1 Embedding {V, R}, markov_w2 Linear {V, R}."""

    def __init__(self, vocab: int, rank: int):
        super().__init__()
        self.markov_w1 = nn.Embedding(vocab, rank)
        self.markov_w2 = nn.Linear(rank, vocab, bias=False)

    def forward(self, prev):
        emb = self.markov_w1(prev)           # {.., R}
        return self.markov_w2(emb), emb      # bias {.., V}, embedding {.., R}


class ConfidenceHead(nn.Module):
    """MTPLX DSparkConfidenceHead: proj Linear(E + R -> 1, no bias)."""

    def __init__(self, width: int):
        super().__init__()
        self.proj = nn.Linear(width, 1, bias=False)


class DSparkStage(DeepseekV4DecoderLayer):
    """One DeepseekV4DSparkStage. State-dict names (prefix `mtp.<stage>.` in the file): the HF
    decoder layer's (self_attn.*, mlp.*, attn_hc.*, ffn_hc.*, input_layernorm =
    attn_norm, post_attention_layernorm = ffn_norm); stage 0 adds main_proj, main_norm;
    the last stage adds norm, hc_head.{hc_fn,hc_base,hc_scale}, markov_head.markov_w{1,2},
    confidence_head.proj."""

    def __init__(self, cfg, stage_id: int, n_taps: int, rank: int):
        super().__init__(block_config(cfg), 0)
        d = cfg.hidden_size
        self.stage_id = stage_id
        if stage_id == 0:
            self.main_proj = nn.Linear(n_taps * d, d, bias=False)
            self.main_norm = DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
        if stage_id == STAGES - 1:
            self.norm = DeepseekV4RMSNorm(d, eps=cfg.rms_norm_eps)
            self.hc_head = DeepseekV4HyperHead(cfg)
            self.markov_head = MarkovHead(cfg.vocab_size, rank)
            self.confidence_head = ConfidenceHead(d + rank)


def _rope(rotary, like, positions):
    pos = torch.as_tensor(positions, dtype=torch.long).view(1, -1)
    return rotary(like, pos, layer_type="main")  # cos, sin {1, S, rope/2}


def context_kv(attn, main, positions, rotary):
    """DeepseekV4DSparkAttention._stock_project_kv: main {C, E} -> rope'd kv {1, 1, C, D}."""
    cos, sin = _rope(rotary, main[None], positions)
    kv = attn.kv_norm(attn.kv_proj(main))[None, None]
    return apply_rotary_pos_emb(kv, cos, sin)


def k5_attention(attn, h, ctx_kv, positions, rotary):
    """DSpark K5 attention: h {5, E} (normed) queries see ctx rows + all 5 block rows."""
    n, heads, dim = h.shape[0], attn.num_heads, attn.head_dim
    cos, sin = _rope(rotary, h[None], positions)
    q = attn.q_b_proj(attn.q_a_norm(attn.q_a_proj(h))).view(1, n, heads, dim).transpose(1, 2)
    q = apply_rotary_pos_emb(attn.q_b_norm(q), cos, sin)                  # {1, H, 5, D}
    kv = apply_rotary_pos_emb(attn.kv_norm(attn.kv_proj(h))[None, None], cos, sin)
    keys = torch.cat([ctx_kv, kv], dim=2)                                 # {1, 1, C + 5, D}
    out, _ = eager_attention_forward(attn, q, keys, keys, None, attn.scaling)  # {1, 5, H, D}
    out = apply_rotary_pos_emb(out.transpose(1, 2), cos, -sin).transpose(1, 2)
    grouped = attn.o_a_proj(out.reshape(1, n, attn.config.o_groups, -1)).flatten(2)
    return attn.o_b_proj(grouped)                                         # {1, 5, E}


def stage_forward(stage, x, ctx_kv, positions, ids, rotary):
    """DeepseekV4DSparkStage.__call__ on x {1, 5, HC, E}."""
    post, comb, collapsed = stage.attn_hc(x)
    a = k5_attention(stage.self_attn, stage.input_layernorm(collapsed)[0], ctx_kv, positions,
                     rotary)
    x = post.unsqueeze(-1) * a.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), x)
    post, comb, collapsed = stage.ffn_hc(x)
    m = stage.mlp(stage.post_attention_layernorm(collapsed), input_ids=ids)
    return post.unsqueeze(-1) * m.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), x)


class DSpark(nn.Module):
    """DeepseekV4DSparkOwner over a HF DeepseekV4ForCausalLM trunk."""

    def __init__(self, cfg, tap_layers, rank: int, noise_token: int):
        super().__init__()
        self.tap_layers = tuple(tap_layers)
        self.noise_token = int(noise_token)
        self.window = cfg.sliding_window
        self.hc = cfg.hc_mult
        self.stages = nn.ModuleList(DSparkStage(cfg, s, len(tap_layers), rank)
                                    for s in range(STAGES))

    @torch.no_grad()
    def trunk_taps(self, model, tokens):
        """DSparkTargetRoute: HC means after the tap layers {n, 3E} + trunk logits {n, V}."""
        taps = {}
        hooks = [model.model.layers[i].register_forward_hook(
            lambda _m, _i, o, i=i: taps.__setitem__(i, o[0].mean(dim=1)))
            for i in self.tap_layers]
        logits = model(input_ids=torch.as_tensor(tokens, dtype=torch.long)[None],
                       use_cache=False).logits[0]
        for h in hooks:
            h.remove()
        return torch.cat([taps[i] for i in self.tap_layers], dim=-1), logits

    def main_rows(self, taps):
        s0 = self.stages[0]
        return s0.main_norm(s0.main_proj(taps))  # fuse_main_rows {n, E}

    @torch.no_grad()
    def propose(self, model, main, primary: int):
        """_stock_propose_k5 + greedy Markov decode + confidence, context = main {n, E} for
        positions 0..n-1, primary at position n. Returns a dict of tensors."""
        n = main.shape[0]
        assert n > 0, "DSpark needs at least one context row (start_pos > 0)"
        lo = max(0, n - self.window)
        ctx_pos = list(range(lo, n))
        pos = list(range(n, n + BLOCK))
        rotary = model.model.rotary_emb
        ids = torch.tensor([[primary] + [self.noise_token] * (BLOCK - 1)])
        x = model.model.embed_tokens(ids)[:, :, None, :].expand(1, BLOCK, self.hc, -1).contiguous()
        for st in self.stages:
            ctx = context_kv(st.self_attn, main[lo:n], ctx_pos, rotary)
            x = stage_forward(st, x, ctx, pos, ids, rotary)
        last = self.stages[-1]
        h = last.norm(last.hc_head(x))[0]                    # {5, E}
        neural = model.lm_head(h)                            # {5, V}
        prev = primary
        drafts, dlog, conf, prevs = [], [], [], []
        for r in range(BLOCK):
            bias, emb = last.markov_head(torch.tensor(prev))
            lg = neural[r] + bias
            c = torch.sigmoid(last.confidence_head.proj(torch.cat([h[r], emb])))[0]
            prevs.append(prev)
            prev = int(torch.argmax(lg))
            drafts.append(prev)
            dlog.append(lg)
            conf.append(c)
        return {"hidden": h, "neural_logits": neural, "draft_logits": torch.stack(dlog),
                "drafts": torch.tensor(drafts, dtype=torch.int32),
                "prev": torch.tensor(prevs, dtype=torch.int32),
                "confidence": torch.stack(conf)}


def gate_prefix(conf, threshold: float) -> int:
    """Leading rows kept by the confidence gate (c_r >= threshold)."""
    k = 0
    for c in conf.tolist():
        if c < threshold:
            break
        k += 1
    return k
