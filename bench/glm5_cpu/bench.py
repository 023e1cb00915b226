"""GLM 5.x CPU: ds4server's model vs HF transformers eager (glm5_next), same CPU, same run.

Builds a random "bench" model (bigger than the test model, same structure as make_tiny.py:
KDA + full/shared DSA layers, dense then MoE, 4 hc streams) in a temp dir, then times
prefill of one PROMPT-token chunk and DECODE greedy tokens on both, with the same thread count.
Usage: /work/refvenv/bin/python bench/glm5_cpu/bench.py BENCH_BIN [--prompt 512] [--decode 32]
       [--threads 2] [--out bench/results/glm5_cpu.md]
"""
import argparse
import inspect
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import torch
import transformers
from transformers import DynamicCache

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "reference", "glm5"))
import make_tiny  # noqa: E402

BENCH = dict(vocab_size=4096, hidden_size=512, intermediate_size=1024, moe_intermediate_size=256,
             num_attention_heads=8, num_key_value_heads=8, n_routed_experts=16, num_experts_per_tok=4,
             kv_lora_rank=128, q_lora_rank=192, qk_nope_head_dim=64, v_head_dim=64,
             index_topk=256, index_head_dim=64, index_n_heads=8, index_kpool=4,
             linear_head_dim=64, linear_num_heads=8, swiglu_limit=10.0, max_position_embeddings=65536)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench_bin")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_grad_enabled(False)
    make_tiny.CONFIG.update(BENCH)
    cfg, model, lm_head = make_tiny.build()
    tmp = tempfile.mkdtemp(prefix="glm5_bench_")
    from safetensors.torch import save_file
    save_file(make_tiny.state_dict(model, lm_head), os.path.join(tmp, "model.safetensors"))
    conf = {"model_type": "glm5_next"}
    conf.update(make_tiny.CONFIG)
    json.dump(conf, open(os.path.join(tmp, "config.json"), "w"))

    vocab = cfg.vocab_size
    prompt = torch.tensor([[(i * 7919 + 13) % (vocab - 1) for i in range(a.prompt)]])
    cache = DynamicCache(config=cfg)
    # transformers >= 5.2x names the argument `cache`; older 5.x `past_key_values`.
    kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    t0 = time.perf_counter()
    h = model(input_ids=prompt, use_cache=True, **{kw: cache}).last_hidden_state
    logits = lm_head(h[0, -1])
    t1 = time.perf_counter()
    hf_tokens = []
    for _ in range(a.decode):
        nxt = int(logits.argmax())
        hf_tokens.append(nxt)
        h = model(input_ids=torch.tensor([[nxt]]), use_cache=True, **{kw: cache}).last_hidden_state
        logits = lm_head(h[0, -1])
    t2 = time.perf_counter()
    hf = {"prefill_tok_s": a.prompt / (t1 - t0), "decode_tok_s": a.decode / (t2 - t1)}

    res = subprocess.run([a.bench_bin, tmp, str(a.prompt), str(a.decode), str(a.threads)],
                         check=True, capture_output=True, text=True)
    ours = json.loads(res.stdout.strip().splitlines()[-1])
    same = ours["tokens"] == hf_tokens
    params = sum(p.numel() for p in model.parameters()) + lm_head.weight.numel()
    lines = [
        "# GLM 5.x CPU: ds4server vs HF transformers eager (glm5_next)",
        "",
        f"Command: `/work/refvenv/bin/python bench/glm5_cpu/bench.py {a.bench_bin} --prompt {a.prompt} "
        f"--decode {a.decode} --threads {a.threads}`",
        f"Work: random glm5_next model, {params / 1e6:.1f}M params f32 (hidden 512, 6 layers: 3 KDA, "
        f"2 full + 1 shared DSA; 16 experts top-4), prompt {a.prompt} tokens in one chunk "
        f"(sparse: index_topk 256), then {a.decode} greedy decode steps.",
        f"Hardware: {platform.processor() or platform.machine()}, {a.threads} threads each "
        f"(torch {torch.__version__}, transformers {transformers.__version__}, set_num_threads({a.threads})), "
        f"same run.",
        f"Greedy tokens identical: {same}",
        "",
        "| | prefill tok/s | decode tok/s |",
        "|---|---|---|",
        f"| HF eager | {hf['prefill_tok_s']:.1f} | {hf['decode_tok_s']:.2f} |",
        f"| ds4server CPU | {ours['prefill_tok_s']:.1f} | {ours['decode_tok_s']:.2f} |",
        f"| ratio (ours / HF) | {ours['prefill_tok_s'] / hf['prefill_tok_s']:.2f}x "
        f"| {ours['decode_tok_s'] / hf['decode_tok_s']:.2f}x |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
