"""ds4-eval against the real server binary (DS4_BIN, the ctest build) on models/default/model.gguf:
receipt fields, phase accounting, prefix-cache reuse across the chat, the greedy MTP cell
(D3 speculation: acceptance and time split recorded, answers equal to the AR cell's), skip
reasons, quiet output when piped, the tiny DeepSeek/GLM models chatting through their
tokenizers, and the is_prime sandbox runner on known-good, known-bad and non-terminating
snippets."""
import io
import json
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = pathlib.Path(os.environ.get("DS4_ROOT", pathlib.Path(__file__).resolve().parents[3]))
BIN = pathlib.Path(os.environ.get("DS4_BIN", ROOT / "build" / "debug" / "bin"))
sys.path.insert(0, str(ROOT / "tools" / "eval"))
import ds4_eval  # noqa: E402
import eval_report  # noqa: E402
import progress  # noqa: E402
import sandbox  # noqa: E402

TURN_FIELDS = ["cell", "family", "mode", "model", "repeat", "turn", "new_tokens", "cached_tokens",
               "prompt_tokens", "output_tokens", "thinking_tokens", "phases_s", "ttft_s", "client_ttft_s",
               "wall_s", "prefill_tok_s", "decode_tok_s", "speculative", "token_latency_ms",
               "peak_mem_bytes", "rss_bytes", "io_read_bytes", "io_write_bytes", "finish_reason",
               "settings", "health"]

