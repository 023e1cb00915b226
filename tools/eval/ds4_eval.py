#!/usr/bin/env python3
"""ds4-eval (issue #9): drives the real `ds4server serve` over HTTP and writes one JSON
receipt per turn.

Cells: DeepSeek AR/DSpark, GLM AR/MTP, Qwen AR/MTP. Each run of a cell is its own server
process (start -> /health -> warmup -> 3-turn chat -> cold ping -> stop), never two at once;
repeats alternate the runnable cells in pairs A B B A. Timing phases come from the server's
usage.timings (prefill_s, ttft_s, decode_s) plus the client's chunk arrival times; they are
split so nothing is counted twice: first_token_s = ttft_s - prefill_s (queue + first sample),
and prefill_s + first_token_s + decode_s <= the request's wall time.
A CUDA model's turns also carry usage.gpu_canary (SPEC §6 canary latencies) as gpu_canary.

Every cell samples greedily by default (--temperature 0): greedy speculative output must
equal greedy AR output token for token, so
the AR and speculative cells of a family do the same work and their speeds compare directly.
Every request carries `reasoning_effort` (--thinking, default low): the audited reference
runs its matrix at the smallest active thinking level ("kleinster aktiver Thinking-Level",
Thinking Low for the session runs), not at the server's default.

  python3 tools/eval/ds4_eval.py --repeats 3 --out bench/results/eval-DATE
"""
import argparse
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import eval_report  # noqa: E402
import reuse_turns  # noqa: E402
import sandbox  # noqa: E402
from progress import Progress  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
CELLS = [("deepseek", "AR"), ("deepseek", "DSpark"), ("glm", "AR"), ("glm", "MTP"), ("qwen", "AR"), ("qwen", "MTP")]
DEFAULT_MODELS = {"deepseek": "tests/data/deepseek_v4/model", "glm": "tests/data/glm5/model", "qwen": "models/default/model.gguf"}
# The tiny reference models keep their draft heads in separate files (tests/data/<family>/
# {mtp,dspark}/): a speculative cell on a default model runs a folder of links to the trunk
# plus the head (and the head's config keys merged into config.json).
DRAFT_HEADS = {("glm", "MTP"): ("tests/data/glm5/mtp/mtp.safetensors", None),
               ("deepseek", "DSpark"): ("tests/data/deepseek_v4/dspark/dspark.safetensors",
                                        "tests/data/deepseek_v4/dspark/dspark_config.json")}
PROMPT_STORY = "Write a short story (about 150 words) about a lighthouse keeper who finds a message in a bottle."
PROMPT_PRIME = ("Write a Python function is_prime(n) and five assert statements that test it. "
                "Put all the code in one ```python code block.")
PROMPT_PING = "Ping. Answer with one line."
PROMPT_WARMUP = "Say hello."


def cell_name(family, mode):
    return f"{family}-{mode}"


