"""Speculative-decoding counters in the usage of every protocol (one serializer:
src/server/api_common.h usage_extras) on the shipped default model (models/default, tiny
Qwen3.8 Flash Next with an MTP head), greedy, speculation on (depth 3) against a second
server with speculation off: same text, counters only where a draft head ran."""
import json

import anthropic
import httpx
import openai
import pytest

from conftest import ROOT, ServerProc

MODEL = ROOT / "models" / "default"
PROMPT = "Write a Python function is_prime(n)."
MAX = 40
COUNTS = ["drafted", "accepted", "bonus", "repairs", "full_replays"]


def start(*extra):
    if not (MODEL / "model.safetensors").exists():
        pytest.skip("no models/default")
    return ServerProc("--model", str(MODEL), "--thinking", "off", "--sampler.temperature", "0", "--threads", "2",
                      *extra, exe="ds4server", subcommand="serve")


@pytest.fixture(scope="module")
def spec_on():
    s = start("--speculative.enabled", "true", "--speculative.depth", "3")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def spec_off():
    s = start("--speculative.enabled", "false")
    yield s
    s.stop()


def three_protocols(url):
    """(text, usage dict) from chat completions, messages and responses, non-streaming."""
    oa = openai.OpenAI(base_url=url + "/v1", api_key="x", timeout=120, max_retries=0)
    an = anthropic.Anthropic(base_url=url, api_key="x", timeout=120, max_retries=0)
    c = oa.chat.completions.create(model="m", max_tokens=MAX, messages=[{"role": "user", "content": PROMPT}])
    m = an.messages.create(model="m", max_tokens=MAX, messages=[{"role": "user", "content": PROMPT}])
    r = oa.responses.create(model="m", max_output_tokens=MAX, input=PROMPT)
    return {
        "chat": (c.choices[0].message.content, c.usage.model_dump()),
        "messages": ("".join(b.text for b in m.content if b.type == "text"), m.usage.model_dump()),
        "responses": (r.output_text, r.usage.model_dump()),
    }


def test_speculative_counters_in_every_protocol(spec_on, spec_off):
    on = three_protocols(spec_on.url)
    off = three_protocols(spec_off.url)
    ref_text = off["chat"][0]
    assert ref_text  # the default model answers something
    for name in on:
        text, usage = on[name]
        spec = usage["speculative"]
        # Greedy speculative output equals greedy AR output, in every protocol.
        assert text == ref_text == off[name][0], name
        assert spec["mode"] == "greedy", name
        assert spec["drafted"] > 0 and 0 <= spec["accepted"] <= spec["drafted"], (name, spec)
        assert spec["acceptance"] == pytest.approx(spec["accepted"] / spec["drafted"]), name
        assert spec["full_replays"] == 0, name
        assert set(usage["timings"]) == {"ttft_s", "prefill_s", "decode_s"}, name
        # Same prompt, same greedy path: the same counts whatever the protocol.
        assert [spec[k] for k in COUNTS] == [on["chat"][1]["speculative"][k] for k in COUNTS], name
        off_spec = off[name][1]["speculative"]
        assert off_spec["mode"] == "target_only" and off_spec["drafted"] == 0 and off_spec["accepted"] == 0, name


def sse_events(url, path, body):
    events = []
    with httpx.stream("POST", url + path, json=body, timeout=120) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
    return events


def test_speculative_counters_in_streamed_usage(spec_on):
    url = spec_on.url
    msgs = [{"role": "user", "content": PROMPT}]
    chat = sse_events(url, "/v1/chat/completions", {"model": "m", "max_tokens": MAX, "messages": msgs, "stream": True,
                                                    "stream_options": {"include_usage": True}})
    ref = [e["usage"]["speculative"] for e in chat if e.get("usage")][-1]
    ant = sse_events(url, "/v1/messages", {"model": "m", "max_tokens": MAX, "messages": msgs, "stream": True})
    delta = [e for e in ant if e["type"] == "message_delta"][-1]
    resp = sse_events(url, "/v1/responses", {"model": "m", "max_output_tokens": MAX, "input": PROMPT, "stream": True})
    final = [e for e in resp if e["type"] in ("response.completed", "response.incomplete")][-1]
    assert ref["mode"] == "greedy" and ref["drafted"] > 0
    for spec in (delta["usage"]["speculative"], final["response"]["usage"]["speculative"]):
        assert spec["mode"] == "greedy"
        assert [spec[k] for k in COUNTS] == [ref[k] for k in COUNTS]
