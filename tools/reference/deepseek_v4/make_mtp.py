"""Tiny MTP (ds4 `mtp.0.*`) head for the tiny DeepSeek V4 model + its draft vectors.

Writes, next to the untouched trunk files:
  OUT/mtp.safetensors   head weights, float32, names `mtp.0.<MTPHead state_dict name>`
                        (dspark_ref.MTPHead: e_proj, h_proj, enorm, hnorm, norm,
                        hc_head.{hc_fn,hc_base,hc_scale}, block.<HF decoder layer names>)
  OUT/golden_mtp.safetensors, per case C:
    C.tokens        I32 {n}       prompt (make_golden.prompt_tokens)
    C.next_token    I32 {1}       the target's greedy token after the prompt (consumed at n)
    C.hist          I32 {1}       head cache rows from earlier decode probes (see draft_chain)
    C.draft_logits  F32 {D, V}    head logits for drafts 0..D-1
    C.drafts        I32 {D}       greedy drafts
    C.margin        F32 {D}       top-1 minus top-2 logit per draft (ds4's gate value)
    C.target_argmax I32 {1}       argmax of the target logits at n (ds4 requires draft 0 ==)
Usage: make_mtp.py MODEL_DIR OUT_DIR
"""
import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file as save_np
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dspark_ref import MTPHead, draft_chain, init_head, trunk_hc  # noqa: E402
from make_golden import load_reference, prompt_tokens  # noqa: E402

SEED = 4321
DEPTH = 4
# (prompt length, hist); hist = n + 1: every consumed position has a head row (our C++ head)
CASES = ((1, 1), (7, 1), (64, 1), (64, 4), (300, 1), (7, 8), (64, 65), (300, 301))


def main() -> None:
    model_dir, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    model = load_reference(model_dir)
    head = MTPHead(model.config).to(torch.float32).eval()
    init_head(head, SEED)
    state = {f"mtp.0.{k}": v.contiguous() for k, v in head.state_dict().items()}
    save_file(state, os.path.join(out, "mtp.safetensors"), metadata={"format": "pt"})
    res = {}
    for n, hist in CASES:
        toks = prompt_tokens(n, model.config.vocab_size)
        _, lg = trunk_hc(model, toks)
        nxt = int(torch.argmax(lg[-1]))
        _, lg2 = trunk_hc(model, list(toks) + [nxt])
        logits, drafts, margins = draft_chain(model, head, toks, nxt, DEPTH, hist)
        key = f"p{n}h{hist}"
        res[f"{key}.tokens"] = toks.astype(np.int32)
        res[f"{key}.next_token"] = np.array([nxt], dtype=np.int32)
        res[f"{key}.hist"] = np.array([hist], dtype=np.int32)
        res[f"{key}.draft_logits"] = logits.numpy().astype(np.float32)
        res[f"{key}.drafts"] = drafts.numpy()
        res[f"{key}.margin"] = margins.numpy()
        res[f"{key}.target_argmax"] = np.array([int(torch.argmax(lg2[-1]))], dtype=np.int32)
        print(f"{key}: next={nxt} drafts={drafts.tolist()} margins="
              f"{[round(m, 3) for m in margins.tolist()]} std={logits.std():.3f}")
    save_np(res, os.path.join(out, "golden_mtp.safetensors"))


if __name__ == "__main__":
    main()
