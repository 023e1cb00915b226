"""How far TF32 operand rounding alone moves the tiny GLM 5.x model's logits (test_glm5_cuda item 8).

CPU only (torch + transformers with glm5_next): the HF reference of tests/data/glm5 (make_tiny.py
build(), seed 1237) over p300's 300 tokens, Logits for every row, once in float32 and once with
the inputs and weights of the products the tensor-core chunk runs as TF32 GEMMs rounded to TF32
(10-bit mantissa; round-to-nearest and truncation): every nn.Linear except the MoE router and the
DSA indexer's (exact on the GPU too); the hyper-connection mixes and routed experts are not
Linear modules and stay float32 as on the GPU (tiny experts are 24 wide: gemv_rows). Prints the
statistics test_glm5_cuda item 8 prints for the GPU, so the two can be compared.
Usage: python tf32_sensitivity.py TREE_ROOT
"""
import sys

import numpy as np
import torch

sys.path.insert(0, sys.argv[1] + "/tools/reference/glm5")
from make_golden import prompt_tokens  # noqa: E402
from make_tiny import build  # noqa: E402


def to_tf32(x, mode):
    b = x.contiguous().view(torch.int32)
    if mode == "nearest":
        b = b + (0xFFF + ((b >> 13) & 1))
    return (b & ~0x1FFF).view(torch.float32)


def logits(model, lm_head, toks):
    h = model(input_ids=torch.tensor(toks)[None], use_cache=False).last_hidden_state[0]
    return lm_head(h).float()


def stats(a, b, name):
    d = (a - b).abs()
    row = d.max(dim=1).values.sort().values
    top2 = b.topk(2, dim=1).values
    margin = top2[:, 0] - top2[:, 1]
    scale = b.abs().max().item()
    flips = ((a.argmax(1) != b.argmax(1)) & (margin > 0.04)).sum().item()
    worst = int(d.max(dim=1).values.argmax())
    print(f"{name}: {b.shape[0]} rows, max |logit| {scale:.3g}, mean |diff| {d.mean():.3g}, row max p50 "
          f"{row[len(row) // 2]:.3g} p90 {row[len(row) * 9 // 10]:.3g} max {row[-1]:.3g} (row {worst}), rows over "
          f"2e-2: {(row > 2e-2).sum().item()}, argmax differs on {flips} rows with margin > 4e-2")


def main():
    torch.set_grad_enabled(False)
    cfg, model, lm_head = build()
    toks = prompt_tokens(300, cfg.vocab_size)
    ref = logits(model, lm_head, toks)
    linears = [(n, m) for n, m in list(model.named_modules()) + [("lm_head", lm_head)]
               if isinstance(m, torch.nn.Linear) and "indexer" not in n and not n.endswith("mlp.gate")]
    saved = {n: m.weight.clone() for n, m in linears}
    for mode in ("nearest", "truncate"):
        hooks = []
        for n, m in linears:
            m.weight.copy_(to_tf32(saved[n], mode))
            hooks.append(m.register_forward_pre_hook(lambda mod, args, mode=mode: (to_tf32(args[0], mode),)))
        out = logits(model, lm_head, toks)
        for h in hooks:
            h.remove()
        for n, m in linears:
            m.weight.copy_(saved[n])
        stats(out, ref, f"TF32 ({mode}) vs float32, HF reference on CPU")
    print(f"({len(linears)} Linear modules rounded)")


if __name__ == "__main__":
    main()
