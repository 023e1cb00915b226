#!/usr/bin/env python3
"""Memory of a shared prompt prefix through the real server (issue #24, paged caches): one turn
seeds the prefix cache with a long document (its snapshots at the prefill chunk boundaries and
the prompt end), then N concurrent streams ask different questions about the same document.
Each continues from a cached snapshot: a clone of a state whose per-position caches are paged
(core/paged_rows.h). Two servers in the same run: `copy` (DS4_PAGED_COPY=1: every clone copies
its cache rows, the memory behaviour of the contiguous caches of before) and `shared` (clones
share the blocks, copy on write). Both must answer with the same tokens (greedy).

Reported per server, from /metrics sampled every 20 ms: the peak of ds4_paged_cache_bytes (the
cache blocks alive, shared ones once), ds4_cache_bytes and ds4_state_memory_bytes (what the
prefix cache and the live states count, per holder) after the seed turn and at the peak.

  python3 bench/batching_cpu/bench_shared_prefix.py --model models/default/model.gguf \
      --streams 16 --out bench/results/paged-prefix-cpu-2026-12-04
"""
import argparse
import json
import os
import pathlib
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python" / "common"))
from ds4_metrics import scrape  # noqa: E402
from ds4_server_proc import ServerProcess, server_flags  # noqa: E402
from ds4_sse import chat_stream, final_usage, stream_text  # noqa: E402

SENTENCES = ["The river town kept a ledger of every boat that passed its lock.",
             "In spring the keeper wrote down the cargo, the crew and the weather.",
             "Grain went south in long barges while timber came down from the hills.",
             "A storm in the third year closed the lock for eleven days.",
             "The keeper's daughter later copied the ledger into a bound volume.",
             "Merchants paid the toll in coins, salt or sometimes in bolts of cloth.",
             "Children counted the boats from the bridge and argued about their names.",
             "When the railway arrived, the number of barges fell by half within a decade."]


def document(words):
    out, n, i = [], 0, 0
    while n < words:
        s = SENTENCES[i % len(SENTENCES)] + f" (entry {i})"
        out.append(s)
        n += len(s.split())
        i += 1
    return " ".join(out)


def metrics(port):
    return scrape(port)


def run(server, doc, streams, max_tokens):
    _, ev = chat_stream(server.port, doc + "\n\nQuestion 0: what did the keeper write down?", 4)
    seeded = metrics(server.port)
    peak = {"ds4_paged_cache_bytes": 0.0, "per_holder": 0.0}
    done = threading.Event()

    def poll():
        while not done.is_set():
            m = metrics(server.port)
            peak["ds4_paged_cache_bytes"] = max(peak["ds4_paged_cache_bytes"], m.get("ds4_paged_cache_bytes", 0))
            peak["per_holder"] = max(peak["per_holder"], m.get("ds4_cache_bytes", 0) + m.get("ds4_state_memory_bytes", 0))
            time.sleep(0.02)

    answers, usage = [None] * streams, [None] * streams

    def client(i):
        _, ev = chat_stream(server.port, doc + f"\n\nQuestion {i + 1}: summarise entry {i * 3} in one sentence.",
                            max_tokens)
        answers[i], usage[i] = stream_text(ev), final_usage(ev)

    poller = threading.Thread(target=poll)
    poller.start()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    done.set()
    poller.join()
    after = metrics(server.port)
    return {"seeded_paged_bytes": seeded.get("ds4_paged_cache_bytes", 0), "seeded_cache_bytes": seeded.get("ds4_cache_bytes", 0),
            "peak_paged_bytes": peak["ds4_paged_cache_bytes"], "peak_per_holder_bytes": peak["per_holder"],
            "after_paged_bytes": after.get("ds4_paged_cache_bytes", 0), "cache_entries": after.get("ds4_cache_entries"),
            "prompt_tokens": usage[0]["prompt_tokens"] if usage[0] else None,
            "cached_tokens": [((u or {}).get("prompt_tokens_details") or {}).get("cached_tokens") for u in usage],
            "wall_s": round(wall, 2), "answers": answers}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", default=str(ROOT / "build" / "release" / "bin" / "ds4server"))
    ap.add_argument("--doc-words", type=int, default=1100)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--server-arg", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    try:
        extra = server_flags(a.server_arg)
    except ValueError as e:
        ap.error(str(e))
    doc = document(a.doc_words)
    results = {}
    for mode in ("copy", "shared"):
        env_before = os.environ.get("DS4_PAGED_COPY")
        os.environ["DS4_PAGED_COPY"] = "1" if mode == "copy" else "0"
        try:
            server = ServerProcess([a.bin, "serve", "--model", a.model, "--port", "0", "--host", "127.0.0.1",
                                    "--server.web_root", str(ROOT / "web"), "--threads", str(a.threads),
                                    "--backend", "cpu", "--thinking", "off", "--speculative.enabled", "false"] + extra,
                                   start_s=300)
        finally:
            if env_before is None:
                os.environ.pop("DS4_PAGED_COPY")
            else:
                os.environ["DS4_PAGED_COPY"] = env_before
        try:
            results[mode] = run(server, doc, a.streams, a.max_tokens)
        finally:
            server.stop()
        print(mode, json.dumps({k: v for k, v in results[mode].items() if k != "answers"}), flush=True)
    same = results["copy"]["answers"] == results["shared"]["answers"]
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "shared_prefix.json").write_text(json.dumps(results, indent=1) + "\n")
    mib = lambda b: f"{b / 2**20:.2f}"  # noqa: E731
    c, s = results["copy"], results["shared"]
    lines = [f"### Shared prefix: {a.streams} streams on one {c['prompt_tokens']}-token prompt ({a.model}, "
             f"max_tokens {a.max_tokens}, threads {a.threads}{' ' + ' '.join(a.server_arg) if a.server_arg else ''})",
             "", "| clones | paged cache MiB after the seed turn | peak paged cache MiB | peak counted per holder MiB | "
             "wall s | answers equal |", "|---|---|---|---|---|---|"]
    for mode, r in (("copy (DS4_PAGED_COPY=1)", c), ("shared (default)", s)):
        lines.append(f"| {mode} | {mib(r['seeded_paged_bytes'])} | {mib(r['peak_paged_bytes'])} | "
                     f"{mib(r['peak_per_holder_bytes'])} | {r['wall_s']} | {'yes' if same else 'NO'} |")
    if s["peak_paged_bytes"]:
        lines += ["", f"Peak paged cache memory, copy / shared: {c['peak_paged_bytes'] / s['peak_paged_bytes']:.2f}x; "
                      f"cached prompt tokens per stream (shared): {s['cached_tokens']}"]
    (out / "shared_prefix.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
