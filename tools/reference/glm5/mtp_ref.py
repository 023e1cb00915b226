"""Torch reference of a GLM 5.x Flash integrated MTP (next-token-prediction) draft head.

Provenance (docs/reference-differences.md, GLM section): the golden master antirez/ds4 has
no GLM code at all (snapshot 8d57664, every branch and PR ref), and HF glm5_next ships only
the trunk. What is public:
  * HF transformers glm5_next, modeling_glm5_next.py, Glm5NextPreTrainedModel:
    `_keys_to_ignore_on_load_unexpected = [r"layers\\.45\\.", r"layers\\.\\d+\\.shared_head\\."]`
    -> the GLM-5.3-Flash checkpoint carries one extra layer at index num_hidden_layers (45)
    with a `shared_head`: the GLM-4.x "nextn" layout.
  * That layout's public implementation, vLLM vllm/model_executor/models/glm4_moe_mtp.py:
    Glm4MoeMultiTokenPredictorLayer.forward: x = eh_proj(cat([enorm(embed(t)), hnorm(h)]))
    (eh_proj {d, 2d}, embedding first), mtp_block = one full decoder layer,
    out = residual + block output; Glm4MoeMultiTokenPredictor.compute_logits: logits =
    shared_head.head(shared_head.norm(out)). Its proposer pairs the target hidden state of
    position i with the token at i+1 (input ids shifted by one) to draft token i+2, and feeds
    the head's own (pre-norm) output back for the next depth. The target hidden is the trunk
    output after its final norm (vLLM's Glm4MoeModel returns the normed state).
What this reference adds for GLM 5.x (our construction, no public source):
  * hyper-connections: GLM 5.x's trunk collapses its 4 HC streams with an unweighted mean
    (Glm5NextTextHyperHead) before the final norm; the head consumes that collapsed, normed
    state (1 x d, as eh_proj's shape requires), expands its input to hc streams the same way
    the trunk expands embeddings (Glm5NextTextModel.forward), runs one Glm5NextTextDecoderLayer
    with its own attn_hc/ffn_hc, and collapses with the same mean; the head's `norm` is
    shared_head.norm and the logits use the trunk's lm_head (GLM-4.x checkpoints store
    shared_head.head as a copy of it).
  * the block's layer type: "indexed_attention" (MLA + DSA indexer, "full" indexer) with a
    sparse MoE, like GLM-4.x's full-attention MTP layer (the real config's pattern would
    make index 45 a KDA layer; the checkpoint, not available here, decides).
  * the head keeps its own attention history: one row per committed position (row i pairs
    h_i with t_{i+1}), so after a prefill of n tokens followed by the target's next token
    t_n the history has n rows; GLM attention is NoPE, so positions do not enter.
  * vLLM zeroes the embedding of a row at position 0; rows here start at position 1 (the
    token of row i sits at i+1), so that rule never fires.
"""
import copy

import torch
from torch import nn
from transformers.models.glm5_next.modeling_glm5_next import (
    Glm5NextTextModel,
    Glm5NextTextRMSNorm,
)


def block_config(cfg):
    c = copy.deepcopy(cfg)
    c.num_hidden_layers = 1
    c.layer_types = ["indexed_attention"]
    c.mlp_layer_types = ["sparse"]
    c.indexer_types = ["full"]
    c._attn_implementation = "eager"
    return c


class MTPHead(nn.Module):
    """Weights (prefix `model.layers.<L>.` in the safetensors file, L = num_hidden_layers,
    like the checkpoint): enorm, hnorm, eh_proj, shared_head.norm, and the decoder layer's own
    names (self_attn.*, mlp.*, attn_hc.*, ffn_hc.*, input_layernorm, post_attention_layernorm).
    """

    def __init__(self, cfg):
        super().__init__()
        d = cfg.hidden_size
        self.enorm = Glm5NextTextRMSNorm(d, cfg.rms_norm_eps)
        self.hnorm = Glm5NextTextRMSNorm(d, cfg.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * d, d, bias=False)
        # One-layer trunk: its forward expands to hc streams, runs the layer, takes the HC
        # mean and applies `norm` (= shared_head.norm). embed_tokens is unused (not saved).
        self.block = Glm5NextTextModel(block_config(cfg))

    def inputs(self, prev_hidden, tok_emb):
        # prev_hidden {S, d} (trunk: normed output; deeper: head pre-norm output), tok_emb {S, d}
        return self.eh_proj(torch.cat([self.enorm(tok_emb), self.hnorm(prev_hidden)], dim=-1))

    def run(self, x):
        """Head layer over its history rows x {S, d} (causal). Returns (pre-norm output
        {S, d} = HC mean of the layer's streams, normed output {S, d})."""
        streams = []
        hook = self.block.layers[0].register_forward_hook(
            lambda _m, _i, o: streams.append(o[0] if isinstance(o, tuple) else o))
        normed = self.block(inputs_embeds=x[None], use_cache=False).last_hidden_state[0]
        hook.remove()
        return streams[0][0].mean(dim=1), normed

    def saved_state(self, layer_index: int) -> dict:
        out = {}
        pre = f"model.layers.{layer_index}."
        for k, v in self.state_dict().items():
            if k.startswith("block.embed_tokens"):
                continue
            if k == "block.norm.weight":
                name = "shared_head.norm.weight"
            elif k.startswith("block.layers.0."):
                name = k[len("block.layers.0."):]
            else:
                name = k
            out[pre + name] = v.detach().contiguous().float()
        return out


def init_head(head: MTPHead, seed: int, n_experts: int) -> None:
    """Randomised like tools/reference/glm5/make_tiny.py build() (no constant parameters)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(head.named_parameters()):
            if name.startswith("block.embed_tokens"):
                continue
            if name.endswith("norm.weight") or "layernorm" in name:
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("_hc.base"):
                p.copy_(0.5 * torch.randn(p.shape, generator=g))
            elif name.endswith("_hc.scale"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("_hc.fn"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            elif "index_kpool_compress" in name or name.endswith("k_norm.bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) * (1.0 / p.shape[-1] ** 0.5))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        head.block.layers[0].mlp.gate.e_score_correction_bias.copy_(
            0.3 * torch.randn(n_experts, generator=g))


@torch.no_grad()
def draft_chain(model, lm_head, head: MTPHead, tokens, next_token: int, depth: int):
    """Draft logits for depths 1..depth after the prompt `tokens` (n) and the target's token
    `next_token` (t_n). History row i (0 <= i < n) = inputs(trunk normed hidden h_i, t_{i+1});
    the last row yields draft 1; draft k+1 appends inputs(head pre-norm output of the previous
    row, greedy draft k). Returns ({depth, vocab} logits, {depth} greedy drafts)."""
    toks = torch.as_tensor(list(tokens), dtype=torch.long)
    h = model(input_ids=toks[None], use_cache=False).last_hidden_state[0]  # {n, d}, normed
    nxt = torch.cat([toks[1:], torch.tensor([int(next_token)])])
    emb = model.embed_tokens
    rows = head.inputs(h, emb(nxt))
    logits, drafts = [], []
    for _ in range(depth):
        pre, normed = head.run(rows)
        lg = lm_head(normed[-1]).float()
        d = int(lg.argmax())
        logits.append(lg)
        drafts.append(d)
        rows = torch.cat([rows, head.inputs(pre[-1:], emb(torch.tensor([d])))], dim=0)
    return torch.stack(logits), torch.tensor(drafts, dtype=torch.int32)