def with_draft_head(family, mode, model, workdir):
    """The model a cell runs: for a speculative cell on the family's default tiny model, a
    folder in `workdir` with the trunk's files linked and the draft head added; else `model`."""
    head = DRAFT_HEADS.get((family, mode))
    src = pathlib.Path(model)
    if head is None or src.resolve() != (ROOT / DEFAULT_MODELS[family]).resolve() or not src.is_dir():
        return model
    dst = pathlib.Path(workdir) / f"{family}-{mode}-model"
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name != "config.json" and not (dst / f.name).exists():
            (dst / f.name).symlink_to(f.resolve())
    weights, extra = (ROOT / h if h else None for h in head)
    if not (dst / weights.name).exists():
        (dst / weights.name).symlink_to(weights)
    cfg = json.loads((src / "config.json").read_text())
    if extra:
        cfg.update(json.loads(extra.read_text()))
    (dst / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return str(dst)


def skip_reason(family, mode, model, temperature=0.0):
    """Why a cell cannot run, or None. Checked before any process starts."""
    p = pathlib.Path(model)
    if not p.exists():
        return f"model not found: {model}"
    tok = p / "tokenizer.json" if p.is_dir() else p.parent / "tokenizer.json"
    if not tok.exists():
        return f"no tokenizer.json beside the model ({tok}); the server's codec needs one"
    if family == "qwen" and mode == "MTP":
        if not has_mtp_head(p):
            return f"qwen MTP: the model has no MTP head (mtp_num_hidden_layers is 0 or absent in {p}/config.json)"
    return None


def has_mtp_head(model):
    """A Qwen safetensors folder declares its MTP layers in config.json; a GGUF file is
    assumed to carry them (the server reports target_only turns otherwise, and the cell's
    receipts show it)."""
    cfg = model / "config.json" if model.is_dir() else None
    if cfg is None or not cfg.exists():
        return True
    c = json.loads(cfg.read_text())
    return int(c.get("text_config", c).get("mtp_num_hidden_layers") or 0) > 0


def cell_server_args(mode, depth):
    """Server flags that make a cell what its name says."""
    if mode == "AR":
        return ["--speculative.enabled", "false"]
    return ["--speculative.enabled", "true", "--speculative.depth", str(depth)]


def proc_stats(pid):
    """Peak RSS (VmHWM) and cumulative IO counters of the server process."""
    out = {"vm_hwm_bytes": None, "vm_rss_bytes": None, "read_bytes": None, "write_bytes": None,
           "rchar": None, "wchar": None}
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(("VmHWM:", "VmRSS:")):
                key = "vm_hwm_bytes" if line.startswith("VmHWM") else "vm_rss_bytes"
                out[key] = int(line.split()[1]) * 1024
        for line in open(f"/proc/{pid}/io"):
            k, v = line.split(":")
            if k in out:
                out[k] = int(v)
    except OSError:
        pass
    return out


def percentiles(xs):
    if not xs:
        return {"p50": None, "p95": None, "p99": None, "max": None, "n": 0}
    s = sorted(xs)

    def q(p):  # nearest rank: the smallest value with at least p % of the data at or below it
        return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]
    return {"p50": q(50), "p95": q(95), "p99": q(99), "max": s[-1], "n": len(s)}


class Server:
    def __init__(self, exe, model, extra, log_lines):
        self.t_start = time.perf_counter()
        cmd = [str(exe), "serve", "--model", str(model), "--port", "0", "--host", "127.0.0.1",
               "--server.web_root", str(ROOT / "web"), *extra]
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines = log_lines
        self.port = None
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.wait(timeout=30)
            raise RuntimeError("server did not start: " + "".join(self.lines[-5:]).strip())
        threading.Thread(target=lambda: [self.lines.append(x) for x in self.proc.stderr], daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_healthy(self, timeout=600, tick=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if tick:
                tick()
            try:
                r = httpx.get(self.url + "/health", timeout=5)
                if r.status_code == 200 and r.json().get("status") == "ok":
                    return time.perf_counter() - self.t_start, r.json()
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server never became healthy")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode


def stream_chat(url, messages, max_tokens, timeout, temperature=None, on_piece=None, thinking=None):
    """One streamed chat completion. Returns content, reasoning, usage, finish, client times.
    thinking: the request's reasoning_effort (None: the server's default level)."""
    body = {"model": "x", "messages": messages, "stream": True, "max_tokens": max_tokens,
            "stream_options": {"include_usage": True}}
    if temperature is not None:
        body["temperature"] = temperature
    if thinking is not None:
        body["reasoning_effort"] = thinking
    content, reasoning, arrivals = [], [], []
    usage, finish = None, None
    t0 = time.perf_counter()
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=timeout) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.read().decode()[:300]}")
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                break
            j = json.loads(data)
            if "error" in j:
                raise RuntimeError(f"stream error: {j['error']}")
            if j.get("usage"):
                usage = j["usage"]
            for ch in j.get("choices", []):
                d = ch.get("delta", {})
                piece = d.get("content") or d.get("reasoning_content")
                if piece:
                    arrivals.append(time.perf_counter() - t0)
                    (content if d.get("content") else reasoning).append(piece)
                    if on_piece:
                        on_piece(len(arrivals))
                if ch.get("finish_reason"):
                    finish = ch["finish_reason"]
    wall = time.perf_counter() - t0
    return {"content": "".join(content), "reasoning": "".join(reasoning), "usage": usage,
            "finish": finish, "wall_s": wall, "arrivals": arrivals}


