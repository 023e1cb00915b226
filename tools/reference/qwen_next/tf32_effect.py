# How far TF32 operands move the tiny Qwen's logits: every nn.Linear's input and weight rounded
# to TF32 (10 mantissa bits; round to nearest and truncation), the indexer's q/k projection left
# exact and the MoE router (not an nn.Linear) too, as the CUDA tensor-core chunk does. HF float32
# reference, p300's 300 tokens in one no-cache pass: the order of magnitude that
# test_qwen_next_cuda item 8's tolerance must cover (tests/cuda/qwen_next_tensor_cores.h).
# Usage (tree root): /work/refvenv/bin/python tools/reference/qwen_next/tf32_effect.py
import sys
from pathlib import Path
import numpy as np, torch
sys.path.insert(0, "tools/reference/qwen_next")
import make_golden
from safetensors.numpy import load_file
torch.manual_seed(0)
cfg, model, head = make_golden.load(Path("tests/data/qwen_next/model"))
model.eval()
g = load_file("tests/data/qwen_next/golden.safetensors")
ids = torch.tensor(np.concatenate([g["p300.tokens"], g["p64.tokens"]])[None, :300].astype(np.int64))
def trunc_tf32(t, mode):
    b = t.contiguous().view(torch.int32)
    if mode == "trunc": b = b & ~0x1FFF
    else: b = (b + 0x1000) & ~0x1FFF
    return b.view(torch.float32)
orig = torch.nn.Linear.forward
exact = set()
for n, m in model.named_modules():
    if n.endswith("index_qk_proj"): exact.add(id(m))
def run(mode):
    def fwd(self, x):
        if mode is None or id(self) in exact: return orig(self, x)
        return torch.nn.functional.linear(trunc_tf32(x, mode), trunc_tf32(self.weight, mode), self.bias)
    torch.nn.Linear.forward = fwd
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=False).logits[0].float().numpy()
    torch.nn.Linear.forward = orig
    return out
ref = run(None)
for mode in ["rn", "trunc"]:
    e = run(mode)
    d = np.abs(e - ref)
    s = np.sort(ref, axis=1); margin = s[:, -1] - s[:, -2]
    am = (e.argmax(1) == ref.argmax(1))
    print(mode, "max", d.max(), "mean", d.mean(), "rows max p50/p99", np.percentile(d.max(1), [50, 99]),
          "argmax differs", (~am).sum(), "min margin of differing", margin[~am].min() if (~am).any() else None)
