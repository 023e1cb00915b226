"""Tiny integrated-MTP head for the tiny GLM 5.x model + its draft vectors (mtp_ref.py).

Writes, next to the untouched trunk files:
  OUT/mtp.safetensors        head weights, F32, checkpoint-style names
                             `model.layers.6.{enorm,hnorm,eh_proj,shared_head.norm}.weight`
                             + the decoder layer's names under `model.layers.6.`
                             (6 = num_hidden_layers of the tiny trunk)
  OUT/golden_mtp.safetensors per prompt pN (make_golden.prompt_tokens, N = 1, 7, 64, 300):
    pN.tokens        I32 {N}
    pN.next_token    I32 {1}      greedy target token after the prompt (= golden pN.greedy[0])
    pN.draft_logits  F32 {D, V}   head logits for drafts 1..D (D = 4)
    pN.drafts        I32 {D}      greedy drafts
Usage: make_mtp.py OUT_DIR
"""
import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file as save_np
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_golden import LENGTHS, prompt_tokens  # noqa: E402
from make_tiny import build  # noqa: E402
from mtp_ref import MTPHead, draft_chain, init_head  # noqa: E402

SEED = 4242
DEPTH = 4


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    cfg, model, lm_head = build()
    torch.set_grad_enabled(False)
    torch.manual_seed(SEED)
    head = MTPHead(cfg).float().eval()
    init_head(head, SEED + 1, cfg.n_routed_experts)
    save_file(head.saved_state(cfg.num_hidden_layers), os.path.join(out, "mtp.safetensors"),
              metadata={"format": "pt"})
    res = {}
    for n in LENGTHS:
        toks = prompt_tokens(n, cfg.vocab_size)
        h = model(input_ids=torch.tensor(toks)[None], use_cache=False).last_hidden_state
        nxt = int(lm_head(h[0, -1]).argmax())
        logits, drafts = draft_chain(model, lm_head, head, toks, nxt, DEPTH)
        top2 = logits.topk(2, dim=-1).values
        key = f"p{n}"
        res[f"{key}.tokens"] = toks.astype(np.int32)
        res[f"{key}.next_token"] = np.array([nxt], dtype=np.int32)
        res[f"{key}.draft_logits"] = logits.numpy().astype(np.float32)
        res[f"{key}.drafts"] = drafts.numpy()
        print(f"{key}: next={nxt} drafts={drafts.tolist()} min margin="
              f"{(top2[:, 0] - top2[:, 1]).min():.3e} std={logits.std():.3f}")
    save_np(res, os.path.join(out, "golden_mtp.safetensors"))


if __name__ == "__main__":
    main()