def receipt(base, kind, res, before, after, health, spec_reason):
    u = res["usage"] or {}
    tm = u.get("timings", {})
    prompt = u.get("prompt_tokens")
    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens")
    out = u.get("completion_tokens")
    new = prompt - cached if prompt is not None and cached is not None else None
    prefill, ttft, decode = tm.get("prefill_s"), tm.get("ttft_s"), tm.get("decode_s")
    gaps = [b - a for a, b in zip(res["arrivals"], res["arrivals"][1:])]
    lat = {k: (v * 1000 if isinstance(v, float) else v) for k, v in percentiles(gaps).items()}
    delta = lambda k: (after[k] - before[k]) if after[k] is not None and before[k] is not None else None  # noqa: E731
    return {
        **base, "turn": kind,
        "new_tokens": new, "cached_tokens": cached, "prompt_tokens": prompt, "output_tokens": out,
        "thinking_tokens": (u.get("completion_tokens_details") or {}).get("reasoning_tokens"),
        "phases_s": {"restore_s": None, "prefill_s": prefill,
                     "first_token_s": (ttft - prefill) if ttft is not None and prefill is not None else None,
                     "decode_s": decode},
        "restore_note": "not reported by the server: prefix-cache restore is inside prefill_s",
        "ttft_s": ttft, "client_ttft_s": res["arrivals"][0] if res["arrivals"] else None,
        "wall_s": res["wall_s"],
        "prefill_tok_s": new / prefill if new and prefill else None,
        # decode_s runs from the first token to the finish: out - 1 tokens in it.
        "decode_tok_s": (out - 1) / decode if out and out > 1 and decode else None,
        "speculative": speculative_fields(u, spec_reason),
        # GPU canary latencies of the turn (SPEC §6): only a CUDA model reports them.
        **({"gpu_canary": u["gpu_canary"]} if "gpu_canary" in u else {}),
        "token_latency_ms": lat,
        "peak_mem_bytes": after["vm_hwm_bytes"], "rss_bytes": after["vm_rss_bytes"],
        "io_read_bytes": delta("read_bytes"), "io_write_bytes": delta("write_bytes"),
        "io_rchar": delta("rchar"), "io_wchar": delta("wchar"),
        "finish_reason": res["finish"], "settings": health.get("settings"),
        "answer_excerpt": res["content"][:800], "reasoning_chars": len(res["reasoning"]),
        "health": {k: v for k, v in health.items() if k != "settings"},
    }


SPEC_KEYS = ("mode", "acceptance", "drafted", "accepted", "bonus", "repairs", "full_replays",
             "draft_s", "verify_s", "commit_s")


def speculative_fields(u, reason):
    """The server's per-turn speculative counters (usage.speculative), or nulls with why."""
    sp = u.get("speculative") or {}
    if sp.get("mode") not in (None, "target_only"):
        return {k: sp.get(k) for k in SPEC_KEYS}
    return {"mode": sp.get("mode"), "acceptance": None, "draft_s": None, "verify_s": None,
            "commit_s": None, "reason": reason}


def assistant_message(res):
    """The turn as a client sends it back: reasoning included, so a template that keeps it
    (and the engine's continuation match) can reuse the cached history."""
    m = {"role": "assistant", "content": res["content"]}
    if res["reasoning"]:
        m["reasoning_content"] = res["reasoning"]
    return m


def metrics(url):
    """The server's /metrics counters at the end of a run (a cross-check of the receipts)."""
    out = {}
    for line in httpx.get(url + "/metrics", timeout=10).text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.split()
            out[k] = float(v)
    return out


def host_line():
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    la = os.getloadavg()
    return (f"{cpu}, {os.cpu_count()} logical CPUs, load average at start {la[0]:.1f} "
            f"(shared machine: absolute speeds are noisy), server binary {{bin}}")


def readme_prompt(health, max_tokens):
    text = (ROOT / "README.md").read_text()
    # Budget ~2.5 chars/token, leaving room for the three answers and the template.
    budget = max(256, int((health.get("context_size", 4096) - 3 * max_tokens - 400) * 2.5))
    truncated = len(text) > budget
    text = text[:budget]
    return "Summarize this project README in a few sentences:\n\n" + text, truncated


