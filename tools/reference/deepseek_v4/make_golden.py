"""Golden vectors for the tiny DeepSeek V4 model (HF transformers eager, float32, CPU).

For each prompt (fixed token ids, lengths 1, 7, 64, 300):
  pN.tokens          I32 {N}
  pN.prefill_logits  F32 {vocab}      logits of the last prompt position (one cached prefill)
  pN.greedy          I32 {32}         greedy tokens: greedy[0] = argmax(prefill_logits), ...
  pN.decode_logits   F32 {32, vocab}  row i = logits after feeding greedy[i] (HF cache path)
  pN.hidden.L<l>     F32 {6}          layer l output HC state at the last prompt position:
                                      mean, abs-max, 4 sampled values (flat {hc, hidden})
  pN.nocache_max_diff F32 {1}         max |logit diff| between the cached path and one
                                      no-cache forward over prompt+greedy (sizes tolerance)
Usage: make_golden.py MODEL_DIR OUT_FILE
"""
import sys

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import DeepseekV4ForCausalLM
from transformers.cache_utils import DynamicCache

LENGTHS = (1, 7, 64, 300)
DECODE = 32
SAMPLE_IDX = (0, 17, 100, 255)


def prompt_tokens(n: int, vocab: int) -> np.ndarray:
    rng = np.random.default_rng(1000 + n)
    return rng.integers(2, vocab, size=n, dtype=np.int64)


def load_reference(model_dir: str) -> DeepseekV4ForCausalLM:
    """The trunk as every deepseek_v4 generator runs it (make_golden, make_mtp, make_dspark):
    torch seed 0, float32, eval, eager attention."""
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    model.config._attn_implementation = "eager"
    return model


def run(model, tokens: np.ndarray, out: dict) -> None:
    n = len(tokens)
    key = f"p{n}"
    ids = torch.tensor(tokens[None, :], dtype=torch.long)
    cache = DynamicCache(config=model.config)
    layer_out = []
    hooks = [layer.register_forward_hook(lambda _m, _i, o: layer_out.append(o.detach()))
             for layer in model.model.layers]
    with torch.no_grad():
        res = model(input_ids=ids, cache=cache, use_cache=True)
    for h in hooks:
        h.remove()
    logits = res.logits[0, -1].float()
    # layer_out[l]: layer l's output HC state {1, tokens, hc, hidden}
    for l, hs in enumerate(layer_out):
        flat = hs[0, -1].reshape(-1).float().numpy()
        vals = [flat.mean(), np.abs(flat).max()] + [flat[i] for i in SAMPLE_IDX]
        out[f"{key}.hidden.L{l}"] = np.array(vals, dtype=np.float32)
    greedy, dec = [], []
    cur = int(torch.argmax(logits))
    for _ in range(DECODE):
        greedy.append(cur)
        with torch.no_grad():
            step = model(input_ids=torch.tensor([[cur]]), cache=cache, use_cache=True).logits[0, -1].float()
        dec.append(step.numpy())
        cur = int(torch.argmax(step))
    out[f"{key}.tokens"] = tokens.astype(np.int32)
    out[f"{key}.prefill_logits"] = logits.numpy().astype(np.float32)
    out[f"{key}.greedy"] = np.array(greedy, dtype=np.int32)
    out[f"{key}.decode_logits"] = np.stack(dec).astype(np.float32)
    # Tolerance sizing: the same sequence in one no-cache forward.
    full = torch.tensor(np.concatenate([tokens, greedy])[None, :], dtype=torch.long)
    with torch.no_grad():
        ref = model(input_ids=full, use_cache=False).logits[0].float().numpy()
    cached = np.concatenate([logits.numpy()[None], np.stack(dec)[:-1]])
    diff = np.abs(ref[n - 1 : n - 1 + DECODE] - cached).max()
    out[f"{key}.nocache_max_diff"] = np.array([diff], dtype=np.float32)
    top2 = np.sort(logits.numpy())[-2:]
    print(f"{key}: greedy={greedy[:8]}... nocache max|diff|={diff:.3e} top2 margin={top2[1]-top2[0]:.3f}")


def main() -> None:
    model_dir, out_file = sys.argv[1], sys.argv[2]
    model = load_reference(model_dir)
    out = {}
    for n in LENGTHS:
        run(model, prompt_tokens(n, model.config.vocab_size), out)
    save_file(out, out_file, metadata={"format": "np"})


if __name__ == "__main__":
    main()
