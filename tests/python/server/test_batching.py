"""Continuous batching through `ds4server serve` on the shipped default model (Qwen Next,
whose CPU decode_batch reads each weight once for the batch): eight concurrent greedy chats,
one of them cancelled by its client mid-stream, give every finished chat exactly the answer
it gets alone; /metrics shows the batched forwards, and the session gauges are back to zero
once the streams are done. Speculation on and off (speculating turns run their cycles per
session beside the batch)."""
import concurrent.futures
import re
import time

import httpx
import pytest

from conftest import ROOT, ServerProc

MODEL = ROOT / "models" / "default"
PROMPTS = ["Tell me about cats.", "What is the capital of France?", "Write a Python function add(a, b).",
           "Define the word 'river'.", "hello", "Tell me a short story about a dragon.",
           "What do bees make?", "Explain rain in one sentence."]


@pytest.fixture(scope="module", params=["false", "true"], ids=["ar", "speculative"])
def srv(request):
    if not (MODEL / "model.gguf").exists():
        pytest.skip("no models/default")
    s = ServerProc("--model", str(MODEL / "model.gguf"), "--thinking", "off", "--sampler.temperature", "0",
                   "--threads", "2", "--speculative.enabled", request.param, "--cache.mib", "0",
                   exe="ds4server", subcommand="serve")
    s.speculative = request.param == "true"
    yield s
    s.stop()


def chat(url, prompt, max_tokens=40):
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens}
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=300)
    r.raise_for_status()
    return r.json()["choices"][0]["message"]["content"]


def metric(text, name):
    m = re.search(r"\n" + re.escape(name) + r" (\S+)", "\n" + text)
    assert m, name
    return float(m.group(1))


def cancelled_stream(url, prompt):
    """Streams a long answer and drops the connection after a few chunks (a disconnect)."""
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 200, "stream": True}
    chunks = 0
    with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=300) as r:
        for line in r.iter_lines():
            if line.startswith("data: ") and '"content"' in line:
                chunks += 1
                if chunks == 3:
                    break
    return chunks


def test_concurrent_chats_answer_as_alone(srv):
    alone = [chat(srv.url, p) for p in PROMPTS]
    before = httpx.get(srv.url + "/metrics", timeout=10).text
    with concurrent.futures.ThreadPoolExecutor(len(PROMPTS) + 1) as pool:
        cut = pool.submit(cancelled_stream, srv.url, "Write a very long story about the sea.")
        together = list(pool.map(lambda p: chat(srv.url, p), PROMPTS))
        assert cut.result() == 3
    assert together == alone
    after = httpx.get(srv.url + "/metrics", timeout=10).text
    assert "# TYPE ds4_decode_batch_size histogram" in after
    if not srv.speculative:
        # Plain turns decode together: more rows than calls, every call at least two rows.
        calls = metric(after, "ds4_batched_decode_calls_total") - metric(before, "ds4_batched_decode_calls_total")
        rows = metric(after, "ds4_batched_decode_rows_total") - metric(before, "ds4_batched_decode_rows_total")
        assert calls > 0 and rows >= 2 * calls, (calls, rows)
        # The batched forwards' time is part of the iterations' wall time.
        fwd = metric(after, "ds4_batched_decode_seconds_total") - metric(before, "ds4_batched_decode_seconds_total")
        it = metric(after, "ds4_engine_iteration_seconds_total") - metric(before, "ds4_engine_iteration_seconds_total")
        assert 0 < fwd <= it, (fwd, it)
    # Everything finished (the dropped stream is cancelled within the client watch's poll).
    for _ in range(100):
        text = httpx.get(srv.url + "/metrics", timeout=10).text
        if metric(text, "ds4_live_sessions") == 0:
            break
        time.sleep(0.1)
    assert metric(text, "ds4_live_sessions") == 0
    assert metric(text, "ds4_queue_depth") == 0
    assert metric(text, "ds4_step_token_budget") == 2048
