"""Golden vectors for the tiny GLM 5.x Flash model (float32, HF cache path).

For each prompt (fixed token ids, lengths 1, 7, 64, 300):
  pN.tokens          I32 {N}
  pN.prefill_logits  F32 {vocab}      logits of the last prompt position
  pN.greedy          I32 {32}         greedy[0] = argmax(prefill), greedy[i+1] = argmax(decode[i])
  pN.decode_logits   F32 {32, vocab}  logits after feeding greedy[i] (one token per HF forward)
  pN.hidden.L<l>     F32 {6}          prefill output of decoder layer l {tokens, hc, hidden}:
                                      mean, abs-max, values at 4 fixed flat indices
Also prints the tolerance evidence: cache (decode) path vs one no-cache forward over
prompt + greedy, and the smallest top-1/top-2 margin.
Usage: make_golden.py MODEL_DIR OUT.safetensors
"""
import sys

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import DynamicCache

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from make_tiny import build  # noqa: E402

LENGTHS = [1, 7, 64, 300]
STEPS = 32


def prompt_tokens(n, vocab):
    rng = np.random.default_rng(1000 + n)
    return rng.integers(0, vocab - 1, size=n, dtype=np.int64)  # never the EOS id (vocab-1)


def checksum(t):
    flat = t.reshape(-1)
    idx = [0, flat.numel() // 3, (2 * flat.numel()) // 3, flat.numel() - 1]
    return np.array([flat.mean().item(), flat.abs().max().item()] + [flat[i].item() for i in idx],
                    dtype=np.float32)


def main():
    out = sys.argv[2]
    cfg, model, lm_head = build()
    torch.set_grad_enabled(False)
    data = {}
    worst_tol, worst_margin = 0.0, float("inf")
    for n in LENGTHS:
        toks = prompt_tokens(n, cfg.vocab_size)
        hidden = {}
        hooks = [layer.register_forward_hook(
            lambda m, i, o, l=l: hidden.__setitem__(l, o[0] if isinstance(o, tuple) else o))
            for l, layer in enumerate(model.layers)]
        cache = DynamicCache(config=cfg)
        h = model(input_ids=torch.tensor(toks)[None], cache=cache, use_cache=True).last_hidden_state
        for hk in hooks:
            hk.remove()
        prefill = lm_head(h[0, -1]).float()
        greedy, decode = [], []
        nxt = int(prefill.argmax())
        for _ in range(STEPS):
            greedy.append(nxt)
            h = model(input_ids=torch.tensor([[nxt]]), cache=cache, use_cache=True).last_hidden_state
            logits = lm_head(h[0, -1]).float()
            decode.append(logits)
            nxt = int(logits.argmax())
        decode = torch.stack(decode)
        key = f"p{n}"
        data[key + ".tokens"] = toks.astype(np.int32)
        data[key + ".prefill_logits"] = prefill.numpy().astype(np.float32)
        data[key + ".greedy"] = np.array(greedy, dtype=np.int32)
        data[key + ".decode_logits"] = decode.numpy().astype(np.float32)
        for l, t in hidden.items():
            data[f"{key}.hidden.L{l}"] = checksum(t[0])
        # Tolerance evidence: one no-cache pass over prompt + greedy[:-1].
        full = torch.tensor(np.concatenate([toks, np.array(greedy[:-1])]))[None]
        ref = lm_head(model(input_ids=full, use_cache=False).last_hidden_state[0]).float()
        both = torch.cat([prefill[None], decode[:-1]])
        diff = (ref[n - 1:] - both).abs().max().item()
        top2 = torch.cat([prefill[None], decode]).topk(2, dim=-1).values
        margin = (top2[:, 0] - top2[:, 1]).min().item()
        worst_tol, worst_margin = max(worst_tol, diff), min(worst_margin, margin)
        print(f"{key}: cache-vs-nocache max|dlogit|={diff:.3e} min top1-top2 margin={margin:.3e} "
              f"logit absmax={prefill.abs().max():.2f} greedy={greedy[:8]}...")
    print(f"worst cache-vs-nocache {worst_tol:.3e}, worst margin {worst_margin:.3e}")
    save_file(data, out)


if __name__ == "__main__":
    main()
