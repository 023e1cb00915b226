#!/usr/bin/env python3
"""Continuous batching through the real server (OpenAI chat API, streaming): N concurrent
clients (1/4/16 by default; 64 is the engine's max_live), each sending `--requests` turns back
to back, against ds4server with batching off (the round-robin engine of before: a whole
prefill chunk per session per iteration, decode forwards one after another) and on (token
budget + Model::decode_batch / verify_batch), in the same run: the servers of `--modes` up at
once, rounds alternating modes so load from other processes hits both alike.

Per cell (`--repeats` rounds): aggregate output tok/s (completion tokens / wall time of a
round; the median round); TPOT (a turn's decode seconds per token after the first, measured
at the client from the SSE chunk times and usage.completion_tokens) p50/p99 over turns; the
gap between SSE chunks (ITL; a stall shows here, a speculative cycle's tokens may share a
chunk) p50/p99; TTFT p50/p99; fairness between the streams (each stream's decode rate: its
tokens after the first / its turns' decode seconds; Jain's index (sum r)^2 / (n sum r^2), 1 =
equal service, and slowest / fastest stream, the median round of each); and the server's
/metrics batching counters. Greedy. `--speculative true` speculates at the model's draft head
(speculative cycles draft per session, one batched verify per iteration); `--backend cuda`
and `--server-arg` for other settings (the same command runs on the H200). Writes JSON lines
and a markdown table.

  python3 bench/batching_cpu/bench_streams.py --model models/default/model.gguf --tag default \
      --out bench/results/batching-cpu-2026-12-04
  python3 bench/batching_cpu/bench_streams.py --model models/default/model.gguf --tag default-spec \
      --speculative true --streams 1,4,16,64 --out bench/results/batching-load-cpu-2026-12-04
"""
import argparse
import json
import pathlib
import statistics
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python" / "common"))
from ds4_metrics import scrape  # noqa: E402
from ds4_server_proc import ServerProcess, server_flags  # noqa: E402
from ds4_sse import chat_stream, final_usage  # noqa: E402

TOPICS = ["a cat who learns to fly", "the history of bread", "how rain forms", "a robot that paints",
          "why the sky is blue", "a trip to the mountains", "how computers add numbers", "a lost key",
          "the first day of school", "a lighthouse keeper", "how bees make honey", "a city under the sea",
          "the rules of chess", "a dragon who bakes", "how trains work", "a letter to a friend"]


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def one_turn(port, prompt, max_tokens):
    """One streaming chat turn; returns (ttft_s, tpot_s or None, completion_tokens, gaps, decode_s)."""
    t0, events = chat_stream(port, prompt, max_tokens)
    usage = final_usage(events)
    times = [t for t, ev in events for ch in ev.get("choices", []) if ch.get("delta", {}).get("content")]
    tokens = usage["completion_tokens"] if usage else None
    if not times or tokens is None:
        raise RuntimeError("no content or no usage in the stream")
    ttft = times[0] - t0
    tpot = (times[-1] - times[0]) / (tokens - 1) if tokens > 1 and len(times) > 1 else None
    return ttft, tpot, tokens, [b - a for a, b in zip(times, times[1:])], times[-1] - times[0]


def metrics(port):
    return scrape(port, ("ds4_batched_decode_", "ds4_batched_verify_", "ds4_decode_batch_size_sum",
                         "ds4_engine_iteration_seconds_total",
                         "ds4_decode_batch_size_count", "ds4_generated_tokens_total", "ds4_preemptions_total",
                         "ds4_speculative_drafted_tokens_total", "ds4_speculative_accepted_tokens_total"))


def fairness(per_stream):
    """Jain's index and slowest / fastest of the streams' decode rates (tokens after the first
    per decode second over a stream's turns); None without two streams that decoded."""
    r = [(t / s) for t, s in per_stream if s > 0]
    if len(r) < 2:
        return None, None
    return sum(r) ** 2 / (len(r) * sum(x * x for x in r)), min(r) / max(r)