def run_cell(args, family, mode, model, repeat, emit, bar=None, step=None):
    """One run of a cell in its own server process. bar/step: the progress bar and a
    counter of finished turns over the whole eval (for its total)."""
    base = {"cell": cell_name(family, mode), "family": family, "mode": mode, "model": str(model),
            "repeat": repeat, "sampling": {"temperature": args.temperature},
            "thinking": args.thinking or "server default",
            "speculative_depth": args.depth if mode != "AR" else None}
    spec_reason = ("autoregressive cell: no speculative decoding" if mode == "AR"
                   else "the server ran this turn target_only (no draft head or a sampled turn)")
    bar = bar or Progress(enabled=False)
    step = step if step is not None else [0, 0]
    label = f"{base['cell']} r{repeat + 1}"
    log = []
    bar.restart_clock()
    srv = Server(args.bin_path, model, [*cell_server_args(mode, args.depth), *args.server_arg], log)
    try:
        load_s, health = srv.wait_healthy(tick=lambda: bar.update(f"{label}: loading"))
        st = proc_stats(srv.proc.pid)
        emit({**base, "turn": "load", "load_s": load_s, "peak_mem_bytes": st["vm_hwm_bytes"],
              "io_read_bytes": st["read_bytes"], "command": srv.cmd, "settings": health.get("settings")})
        t = args.timeout

        def turn(kind, messages, max_tokens):
            before = proc_stats(srv.proc.pid)
            what = f"{label}: {kind} (turn {step[0] + 1}/{step[1]})"
            bar.update(what, 0, max_tokens, force=True)
            res = stream_chat(srv.url, messages, max_tokens, t, args.temperature, thinking=args.thinking or None,
                              on_piece=lambda n: bar.update(what, min(n, max_tokens), max_tokens))
            step[0] += 1
            rec = receipt(base, kind, res, before, proc_stats(srv.proc.pid), health, spec_reason)
            return res, rec

        _, rec = turn("warmup", [{"role": "user", "content": PROMPT_WARMUP}], 8)
        emit(rec)
        p1, truncated = readme_prompt(health, args.max_tokens)
        msgs = [{"role": "user", "content": p1}]
        prev_history = None
        for i, prompt in enumerate([None, PROMPT_STORY, PROMPT_PRIME], start=1):
            if prompt:
                msgs.append({"role": "user", "content": prompt})
            res, rec = turn(f"chat{i}", msgs, args.max_tokens)
            rec["previous_history_tokens"] = prev_history
            if i == 1:
                rec["readme_truncated"] = truncated
            if i == 3:
                rec["is_prime"] = sandbox.grade_is_prime(res["content"], args.sandbox_timeout)
            emit(rec)
            prev_history = (rec["prompt_tokens"] or 0) + (rec["output_tokens"] or 0)
            msgs.append(assistant_message(res))
        _, rec = turn("ping", [{"role": "user", "content": PROMPT_PING}], args.ping_tokens)
        emit(rec)
        emit({**base, "turn": "metrics", "metrics": metrics(srv.url)})
    finally:
        bar.clear()
        rc = srv.stop()
    if rc not in (0, None):
        print(f"warning: {base['cell']} server exit status {rc}", file=sys.stderr)


