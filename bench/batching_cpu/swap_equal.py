#!/usr/bin/env python3
"""Preemption through the real server (issue #24): the same concurrent greedy streams against
ds4server under a state budget too small to hold them all, once with `batching.preempt=swap`
(a preempted turn's state is copied to host memory and loaded back) and once with `recompute`
(its prompt and generated tokens are fed again). Both must give every stream the same text,
and the swap server must have swapped (ds4_swap_outs_total > 0, nothing left swapped at the
end). Prints one line per mode (preemptions, swap-outs, prompt tokens computed, wall seconds)
and exits non-zero when the texts differ or nothing was preempted. Works on CPU and CUDA
(`--backend cuda`: the CUDA states' save / load under load).

  python3 bench/batching_cpu/swap_equal.py --bin build/release/bin/ds4server \
      --model models/default/model.gguf --state-mib 1 --streams 8
"""
import argparse
import json
import pathlib
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python" / "common"))
from ds4_server_proc import ServerProcess, server_flags  # noqa: E402
from ds4_metrics import scrape  # noqa: E402
from ds4_sse import chat_stream, stream_text  # noqa: E402

WATCHED = ("ds4_preemptions_total", "ds4_swap_outs_total", "ds4_swapped_bytes", "ds4_prompt_tokens_total",
           "ds4_generated_tokens_total")


def metrics(port):
    m = scrape(port, WATCHED)
    return {k: m.get(k, 0.0) for k in WATCHED}


def run(a, mode, extra):
    srv = ServerProcess([a.bin, "serve", "--model", a.model, "--port", "0", "--host", "127.0.0.1",
                         "--threads", str(a.threads), "--backend", a.backend, "--thinking", "off",
                         "--speculative.enabled", "false", "--batching.enabled", "true",
                         "--batching.preempt", mode, "--batching.state_memory_mib", str(a.state_mib)] + extra,
                        start_s=300)
    try:
        texts, errors = [None] * a.streams, []

        def client(i):
            prompt = (f"Stream {i}: write a long story about " + ["a cat", "the sea", "a robot", "bread"][i % 4] +
                      ", with many details. " * a.pad)
            try:
                texts[i] = stream_text(chat_stream(srv.port, prompt, a.max_tokens)[1])
            except Exception as e:  # noqa: BLE001 -- reported below, the run fails
                errors.append(f"stream {i}: {e}")

        t0 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(i,)) for i in range(a.streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        m = metrics(srv.port)
        if not srv.alive():
            errors.append("server exited")
        return texts, m, wall, errors
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin", default=str(ROOT / "build" / "release" / "bin" / "ds4server"))
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--pad", type=int, default=20, help="repeats of the filler sentence in each prompt")
    ap.add_argument("--state-mib", type=int, default=1, help="batching.state_memory_mib (small: turns preempt)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--server-arg", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", help="also write the result as JSON here")
    a = ap.parse_args()
    try:
        extra = server_flags(a.server_arg)
    except ValueError as e:
        ap.error(str(e))
    result, failures = {}, []
    for mode in ("swap", "recompute"):
        texts, m, wall, errors = run(a, mode, extra)
        failures += [f"{mode}: {e}" for e in errors]
        result[mode] = {"texts": texts, "metrics": m, "wall_s": wall}
        print(f"{mode:9s}: {a.streams} streams, preemptions {m['ds4_preemptions_total']:.0f}, "
              f"swap-outs {m['ds4_swap_outs_total']:.0f}, left swapped {m['ds4_swapped_bytes']:.0f} bytes, "
              f"prompt tokens {m['ds4_prompt_tokens_total']:.0f}, generated {m['ds4_generated_tokens_total']:.0f}, "
              f"{wall:.1f} s", flush=True)
    sw, rc = result["swap"], result["recompute"]
    differ = [i for i in range(a.streams) if sw["texts"][i] != rc["texts"][i]]
    if differ:
        failures.append(f"texts differ between swap and recompute for streams {differ}")
    if sw["metrics"]["ds4_swap_outs_total"] < 1:
        failures.append("the swap server never swapped (raise --streams / --pad or lower --state-mib)")
    if sw["metrics"]["ds4_swapped_bytes"] != 0:
        failures.append("swapped bytes left after the run")
    if rc["metrics"]["ds4_preemptions_total"] < 1:
        failures.append("the recompute server never preempted")
    if a.out:
        pathlib.Path(a.out).write_text(json.dumps({"args": vars(a), "result": result, "failures": failures}, indent=1))
    print("equal texts in both modes" if not differ else "TEXTS DIFFER", flush=True)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
