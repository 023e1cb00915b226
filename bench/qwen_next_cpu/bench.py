#!/usr/bin/env python3
"""Prefill and decode tokens/s of the qwen_next CPU model vs HF transformers eager, same CPU,
same run, same weights (float32), same threads.

  bench.py [--threads 2] [--prefill 256] [--decode 32] [--out bench/results/qwen_next_cpu.md]

Models: the committed tiny model, and a larger random qwen4_exp config (`medium`, built
here with HF's classes into a temp dir; not committed). Ours runs `ds4server run` (receipt on
stderr); HF runs Qwen4ExpForCausalLM with attn_implementation="eager": one prefill call,
then `decode` single-token calls with the cache. Both timed after loading; best of 2.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools/reference/qwen_next"))

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

import make_tiny  # noqa: E402
from transformers.models.qwen4_exp.modeling_qwen4_exp import Qwen4ExpForCausalLM  # noqa: E402

MEDIUM = dict(vocab_size=8192, hidden_size=512, num_attention_heads=8, num_key_value_heads=2, head_dim=128,
              linear_key_head_dim=64, linear_value_head_dim=64, linear_num_key_heads=4, linear_num_value_heads=8,
              moe_intermediate_size=256, shared_expert_intermediate_size=256, num_experts=16,
              num_experts_per_tok=4, hc_lowrank=64, ple_embed_dim=256, ngram_vocab_size_base=20000,
              indexer_n_heads=4, indexer_head_dim=64, indexer_budget=128, eos_token_id=8000,
              initializer_range=0.02)


def build_medium(out: Path):
    torch.manual_seed(7)
    cfg = make_tiny.tiny_config()
    for k, v in MEDIUM.items():
        setattr(cfg, k, v)
    cfg.rope_parameters["partial_rotary_factor"] = 0.25
    cfg._attn_implementation = "eager"
    model = Qwen4ExpForCausalLM(cfg).float().eval()
    sd = {k: v.contiguous() for k, v in model.state_dict().items()
          if not any(s in k for s in ("layer_multipliers", "ngram_heads_vocab_sizes", "ngram_heads_offsets"))}
    out.mkdir(parents=True, exist_ok=True)
    save_file(sd, str(out / "model.safetensors"))
    d = cfg.to_dict()
    d.pop("dtype", None)
    (out / "config.json").write_text(json.dumps(d, indent=1))
    return cfg, model


def load_hf(model_dir: Path):
    from transformers.models.qwen4_exp.configuration_qwen4_exp import Qwen4ExpTextConfig
    from safetensors.torch import load_file
    cfg = Qwen4ExpTextConfig(**{k: v for k, v in json.loads((model_dir / "config.json").read_text()).items()
                                 if k not in ("architectures", "mtp_num_hidden_layers", "torch_dtype")})
    cfg._attn_implementation = "eager"
    model = Qwen4ExpForCausalLM(cfg).float().eval()
    sd = {k: v for k, v in load_file(str(model_dir / "model.safetensors")).items() if not k.startswith("mtp.")}
    model.load_state_dict(sd, strict=False)
    return cfg, model


@torch.no_grad()
def bench_hf(model, tokens, decode):
    best_p, best_d = 0.0, 0.0
    for _ in range(2):
        t0 = time.perf_counter()
        r = model(input_ids=torch.tensor([tokens]), use_cache=True)
        t1 = time.perf_counter()
        cache, tok = r.cache, int(r.logits[0, -1].argmax())
        for _ in range(decode):
            r = model(input_ids=torch.tensor([[tok]]), cache=cache, use_cache=True)
            cache, tok = r.cache, int(r.logits[0, -1].argmax())
        t2 = time.perf_counter()
        best_p, best_d = max(best_p, len(tokens) / (t1 - t0)), max(best_d, decode / (t2 - t1))
    return best_p, best_d


def bench_ours(binary, model_dir, tokens, decode, threads):
    best_p, best_d = 0.0, 0.0
    for _ in range(2):
        r = subprocess.run([binary, "run", "--model", str(model_dir), "--tokens", ",".join(map(str, tokens)),
                            "-n", str(decode + 1), "--threads", str(threads)], capture_output=True, text=True,
                           check=True)
        m = re.search(r"\(([\d.]+) tok/s\).*decode ([\d.]+) tok/s", r.stderr)
        best_p, best_d = max(best_p, float(m.group(1))), max(best_d, float(m.group(2)))
    return best_p, best_d


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", type=int, default=256)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--binary", default=str(ROOT / "build/release/bin/ds4server"))
    ap.add_argument("--out", default=str(ROOT / "bench/results/qwen_next_cpu.md"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        medium = Path(tmp) / "medium"
        build_medium(medium)
        for name, d in (("tiny", ROOT / "tests/data/qwen_next/model"), ("medium", medium)):
            cfg, model = load_hf(d)
            g = torch.Generator().manual_seed(1)
            tokens = torch.randint(0, cfg.eos_token_id, (a.prefill,), generator=g).tolist()
            nparams = sum(p.numel() for p in model.parameters())
            hp, hd = bench_hf(model, tokens, a.decode)
            op, od = bench_ours(a.binary, d, tokens, a.decode, a.threads)
            rows.append((name, nparams, hp, op, hd, od))
            print(f"{name}: params {nparams/1e6:.1f}M prefill HF {hp:.1f} ours {op:.1f} tok/s; "
                  f"decode HF {hd:.1f} ours {od:.1f} tok/s", flush=True)
            del model
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    lines = ["# qwen_next CPU vs HF transformers eager", "",
             f"Command: `/work/refvenv/bin/python bench/qwen_next_cpu/bench.py --threads {a.threads} "
             f"--prefill {a.prefill} --decode {a.decode}` (release build).",
             f"Hardware: {cpu}, {a.threads} threads (torch.set_num_threads and --threads). float32 weights, "
             f"prompt {a.prefill} random ids, {a.decode} greedy decode steps, best of 2.",
             f"Peer: torch {torch.__version__}, transformers (qwen4_exp, eager attention, torch GDN fallbacks).", "",
             "| model | params | prefill HF tok/s | prefill ours tok/s | ratio | decode HF tok/s | decode ours tok/s | ratio |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, n, hp, op, hd, od in rows:
        lines.append(f"| {name} | {n/1e6:.1f}M | {hp:.1f} | {op:.1f} | {op/hp:.1f}x | {hd:.1f} | {od:.1f} | {od/hd:.1f}x |")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
