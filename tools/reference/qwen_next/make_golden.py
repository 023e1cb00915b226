#!/usr/bin/env python3
"""Golden vectors for the tiny Qwen3.8 Flash Next model (float32, HF `qwen4_exp`, eager).

Per prompt pN (N = 1, 7, 64, 300 tokens; fixed ids, p64 contains EOS to exercise PLE's
segment reset):
  pN.tokens          I32 {N}
  pN.prefill_logits  F32 {vocab}      last position after prefill (HF cache path)
  pN.greedy          I32 {32}         greedy[0] = argmax(prefill); greedy[i+1] = argmax(decode[i])
  pN.decode_logits   F32 {32, vocab}  logits after feeding greedy[i] (HF cache, 1 token/step)
  pN.hidden.L<k>     F32 {6}          HF hidden_states[k] (widened hc*d row of the last prompt
                                      position): mean, absmax, values at indices 0,37,70,127;
                                      L0 = decoder input (embedding repeated), L<k> = output
                                      of decoder layer k-1 (HF records inputs, then the mixer)
  pN.hidden.final    F32 {6}          same for the hyper_connection_mixer output {d}
                                      (indices taken modulo d)
  pN.mtp_logits      F32 {3, vocab}   MTP draft logits, depths 1..3 (mtp_ref.draft_chain)
  pN.mtp_drafts      I32 {3}          greedy drafts of those depths
  meta.nocache_max_abs_diff F32 {4}   per prompt: max |cache - no-cache| over all logits rows,
                                      the measured float32 noise floor used to size tolerances
Usage: make_golden.py MODEL_DIR OUT_FILE
"""
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny  # noqa: E402
import mtp_ref  # noqa: E402

STEPS = 32
SAMPLE_IDX = [0, 37, 70, 127]


def prompts(vocab: int, eos: int):
    rng = np.random.default_rng(4242)
    out = {}
    for n in (1, 7, 64, 300):
        ids = rng.integers(0, vocab, size=n).astype(np.int64)
        ids[ids == eos] = 7
        if n == 64:
            ids[30] = eos
        out[f"p{n}"] = ids
    return out


def load(model_dir: Path):
    cfg, model, head = make_tiny.build()
    sd = load_file(str(model_dir / "model.safetensors"))
    trunk = {k: v for k, v in sd.items() if not k.startswith("mtp.")}
    missing, unexpected = model.load_state_dict(trunk, strict=False)
    bad = [m for m in missing if not any(s in m for s in ("layer_multipliers", "vocab_sizes", "offsets"))]
    assert not bad and not unexpected, (bad, unexpected)
    head.load_state_dict({k[4:]: v for k, v in sd.items() if k.startswith("mtp.")}, strict=False)
    return cfg, model, head


@torch.no_grad()
def run_prompt(cfg, model, head, ids, out, name):
    widened = {}
    last_layer = model.model.layers[-1]
    hook = last_layer.register_forward_hook(lambda m, a, o: widened.__setitem__("h", o))
    x = torch.tensor(ids).view(1, -1)
    res = model(input_ids=x, use_cache=True, output_hidden_states=True)
    hook.remove()
    cache = res.cache
    prefill = res.logits[0, -1].float()
    out[f"{name}.tokens"] = ids.astype(np.int32)
    out[f"{name}.prefill_logits"] = prefill.numpy()
    # hidden_states: the widened decoder input, the outputs of layers 0..L-2, the mixer output.
    hs = res.hidden_states
    for k, h in enumerate(hs):
        row = h[0, -1].float()
        key = f"{name}.hidden.L{k}" if k < len(hs) - 1 else f"{name}.hidden.final"
        out[key] = np.array(
            [row.mean(), row.abs().max(), *[row[i % row.numel()] for i in SAMPLE_IDX]], dtype=np.float32)
    tok = int(prefill.argmax())
    greedy, rows = [], []
    for _ in range(STEPS):
        greedy.append(tok)
        r = model(input_ids=torch.tensor([[tok]]), cache=cache, use_cache=True)
        cache = r.cache
        lg = r.logits[0, -1].float()
        rows.append(lg.numpy())
        tok = int(lg.argmax())
    out[f"{name}.greedy"] = np.array(greedy, dtype=np.int32)
    out[f"{name}.decode_logits"] = np.stack(rows)
    # No-cache full pass over prompt + greedy tokens: the float32 noise floor between
    # two exact evaluation orders (chunked vs recurrent GDN, cached vs full attention).
    full = torch.tensor(np.concatenate([ids, greedy])).view(1, -1)
    nc = model(input_ids=full, use_cache=False).logits[0].float()
    n = len(ids)
    ref = torch.cat([prefill.view(1, -1), torch.tensor(np.stack(rows))[:-1]])
    noise = float((nc[n - 1:n - 1 + STEPS] - ref).abs().max())
    mtp_logits, drafts = mtp_ref.draft_chain(model, head, widened["h"], x[0], greedy[0], 3)
    out[f"{name}.mtp_logits"] = mtp_logits.float().numpy()
    out[f"{name}.mtp_drafts"] = drafts.numpy()
    return noise


def main():
    model_dir = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/qwen_next/model")
    out_file = Path(sys.argv[2] if len(sys.argv) > 2 else "tests/data/qwen_next/golden.safetensors")
    torch.set_num_threads(1)  # reproducible reductions
    cfg, model, head = load(model_dir)
    out, noise = {}, []
    for name, ids in prompts(cfg.vocab_size, cfg.eos_token_id).items():
        noise.append(run_prompt(cfg, model, head, ids, out, name))
        print(name, "greedy", out[f"{name}.greedy"][:8], "noise", noise[-1],
              "mtp", out[f"{name}.mtp_drafts"], flush=True)
    out["meta.nocache_max_abs_diff"] = np.array(noise, dtype=np.float32)
    save_file(out, str(out_file), metadata={"generator": "tools/reference/qwen_next/make_golden.py"})
    print("wrote", out_file)


if __name__ == "__main__":
    main()
