"""DeepSeek V4 CPU throughput: ds4server's CPU model vs HF transformers eager, same machine,
same run, same random model (a mid-size config, generated here, never committed).

Usage: run_bench.py BUILD_DIR OUT_JSON [--threads N] [--prompt N] [--decode N]
Work: one prefill of PROMPT fixed token ids (one chunk), then DECODE greedy steps, float32.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "reference", "deepseek_v4"))
import make_tiny  # noqa: E402
from transformers import DeepseekV4ForCausalLM  # noqa: E402
from transformers.cache_utils import DynamicCache  # noqa: E402


def bench_config():
    cfg = make_tiny.tiny_config()
    # Mid-size: big enough that matmuls dominate, small enough for a 2-core CI box.
    for k, v in dict(vocab_size=4096, hidden_size=512, moe_intermediate_size=256, num_hidden_layers=6,
                     num_attention_heads=8, head_dim=128, q_lora_rank=256, o_groups=4, o_lora_rank=128,
                     n_routed_experts=16, num_experts_per_tok=4, sliding_window=128, index_n_heads=16,
                     index_head_dim=64, index_topk=64, swiglu_limit=10.0).items():
        setattr(cfg, k, v)
    cfg.compress_rates = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 32}
    cfg.layer_types = ["sliding_attention", "sliding_attention"] + [
        "compressed_sparse_attention" if i % 2 == 0 else "heavily_compressed_attention" for i in range(2, 6)]
    cfg.mlp_layer_types = ["hash_moe"] * 3 + ["moe"] * 3
    cfg.qk_rope_head_dim = 32
    cfg.partial_rotary_factor = 0.25
    return cfg


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} cpus visible, shared)"
    except OSError:
        pass
    return platform.machine()


def hf_run(model, ids, decode):
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        t0 = time.perf_counter()
        logits = model(input_ids=torch.tensor([ids]), cache=cache, use_cache=True).logits[0, -1]
        tp = time.perf_counter() - t0
        out = []
        t0 = time.perf_counter()
        for _ in range(decode):
            out.append(int(torch.argmax(logits)))
            logits = model(input_ids=torch.tensor([[out[-1]]]), cache=cache, use_cache=True).logits[0, -1]
        td = time.perf_counter() - t0
    return {"prefill_s": tp, "prefill_tok_s": len(ids) / tp, "decode_s": td, "decode_tok_s": decode / td,
            "first_tokens": out[:8]}


def median_run(runs):
    out = dict(runs[0])
    for k in ("prefill_s", "prefill_tok_s", "decode_s", "decode_tok_s"):
        out[k] = statistics.median(r[k] for r in runs)
    out["runs"] = [{k: r[k] for k in ("prefill_tok_s", "decode_tok_s")} for r in runs]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build_dir")
    ap.add_argument("out")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--keep-model", default=None, help="also save the random model here (for profiling)")
    ap.add_argument("--repeats", type=int, default=3, help="alternating HF/ours pairs (A B B A ...); medians")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = bench_config()
    model = DeepseekV4ForCausalLM(cfg).to(torch.float32).eval()
    make_tiny.randomize(model, cfg)
    with tempfile.TemporaryDirectory() as tmp:
        d = a.keep_model or tmp
        os.makedirs(d, exist_ok=True)
        from safetensors.torch import save_file
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(state, os.path.join(d, "model.safetensors"))
        dd = cfg.to_dict()
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(dd, f)
        ids = [2 + (i * 7919) % (cfg.vocab_size - 2) for i in range(a.prompt)]
        hf_run(model, ids[:16], 2)  # warm-up
        exe = os.path.join(a.build_dir, "bin", "bench_deepseek_v4_cpu")
        cmd = [exe, d, str(a.prompt), str(a.decode), str(a.threads)]
        subprocess.run(cmd[:2] + ["16", "2", str(a.threads)], check=True, capture_output=True)  # warm-up
        hf_runs, our_runs = [], []
        for r in range(a.repeats):  # A B B A ...: load drifts hit both sides alike
            order = ("hf", "ours") if r % 2 == 0 else ("ours", "hf")
            for who in order:
                if who == "hf":
                    hf_runs.append(hf_run(model, ids, a.decode))
                else:
                    our_runs.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
        hf, ours = median_run(hf_runs), median_run(our_runs)
    res = {
        "work": f"prefill {a.prompt} tokens (one chunk) + {a.decode} greedy decode steps, float32 weights",
        "model": {k: getattr(cfg, k) for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                               "head_dim", "n_routed_experts", "num_experts_per_tok",
                                               "moe_intermediate_size", "layer_types")},
        "threads": a.threads, "cpu": cpu_name(),
        "peer": f"HF transformers {__import__('transformers').__version__} eager, torch {torch.__version__}",
        "command": " ".join(sys.argv),
        "ds4server": ours, "hf_eager": hf,
        "ratio_prefill": ours["prefill_tok_s"] / hf["prefill_tok_s"],
        "ratio_decode": ours["decode_tok_s"] / hf["decode_tok_s"],
        "same_greedy_tokens": ours["first_tokens"] == hf["first_tokens"],
    }
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)
        f.write("\n")
    print(json.dumps({k: res[k] for k in ("ratio_prefill", "ratio_decode", "same_greedy_tokens")}))


if __name__ == "__main__":
    main()