def summarize(rounds, streams):
    """Rounds of one cell: agg tok/s of the median round, TPOT / ITL / TTFT percentiles over all
    turns, the median round's fairness."""
    repeats = len(rounds)
    res = [r for rr in rounds for r in rr["results"]]
    tpots = [r[1] for r in res if r[1] is not None]
    ttfts = [r[0] for r in res]
    gaps = [g for r in res for g in r[3]]
    rates = sorted(rr["toks"] / rr["wall"] for rr in rounds)
    fair = [fairness(rr["per_stream"]) for rr in rounds]
    jain = [f[0] for f in fair if f[0] is not None]
    spread = [f[1] for f in fair if f[1] is not None]
    d = {}
    for rr in rounds:
        for k, v in rr["delta"].items():
            d[k] = d.get(k, 0) + v
    iters = d.get("ds4_decode_batch_size_count", 0)
    return {
        "streams": streams, "repeats": repeats, "turns": len(res), "completion_tokens": sum(r[2] for r in res),
        "agg_tok_s": round(statistics.median(rates), 2), "agg_tok_s_rounds": [round(x, 1) for x in rates],
        "tpot_p50_ms": round(1e3 * pct(tpots, 50), 2), "tpot_p99_ms": round(1e3 * pct(tpots, 99), 2),
        "itl_p50_ms": round(1e3 * pct(gaps, 50), 2), "itl_p99_ms": round(1e3 * pct(gaps, 99), 2),
        "ttft_p50_ms": round(1e3 * pct(ttfts, 50), 1), "ttft_p99_ms": round(1e3 * pct(ttfts, 99), 1),
        "jain": round(statistics.median(jain), 3) if jain else None,
        "slowest_over_fastest": round(statistics.median(spread), 2) if spread else None,
        "mean_decode_steps_per_iteration": round(d.get("ds4_decode_batch_size_sum", 0) / iters, 2) if iters else 0,
        "batched_calls": int(d.get("ds4_batched_decode_calls_total", 0)),
        "batched_rows": int(d.get("ds4_batched_decode_rows_total", 0)),
        "batched_verify_calls": int(d.get("ds4_batched_verify_calls_total", 0)),
        "batched_verify_rows": int(d.get("ds4_batched_verify_rows_total", 0)),
        "preemptions": int(d.get("ds4_preemptions_total", 0)),
        # where an iteration's time goes: its wall time, and of it the batched decode forwards
        # (candidates included); the rest is host work (scheduling, draws, emitting)
        "iteration_ms": round(1e3 * d.get("ds4_engine_iteration_seconds_total", 0) / iters, 3) if iters else 0,
        "batched_forward_ms": round(1e3 * d.get("ds4_batched_decode_seconds_total", 0) / iters, 3) if iters else 0,
        # whether the turns speculated (a verify that is not batched shows only here)
        "drafted": int(d.get("ds4_speculative_drafted_tokens_total", 0)),
        "accepted": int(d.get("ds4_speculative_accepted_tokens_total", 0)),
    }