def run_reuse(args, family, mode, model, emit):
    """The --reuse-turns scenario on one cell; prints its per-turn table."""
    base = {"cell": cell_name(family, mode), "family": family, "mode": mode, "model": str(model),
            "scenario": "reuse-turns"}
    servers = []
    tokenizer = pathlib.Path(model) / "tokenizer.json" if pathlib.Path(model).is_dir() else \
        pathlib.Path(model).parent / "tokenizer.json"
    fam_name = {"deepseek": "deepseek_v4", "glm": "glm5", "qwen": "qwen35"}[family]

    def make_server(extra):
        srv = Server(args.bin_path, model, [*cell_server_args(mode, args.depth), *args.server_arg, *extra], [])
        srv.wait_healthy()
        servers.append(srv)
        return srv

    def chat_template(req):
        out = subprocess.run([str(args.bin_path), "chat-template", "--family", fam_name, "--tokenizer", str(tokenizer)],
                             input=json.dumps(req), capture_output=True, text=True, check=True)
        return json.loads(out.stdout)

    rows = reuse_turns.run(make_server, chat_template, args.reuse_turns, args.max_tokens, args.timeout,
                           args.temperature, args.thinking or None, args.restart_at,
                           emit=lambda row: emit({**base, **row}))
    print(f"{base['cell']} ({model}): {args.reuse_turns} turns, thinking {args.thinking or 'server default'}, "
          f"reasoning dropped by the client")
    print(reuse_turns.table(rows))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", help="folder with ds4server (default build/release/bin, else build/debug/bin)")
    for fam in ("deepseek", "glm", "qwen"):
        ap.add_argument(f"--model-{fam}", default=str(ROOT / DEFAULT_MODELS[fam]))
    ap.add_argument("--cells", default="", help="comma list like qwen-AR,glm-MTP (default all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--ping-tokens", type=int, default=32)
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request")
    ap.add_argument("--sandbox-timeout", type=float, default=5)
    ap.add_argument("--server-arg", action="append", default=[], help="extra server argument (repeatable)")
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="sampling temperature of every request (default 0: greedy, where speculative answers must equal AR; sampled turns speculate in exact mode)")
    ap.add_argument("--thinking", default="low",
                    help="reasoning_effort of every request: none, low, medium, high, xhigh, max, or '' for the "
                         "server's default (default low: the reference's smallest active thinking level)")
    ap.add_argument("--depth", type=int, default=3, help="speculative depth of the MTP/DSpark cells (default 3)")
    ap.add_argument("--progress", choices=["auto", "on", "off"], default="auto",
                    help="progress bar on stderr: auto = only when stderr is a terminal")
    ap.add_argument("--reuse-turns", type=int, default=0,
                    help="instead of the matrix: an N-turn chat per cell with thinking on where the client drops "
                         "the reasoning; prints prompt / cached / new tokens per turn (tools/eval/reuse_turns.py)")
    ap.add_argument("--restart-at", type=int, default=None,
                    help="with --reuse-turns: restart the server (same checkpoint dir) before this turn")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    candidates = [pathlib.Path(args.bin)] if args.bin else [ROOT / "build/release/bin", ROOT / "build/debug/bin"]
    args.bin_path = next((c / "ds4server" for c in candidates if (c / "ds4server").exists()), None)
    if args.bin_path is None:
        ap.error(f"ds4server not found in {', '.join(map(str, candidates))}")
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    wanted = set(filter(None, args.cells.split(",")))
    models = {"deepseek": args.model_deepseek, "glm": args.model_glm, "qwen": args.model_qwen}
    jsonl = open(out / "receipts.jsonl", "w")
    host = host_line().replace("{bin}", str(args.bin_path))

    def emit(rec):
        jsonl.write(json.dumps(rec) + "\n")
        jsonl.flush()

    runnable, cell_models = [], {}
    # Linked model folders of the speculative cells live outside the results (removed at the end).
    workdir = tempfile.mkdtemp(prefix="ds4-eval-models-")
    for fam, mode in CELLS:
        if wanted and cell_name(fam, mode) not in wanted:
            continue
        model = with_draft_head(fam, mode, models[fam], workdir)
        why = skip_reason(fam, mode, model, args.temperature)
        if why:
            emit({"cell": cell_name(fam, mode), "family": fam, "mode": mode, "model": model,
                  "turn": "skipped", "reason": why})
        else:
            runnable.append((fam, mode))
            cell_models[(fam, mode)] = model
    if args.reuse_turns > 0:
        for fam, mode in runnable:
            run_reuse(args, fam, mode, cell_models[(fam, mode)], emit)
        jsonl.close()
        shutil.rmtree(workdir, ignore_errors=True)
        return 0
    bar = Progress(enabled={"auto": None, "on": True, "off": False}[args.progress])
    step = [0, args.repeats * len(runnable) * len(eval_report.TURNS)]
    # A B B A: odd repeats run the cells in reverse so drift hits every cell alike.
    for r in range(args.repeats):
        for fam, mode in (runnable if r % 2 == 0 else runnable[::-1]):
            bar.log(f"repeat {r + 1}/{args.repeats}: {cell_name(fam, mode)}")
            try:
                run_cell(args, fam, mode, cell_models[(fam, mode)], r, emit, bar, step)
            except Exception as e:  # a crashed cell is a result, not the end of the run
                bar.clear()
                emit({"cell": cell_name(fam, mode), "family": fam, "mode": mode, "repeat": r,
                      "turn": "error", "reason": str(e)[:500]})
    jsonl.close()
    shutil.rmtree(workdir, ignore_errors=True)
    recs = [json.loads(x) for x in open(out / "receipts.jsonl")]
    cmdline = " ".join(["tools/ds4-eval", *(argv if argv is not None else sys.argv[1:])])
    (out / "summary.md").write_text(eval_report.markdown(recs, cmdline, host))
    (out / "latency.svg").write_text(eval_report.svg(recs))
    print(f"wrote {out}/receipts.jsonl, summary.md, latency.svg", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
