"""Tiny DSpark drafter (MTPLX deepseek_v4_dspark.py) for the tiny DeepSeek V4 model + vectors.

Writes, next to the untouched trunk files (reference: dspark_mtplx_ref.py):
  OUT/dspark_config.json   the DSpark fields of the tiny model, MTPLX ModelArgs names
                           (dspark_block_size, dspark_noise_token_id, dspark_target_layer_ids,
                           dspark_markov_rank) + dspark_stages
  OUT/dspark.safetensors   stage weights stored as F16 (values are what the reference computes
                           with, upcast to float32), names `mtp.<stage>.<DSparkStage name>`
  OUT/golden_dspark.safetensors, per case C (prompt tokens as make_golden.prompt_tokens):
    C.tokens        I32 {n}      prompt; context rows = trunk positions 0..n-1
    C.primary       I32 {1}      target argmax after the prompt (block row 0, position n)
    C.hidden        F32 {5, E}   normed last-stage hidden per block row (lm_head input)
    C.draft_logits  F32 {5, V}   neural logits + Markov bias of the row's predecessor
    C.prev          I32 {5}      Markov predecessor per row: [primary, drafts[0..3]]
    C.drafts        I32 {5}      argmax(draft_logits): drafts for positions n+1..n+5
    C.confidence    F32 {5}      sigmoid(proj . [hidden, markov_w1[prev]])
    C.gate_prefix   I32 {2}      rows kept by the gate at thresholds 0.6 and 0.8 (c >= t)
    C.target_next   I32 {5}      the target's greedy tokens for positions n+1..n+5
    C.accepted      I32 {1}      leading drafts equal to target_next (greedy verify)
Usage: make_dspark.py MODEL_DIR OUT_DIR
"""
import copy
import json
import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file as save_np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dspark_mtplx_ref import BLOCK, STAGES, DSpark, gate_prefix  # noqa: E402
from dspark_ref import init_head  # noqa: E402
from make_golden import load_reference, prompt_tokens  # noqa: E402

SEED = 5151
RANK = 16
THRESHOLDS = (0.6, 0.8)
PROMPTS = (1, 7, 64, 300)


def build(cfg):
    taps = tuple(range(cfg.num_hidden_layers - 3, cfg.num_hidden_layers))  # real: 40, 41, 42
    noise = cfg.vocab_size - 1                                             # real: 128799
    ds = DSpark(cfg, taps, RANK, noise).to(torch.float32).eval()
    init_head(ds, SEED)
    with torch.no_grad():  # stored as F16: compute with exactly the stored values
        for t in list(ds.parameters()) + list(ds.buffers()):
            t.copy_(t.half().float())
    return ds


@torch.no_grad()
def greedy_after(model, tokens, k):
    seq, out = list(tokens), []
    for _ in range(k):
        lg = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1]
        seq.append(int(torch.argmax(lg)))
        out.append(seq[-1])
    return out


def f64_diff(model, ds, toks, primary, ref):
    """Same reference in float64 (sizes the tolerance)."""
    m64, d64 = copy.deepcopy(model).double(), copy.deepcopy(ds).double()
    for mod in list(m64.modules()) + list(d64.modules()):
        if hasattr(mod, "config"):  # grouped_mm has no float64 kernel
            mod.config._experts_implementation = "eager"
    taps, _ = d64.trunk_taps(m64, toks)
    r = d64.propose(m64, d64.main_rows(taps), primary)
    return float((r["draft_logits"] - ref["draft_logits"].double()).abs().max())


def main() -> None:
    model_dir, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    model = load_reference(model_dir)
    cfg = model.config
    ds = build(cfg)
    meta = {"dspark_block_size": BLOCK, "dspark_noise_token_id": ds.noise_token,
            "dspark_target_layer_ids": list(ds.tap_layers), "dspark_markov_rank": RANK,
            "dspark_stages": STAGES}
    with open(os.path.join(out, "dspark_config.json"), "w") as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write("\n")
    state = {f"mtp.{k.split('.', 2)[1]}.{k.split('.', 2)[2]}": v.half().numpy()
             for k, v in ds.state_dict().items()}
    save_np(state, os.path.join(out, "dspark.safetensors"), metadata={"format": "pt"})
    res = {}
    for n in PROMPTS:
        toks = prompt_tokens(n, cfg.vocab_size)
        taps, lg = ds.trunk_taps(model, toks)
        primary = int(torch.argmax(lg[-1]))
        r = ds.propose(model, ds.main_rows(taps), primary)
        tgt = greedy_after(model, list(toks) + [primary], BLOCK)
        acc = 0
        while acc < BLOCK and int(r["drafts"][acc]) == tgt[acc]:
            acc += 1
        k = f"p{n}"
        res[f"{k}.tokens"] = toks.astype(np.int32)
        res[f"{k}.primary"] = np.array([primary], dtype=np.int32)
        for name in ("hidden", "draft_logits", "confidence"):
            res[f"{k}.{name}"] = r[name].numpy().astype(np.float32)
        res[f"{k}.prev"] = r["prev"].numpy()
        res[f"{k}.drafts"] = r["drafts"].numpy()
        res[f"{k}.gate_prefix"] = np.array([gate_prefix(r["confidence"], t) for t in THRESHOLDS],
                                           dtype=np.int32)
        res[f"{k}.target_next"] = np.array(tgt, dtype=np.int32)
        res[f"{k}.accepted"] = np.array([acc], dtype=np.int32)
        top2 = torch.topk(r["draft_logits"], 2, dim=-1).values
        print(f"{k}: primary={primary} drafts={r['drafts'].tolist()} target={tgt} "
              f"conf={[round(c, 3) for c in r['confidence'].tolist()]} "
              f"min margin={float((top2[:, 0] - top2[:, 1]).min()):.3f} "
              f"f64 diff={f64_diff(model, ds, toks, primary, r):.2e}")
    save_np(res, os.path.join(out, "golden_dspark.safetensors"))


if __name__ == "__main__":
    main()