def one_round(port, streams, requests, max_tokens, seq):
    results, errors = [], []
    per_stream = [(0, 0.0)] * streams  # (tokens after the first, decode seconds) per stream
    before = metrics(port)

    def client(i):
        try:
            for r in range(requests):
                topic = TOPICS[(i + r) % len(TOPICS)]
                # Unique per turn within a server (no prefix-cache reuse); the same in both modes
                # (separate servers), so both do the same work.
                prompt = f"[{seq}.{i}.{r}] Write a long story about {topic}. Use many details."
                res = one_turn(port, prompt, max_tokens)
                results.append(res)
                t, s = per_stream[i]
                per_stream[i] = (t + max(res[2] - 1, 0), s + res[4])
        except Exception as e:  # reported below; the cell is then invalid
            errors.append(repr(e))

    t0 = time.perf_counter()
    th = [threading.Thread(target=client, args=(i,)) for i in range(streams)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise RuntimeError(errors[0])
    after = metrics(port)
    return {"results": results, "wall": wall, "toks": sum(r[2] for r in results), "per_stream": per_stream,
            "delta": {k: after.get(k, 0) - before.get(k, 0) for k in after}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tag", required=True, help="name of the model in the output")
    ap.add_argument("--bin", default=str(ROOT / "build" / "release" / "bin" / "ds4server"))
    ap.add_argument("--streams", default="1,4,16")
    ap.add_argument("--requests", type=int, default=4, help="turns per stream, back to back")
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=3, help="rounds per cell, modes alternating")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--modes", default="off,on", help="batching modes to run side by side: off, on or both")
    ap.add_argument("--speculative", default="false", choices=["false", "true", "auto"],
                    help="speculative.enabled of the servers (true: every turn speculates at the draft head)")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--server-arg", action="append", default=[], metavar="KEY=VALUE",
                    help="another setting for the servers (--KEY VALUE), e.g. speculative.depth=2")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    modes = a.modes.split(",")
    if not modes or any(m not in ("off", "on") for m in modes):
        ap.error(f"--modes: '{a.modes}' is not a list of off / on")
    try:
        extra = server_flags(a.server_arg)
    except ValueError as e:
        ap.error(str(e))
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    servers = {}
    for mode in modes:
        servers[mode] = ServerProcess([a.bin, "serve", "--model", a.model, "--port", "0", "--host", "127.0.0.1",
                                       "--server.web_root", str(ROOT / "web"), "--threads", str(a.threads),
                                       "--backend", a.backend, "--thinking", "off",
                                       "--speculative.enabled", a.speculative,
                                       "--batching.enabled", "true" if mode == "on" else "false"] + extra,
                                      start_s=300)
    rows = []
    try:
        for m in servers.values():  # warm them (page in the weights, first-call allocations)
            one_turn(m.port, "[warm] Hello", 8)
        for seq, n in enumerate(int(s) for s in a.streams.split(",")):
            # Rounds alternate the modes' order so load from other processes hits them alike.
            per = {m: [] for m in modes}
            for k in range(a.repeats):
                for mode in modes if k % 2 == 0 else modes[::-1]:
                    per[mode].append(one_round(servers[mode].port, n, a.requests, a.max_tokens, f"{seq}.{k}"))
            for mode in modes:
                r = summarize(per[mode], n)
                r.update(model=a.tag, batching=mode, speculative=a.speculative, backend=a.backend)
                rows.append(r)
                print(json.dumps(r), flush=True)
    finally:
        for m in servers.values():
            m.stop()
    with open(out / f"{a.tag}.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    lines = [f"### {a.tag} ({a.model}), backend {a.backend}, speculative {a.speculative}"
             f"{' ' + ' '.join(a.server_arg) if a.server_arg else ''}, {a.requests} turns per stream, "
             f"max_tokens {a.max_tokens}, threads {a.threads}, {a.repeats} rounds per cell (agg tok/s and fairness: "
             f"median round; percentiles over all turns)",
             "", "| streams | batching | agg tok/s | TPOT p50 ms | TPOT p99 ms | ITL p50 ms | ITL p99 ms | TTFT p50 ms | "
             "TTFT p99 ms | Jain | slowest / fastest | decode steps / iteration | batched decode calls | "
             "batched verify calls / rows | drafted / accepted | preemptions | tokens | iteration ms | "
             "of it batched forward ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['streams']} | {r['batching']} | {r['agg_tok_s']} | {r['tpot_p50_ms']} | {r['tpot_p99_ms']} | "
                     f"{r['itl_p50_ms']} | {r['itl_p99_ms']} | {r['ttft_p50_ms']} | {r['ttft_p99_ms']} | "
                     f"{r['jain'] if r['jain'] is not None else '-'} | "
                     f"{r['slowest_over_fastest'] if r['slowest_over_fastest'] is not None else '-'} | "
                     f"{r['mean_decode_steps_per_iteration']} | {r['batched_calls']} | "
                     f"{r['batched_verify_calls']} / {r['batched_verify_rows']} | {r['drafted']} / {r['accepted']} | "
                     f"{r['preemptions']} | "
                     f"{r['completion_tokens']} | {r['iteration_ms']} | {r['batched_forward_ms']} |")
    (out / f"{a.tag}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
