#!/usr/bin/env python3
"""Time to first token of long prompts through the real server (OpenAI chat API, streaming).

Starts one `ds4server serve` (any backend, any model with a tokenizer.json beside it), warms it,
then sends one chat turn per prompt length, each prompt made of different words from its first
token on (so no prefix-cache entry of an earlier turn applies), and reports per turn: the prompt
tokens the server counted, the client's time to the first streamed token (TTFT: request sent ->
first chunk with text, reasoning or a finish), the server's own ttft / prefill seconds
(usage.timings), prompt tokens / TTFT, and the GPU canary of the turn (usage.gpu_canary: the
GPU stays responsive to other work during a long prefill). Greedy, thinking off, a few output
tokens. Prompt lengths are hit by calibrating words per token on a first prompt (the tokenizer
is the model's, so the counts are the server's, not estimates).

  python3 bench/serve_long_prompt.py --bin build/cuda/bin/ds4server --model /dev/shm/f.gguf \
      --backend cuda --lengths 2048,8192,32768 --server-arg context_size=40000 --out OUT
"""
import argparse
import json
import pathlib
import random
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python" / "common"))
from ds4_server_proc import ServerProcess, server_flags  # noqa: E402
from ds4_sse import chat_stream, final_usage  # noqa: E402

WORDS = ("time year people way day man thing woman life child world school state family student group "
         "country problem hand part place case week company system program question work government number "
         "night point home water room mother area money story fact month lot right study book eye job word "
         "business issue side kind head house service friend father power hour game line end member law car "
         "city community name president team minute idea kid body information back parent face others level "
         "office door health person art war history party result change morning reason research girl guy "
         "moment air teacher force education").split()


def prompt_text(n_words, seed):
    rng = random.Random(seed)
    return f"[{seed}] " + " ".join(rng.choice(WORDS) for _ in range(n_words))


def turn(port, text, max_tokens):
    """One streaming turn: client TTFT (to the first chunk with text, reasoning or a finish), wall
    seconds, and the final usage object."""
    t0, events = chat_stream(port, text, max_tokens, timeout=1800)
    first = next((t for t, ev in events for ch in ev.get("choices", [])
                  if ch.get("delta", {}).get("content") or ch.get("delta", {}).get("reasoning_content")
                  or ch.get("finish_reason")), None)
    usage = final_usage(events)
    if usage is None or first is None:
        raise RuntimeError("no token and no usage in the stream")
    return first - t0, events[-1][0] - t0, usage


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "build" / "release" / "bin" / "ds4server"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--tag", default="long-prompt")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--lengths", default="2048,8192,32768", help="prompt tokens, comma separated")
    ap.add_argument("--max-tokens", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--server-arg", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    lengths = [int(s) for s in a.lengths.split(",")]
    if any(n < 16 for n in lengths):
        ap.error("--lengths: each at least 16 tokens")
    try:
        extra = server_flags(a.server_arg)
    except ValueError as e:
        ap.error(str(e))
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    srv = ServerProcess([a.bin, "serve", "--model", a.model, "--port", "0", "--host", "127.0.0.1",
                         "--server.web_root", str(ROOT / "web"), "--threads", str(a.threads),
                         "--backend", a.backend, "--thinking", "off", "--speculative.enabled", "false"] + extra,
                        start_s=900)
    rows = []
    try:
        load_s = time.perf_counter() - t_start
        turn(srv.port, "[warm] Hello", 2)
        # Words per token of this tokenizer on this word list (the chat template's own tokens
        # are the difference of two prompts, so they cancel).
        _, _, u1 = turn(srv.port, prompt_text(40, 1), 1)
        _, _, u2 = turn(srv.port, prompt_text(240, 2), 1)
        per_word = (u2["prompt_tokens"] - u1["prompt_tokens"]) / 200.0
        fixed = u1["prompt_tokens"] - 40 * per_word
        for i, n in enumerate(lengths):
            words = max(1, int((n - fixed) / per_word))
            ttft, wall, u = turn(srv.port, prompt_text(words, 100 + i), a.max_tokens)
            t = u.get("timings", {})
            c = u.get("gpu_canary") or {}
            r = {"model": a.tag, "backend": a.backend, "target_tokens": n, "prompt_tokens": u["prompt_tokens"],
                 "ttft_s": round(ttft, 3), "server_ttft_s": round(t.get("ttft_s", 0.0), 3), "server_prefill_s": round(t.get("prefill_s", 0.0), 3),
                 "prompt_tok_per_s": round(u["prompt_tokens"] / ttft, 1), "wall_s": round(wall, 3),
                 "completion_tokens": u.get("completion_tokens"), "canary_max_ms": c.get("max_ms"),
                 "canary_p50_ms": c.get("p50_ms"), "canary_samples": c.get("samples")}
            rows.append(r)
            print(json.dumps(r), flush=True)
    finally:
        code = srv.stop()
    (out / f"{a.tag}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lines = [f"### {a.tag} ({a.model}), backend {a.backend}{' ' + ' '.join(a.server_arg) if a.server_arg else ''}, "
             f"greedy, thinking off, max_tokens {a.max_tokens}; server up in {load_s:.1f} s (exit {code})", "",
             "| prompt tokens | TTFT s (client) | server ttft s | server prefill s | prompt tok/s (client TTFT) | "
             "GPU canary p50 / max ms (samples) |", "|---|---|---|---|---|---|"]
    for r in rows:
        canary = (f"{r['canary_p50_ms']} / {r['canary_max_ms']} ({r['canary_samples']})"
                  if r["canary_samples"] is not None else "-")
        lines.append(f"| {r['prompt_tokens']} | {r['ttft_s']} | {r['server_ttft_s']} | {r['server_prefill_s']} | "
                     f"{r['prompt_tok_per_s']} | {canary} |")
    (out / f"{a.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