GOOD = """```python
def is_prime(n):
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True

assert is_prime(2)
assert is_prime(13)
assert not is_prime(1)
assert not is_prime(9)
assert is_prime(97)
```"""
WRONG = GOOD.replace("return False\n    i = 2", "return True\n    i = 2")  # n < 2 -> prime: is_prime(1) fails
LOOP = "```python\ndef is_prime(n):\n    while True:\n        pass\nassert is_prime(7)\n```"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if not (BIN / "ds4server").exists():
        pytest.skip(f"{BIN / 'ds4server'} not built")
    out = tmp_path_factory.mktemp("eval")
    # A model folder without tokenizer.json: the skip reason must name it.
    (out / "no-tokenizer").mkdir()
    (out / "no-tokenizer" / "config.json").write_text("{}")
    # Through the CLI with stdout/stderr piped: what a CI log or `| tee` sees.
    res = subprocess.run([str(ROOT / "tools" / "ds4-eval"), "--bin", str(BIN),
                          "--cells", "qwen-AR,qwen-MTP,glm-AR,deepseek-AR,glm-MTP,deepseek-DSpark",
                          "--repeats", "1", "--max-tokens", "256", "--ping-tokens", "4",
                          "--model-glm", str(out / "absent-model"), "--model-deepseek", str(out / "no-tokenizer"),
                          "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    (out / "stderr.txt").write_text(res.stderr)
    recs = [json.loads(x) for x in open(out / "receipts.jsonl")]
    return out, recs


def turns(recs):
    return {r["turn"]: r for r in recs if r["cell"] == "qwen-AR" and r["turn"] != "metrics"}


def test_every_turn_has_every_field(run):
    _, recs = run
    t = turns(recs)
    assert "error" not in t, t.get("error")
    assert set(t) == {"load", "warmup", "chat1", "chat2", "chat3", "ping"}
    for name in ["warmup", "chat1", "chat2", "chat3", "ping"]:
        r = t[name]
        missing = [f for f in TURN_FIELDS if f not in r]
        assert not missing, (name, missing)
        assert set(r["phases_s"]) == {"restore_s", "prefill_s", "first_token_s", "decode_s"}
        assert set(r["token_latency_ms"]) == {"p50", "p95", "p99", "max", "n"}
        assert "gpu_canary" not in r  # CPU model: no canary ran, so no field (not zeros)
        assert r["speculative"]["acceptance"] is None and "no speculative" in r["speculative"]["reason"]
        assert r["sampling"] == {"temperature": 0.0} and "speculative:\n  enabled: false\n" in r["settings"]
        assert r["thinking"] == "low"  # the reference's smallest active level, sent per request
        assert r["new_tokens"] == r["prompt_tokens"] - r["cached_tokens"]
        assert r["output_tokens"] > 0 and r["peak_mem_bytes"] > 0
        assert r["settings"] and "speculative" in r["settings"]
        assert r["finish_reason"] in ("stop", "length")
    assert t["ping"]["output_tokens"] <= 4 and t["chat1"]["output_tokens"] <= 256
    assert t["chat3"]["is_prime"]["status"] in ("pass", "fail", "timeout", "no_code")


def test_load_is_its_own_phase(run):
    _, recs = run
    t = turns(recs)
    assert t["load"]["load_s"] > 0
    # Warmup's prompt is computed from scratch by a server that is already up: its receipt
    # has no load field, and it ran after the load record was written.
    assert "load_s" not in t["warmup"]
    assert t["warmup"]["cached_tokens"] == 0
    order = [r["turn"] for r in recs if r["cell"] == "qwen-AR"]
    assert order == ["load", "warmup", "chat1", "chat2", "chat3", "ping", "metrics"]


def test_metrics_agree_with_receipts(run):
    _, recs = run
    m = next(r["metrics"] for r in recs if r["turn"] == "metrics")
    t = [r for r in turns(recs).values() if r["turn"] != "load"]
    assert m["ds4_requests_total"] == len(t) == 5
    assert m["ds4_prompt_tokens_total"] == sum(r["prompt_tokens"] for r in t)
    assert m["ds4_cached_prompt_tokens_total"] == sum(r["cached_tokens"] for r in t)
    assert m["ds4_generated_tokens_total"] == sum(r["output_tokens"] for r in t)


def test_phases_sum_within_wall_time(run):
    _, recs = run
    for r in turns(recs).values():
        if r["turn"] == "load":
            continue
        p = r["phases_s"]
        parts = [p["prefill_s"], p["first_token_s"], p["decode_s"]]
        assert all(x is not None and x >= 0 for x in parts), (r["turn"], p)
        assert sum(parts) <= r["wall_s"], (r["turn"], p, r["wall_s"])
        assert abs(sum(parts[:2]) - r["ttft_s"]) < 1e-6


def test_chat_reuses_previous_history(run):
    """Turn 3 follows a turn that ended on the stop token after thinking: the client sends
    back the parsed (edge-whitespace-stripped) text, whose canonical re-render need not
    repeat the generated tokens; the snapshot of that turn must still be reused whole."""
    _, recs = run
    t = turns(recs)
    # The premise (greedy on models/default/model.gguf, 256-token budget): chat1 is cut by the budget,
    # chat2 ends with the stop token after a reasoning block.
    assert t["chat2"]["finish_reason"] == "stop" and t["chat2"]["thinking_tokens"] > 0, t["chat2"]
    assert t["chat1"]["cached_tokens"] == 0 or t["chat1"]["cached_tokens"] < t["chat1"]["prompt_tokens"]
    for prev, cur in (("chat1", "chat2"), ("chat2", "chat3")):
        history = t[prev]["prompt_tokens"] + t[prev]["output_tokens"]
        assert t[cur]["previous_history_tokens"] == history
        assert t[cur]["cached_tokens"] == history, (cur, t[cur]["cached_tokens"], history)


def test_mtp_cell_speculates_greedy_and_matches_ar(run):
    """qwen-MTP: the server speculates at depth 3 on every greedy turn; the receipts carry
    its counters and time split; greedy speculative answers equal greedy AR answers."""
    _, recs = run
    mtp = {r["turn"]: r for r in recs if r["cell"] == "qwen-MTP" and r["turn"] not in ("metrics",)}
    ar = turns(recs)
    assert "error" not in mtp, mtp.get("error")
    assert "speculative:\n  enabled: true\n  depth: 3\n" in mtp["load"]["settings"]  # the YAML receipt
    for name in ["warmup", "chat1", "chat2", "chat3", "ping"]:
        r, sp = mtp[name], mtp[name]["speculative"]
        assert r["speculative_depth"] == 3 and r["sampling"] == {"temperature": 0.0}
        assert sp["mode"] == "greedy", (name, sp)
        assert 0 < sp["drafted"] and 0 <= sp["accepted"] <= sp["drafted"], (name, sp)
        assert abs(sp["acceptance"] - sp["accepted"] / sp["drafted"]) < 1e-9
        assert sp["full_replays"] == 0
        parts = [sp["draft_s"], sp["verify_s"], sp["commit_s"]]
        assert all(x >= 0 for x in parts) and sum(parts) <= r["wall_s"], (name, sp, r["wall_s"])
        assert r["answer_excerpt"] == ar[name]["answer_excerpt"], name
        assert r["output_tokens"] == ar[name]["output_tokens"], name
    rate, acc, drafted = eval_report.acceptance([mtp[t] for t in ("chat1", "chat2", "chat3")])
    assert drafted == sum(mtp[t]["speculative"]["drafted"] for t in ("chat1", "chat2", "chat3"))
    assert rate == acc / drafted


def test_skipped_cells_carry_reasons(run):
    _, recs = run
    skipped = {r["cell"]: r["reason"] for r in recs if r["turn"] == "skipped"}
    assert set(skipped) == {"glm-AR", "deepseek-AR", "glm-MTP", "deepseek-DSpark"}
    assert skipped["glm-AR"].startswith("model not found")
    assert "tokenizer.json" in skipped["deepseek-AR"]
    # The speculative cells of those families run the same (absent / broken) models.
    assert skipped["glm-MTP"].startswith("model not found") and "tokenizer.json" in skipped["deepseek-DSpark"]
    assert not any(r["cell"] in skipped for r in recs if r["turn"] not in ("skipped",))
    # Sampled turns speculate too (exact, MTPLX's acceptance): the MTP cell runs at any temperature.
    for t in (0.0, 1.0):
        assert ds4_eval.skip_reason("qwen", "MTP", str(ROOT / "models" / "default"), t) is None


def test_piped_output_has_no_progress_codes(run):
    out, _ = run
    err = (out / "stderr.txt").read_text()
    assert "repeat 1/1: qwen-MTP" in err
    assert "\r" not in err and "\x1b" not in err, repr(err[:300])


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal():
    piped = io.StringIO()
    bar = progress.Progress(piped)
    bar.update("chat1", 3, 10, force=True)
    bar.log("a line")
    assert piped.getvalue() == "a line\n"
    tty = _Tty()
    bar = progress.Progress(tty)
    bar.update("chat1", 5, 10, force=True)
    assert tty.getvalue() == "\r[" + "#" * 14 + "." * 14 + "] 5/10 chat1\x1b[K"
    bar.log("a line")
    assert tty.getvalue().endswith("\r\x1b[Ka line\n")


def test_tiny_deepseek_and_glm_chat_through_their_tokenizers(tmp_path):
    """The tiny random-weight models (vocab 1024) have a family-format tokenizer.json of
    exactly their vocabulary beside them, so their AR cells run the whole chat (noise text)."""
    if not (BIN / "ds4server").exists():
        pytest.skip(f"{BIN / 'ds4server'} not built")
    rc = ds4_eval.main(["--bin", str(BIN), "--cells", "deepseek-AR,glm-AR,deepseek-DSpark,glm-MTP", "--repeats", "1",
                        "--max-tokens", "16", "--ping-tokens", "4", "--progress", "off", "--out", str(tmp_path)])
    assert rc == 0
    recs = [json.loads(x) for x in open(tmp_path / "receipts.jsonl")]
    # Their speculative cells run the tiny models plus the reference draft heads
    # (tests/data/glm5/mtp, tests/data/deepseek_v4/dspark): they draft, and greedy speculation
    # gives the AR cell's answers token for token.
    for spec, ar in (("deepseek-DSpark", "deepseek-AR"), ("glm-MTP", "glm-AR")):
        chats = {r["turn"]: r for r in recs if r["cell"] == spec and r["turn"] in ("chat1", "chat2", "chat3")}
        base = {r["turn"]: r for r in recs if r["cell"] == ar and r["turn"] in ("chat1", "chat2", "chat3")}
        assert set(chats) == {"chat1", "chat2", "chat3"}, (spec, recs[-1])
        assert sum(r["speculative"].get("drafted") or 0 for r in chats.values()) > 0, spec
        for t in chats:
            assert chats[t]["answer_excerpt"] == base[t]["answer_excerpt"], (spec, t)
    for cell in ("deepseek-AR", "glm-AR", "deepseek-DSpark", "glm-MTP"):
        got = [r["turn"] for r in recs if r["cell"] == cell]
        assert got == ["load", "warmup", "chat1", "chat2", "chat3", "ping", "metrics"], (cell, recs[-1])
        for r in recs:
            if r["cell"] == cell and r["turn"] in ("chat1", "chat2", "chat3"):
                assert 0 < r["output_tokens"] <= 16 and r["new_tokens"] > 0, (cell, r["turn"])
                assert r["finish_reason"] in ("stop", "length")


def test_report_files(run):
    out, recs = run
    md = (out / "summary.md").read_text()
    assert "| qwen-AR | chat3 | 1 |" in md and "| qwen-MTP | chat3 | 1 |" in md
    assert "qwen-MTP acceptance over the three chat turns" in md and "Answers identical to qwen-AR" in md
    assert "glm-MTP: model not found" in md
    assert "Thinking level (reasoning_effort) of every request: low" in md
    svg = (out / "latency.svg").read_text()
    assert svg.startswith("<svg") and "qwen-AR chat2" in svg
    ET.fromstring(svg)  # well-formed XML


def test_sandbox_pass_fail_timeout():
    good = sandbox.run_snippet(sandbox.extract_code(GOOD), 10)
    assert good["status"] == "pass" and good["asserts"] == 5, good
    bad = sandbox.run_snippet(sandbox.extract_code(WRONG), 10)
    assert bad["status"] == "fail" and "AssertionError" in bad["reason"], bad
    loop = sandbox.run_snippet(sandbox.extract_code(LOOP), 1.5)
    assert loop["status"] == "timeout", loop
    none = sandbox.run_snippet(sandbox.extract_code("I cannot write code today."))
    assert none["status"] == "no_code"


def test_is_prime_grading():
    assert sandbox.grade_is_prime(GOOD)["status"] == "pass"
    few = sandbox.grade_is_prime(GOOD.replace("assert is_prime(97)\n", ""))
    assert few["status"] == "fail" and few["ran_ok"] and "only 4 assert" in few["reason"], few
    other = sandbox.grade_is_prime("```python\ndef shout(s):\n    return s.upper()\nassert shout('a') == 'A'\n```")
    assert other["status"] == "fail" and "no is_prime" in other["reason"], other
    assert sandbox.grade_is_prime(WRONG)["status"] == "fail"
    assert sandbox.grade_is_prime(LOOP, 1.5)["status"] == "timeout"


def test_sandbox_has_empty_env_and_no_network():
    # Python itself may add LC_CTYPE (PEP 538 locale coercion); nothing else may be there.
    r = sandbox.run_snippet("import os\nassert set(os.environ) <= {'LC_CTYPE'}, dict(os.environ)", 10)
    assert r["status"] == "pass", r
    if r["network_isolated"]:
        net = sandbox.run_snippet("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=3)", 10)
        assert net["status"] == "fail" and "unreachable" in net["reason"].lower(), net


def test_percentiles_nearest_rank():
    p = ds4_eval.percentiles([float(x) for x in range(1, 101)])
    assert (p["p50"], p["p95"], p["p99"], p["max"], p["n"]) == (50.0, 95.0, 99.0, 100.0, 100)
    assert ds4_eval.percentiles([])["p50"] is None
    assert eval_report.svg([]).startswith("<svg")


def test_reuse_turns_scenario(tmp_path, capsys):
    """--reuse-turns: a thinking-on chat whose client drops the reasoning, restarted before the
    last turn; every later turn reuses at least the conversation up to the previous user
    message, exactly that after the restart (from the disk checkpoint at that boundary)."""
    if not (BIN / "ds4server").exists():
        pytest.skip(f"{BIN / 'ds4server'} not built")
    assert ds4_eval.main(["--bin", str(BIN), "--cells", "deepseek-AR", "--reuse-turns", "4", "--restart-at", "4",
                          "--max-tokens", "8", "--thinking", "", "--out", str(tmp_path)]) == 0
    rows = [json.loads(x) for x in open(tmp_path / "receipts.jsonl")]
    assert [r["turn"] for r in rows] == [1, 2, 3, 4]
    assert rows[0]["cached_tokens"] == 0 and rows[0]["must_cache"] == 0
    for r in rows:
        assert r["new_tokens"] == r["prompt_tokens"] - r["cached_tokens"]
        assert r["scenario"] == "reuse-turns" and r["cell"] == "deepseek-AR"
    for r in rows[1:3]:
        assert r["cached_tokens"] >= r["must_cache"] > 0, r
    assert rows[3]["restored"] and rows[3]["cached_tokens"] == rows[3]["must_cache"] > rows[2]["must_cache"]
    table = capsys.readouterr().out
    assert "turn  prompt  cached  new  >=must  restored" in table and "total " in table
