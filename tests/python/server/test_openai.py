"""OpenAI protocol through the official openai SDK against the scripted test model
(tests/support/test_model.h: "Echo: <text>. Done.", "count" -> "1 2 3 ...", "call tool")."""
import concurrent.futures
import json

import httpx
import openai
import pytest

from conftest import health


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=60, max_retries=0)


def ask(client, text, **kw):
    return client.chat.completions.create(model="test", messages=[{"role": "user", "content": text}], **kw)


def test_chat_nonstreaming(client):
    r = ask(client, "hello")
    assert r.choices[0].message.content == "Echo: hello. Done."
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens == len("Echo: hello. Done.") + 1  # + the stop token
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_streaming_with_usage(client):
    text, finish, usage = "", None, None
    for chunk in ask(client, "stream me", stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            finish = c.finish_reason or finish
    assert text == "Echo: stream me. Done."
    assert finish == "stop"
    assert usage.completion_tokens == len(text) + 1


def test_reasoning_separate(client):
    r = ask(client, "hi", reasoning_effort="high")
    m = r.choices[0].message
    assert m.content == "Echo: hi. Done."
    assert m.model_extra["reasoning_content"] == "\nThe user wrote 2 bytes.\n"
    assert r.usage.completion_tokens_details.reasoning_tokens > 0


def test_tools_round_trip(client):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "weather",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    msgs = [{"role": "user", "content": "please call tool"}]
    r = client.chat.completions.create(model="t", messages=msgs, tools=tools)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    msgs.append(choice.message.model_dump(exclude_none=True))
    msgs.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})
    r2 = client.chat.completions.create(model="t", messages=msgs, tools=tools)
    assert r2.choices[0].message.content == "Tool said: sunny."
    # The history (tool call rendered back) was reused from the cache.
    assert r2.usage.prompt_tokens_details.cached_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_tool_call_streaming(client):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    calls, finish = [], None
    for chunk in client.chat.completions.create(model="t", messages=[{"role": "user", "content": "call tool"}],
                                                tools=tools, stream=True):
        for c in chunk.choices:
            calls += c.delta.tool_calls or []
            finish = c.finish_reason or finish
    assert finish == "tool_calls"
    assert calls[0].function.name == "get_weather" and json.loads(calls[0].function.arguments) == {"city": "Paris"}


def test_stop_strings(client):
    r = ask(client, "hello", stop=["Done", "zzz"])
    assert r.choices[0].message.content == "Echo: hello. "
    assert r.choices[0].finish_reason == "stop"
    text = "".join(c.choices[0].delta.content or "" for c in ask(client, "hello", stop="llo.", stream=True) if c.choices)
    assert text == "Echo: he"


def test_max_tokens(client):
    r = ask(client, "count", max_tokens=10)
    assert r.choices[0].message.content == "1 2 3 4 5 "
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 10


def test_three_turns_reuse_cache(client):
    msgs = [{"role": "user", "content": "first"}]
    prev = None
    for turn, text in enumerate(["first", "second", "third"]):
        if turn:
            msgs.append({"role": "user", "content": text})
        r = client.chat.completions.create(model="t", messages=msgs)
        assert r.choices[0].message.content == f"Echo: {text}. Done."
        cached = r.usage.prompt_tokens_details.cached_tokens
        if prev is None:
            assert cached == 0
        else:
            assert cached == prev.prompt_tokens + prev.completion_tokens
        prev = r.usage
        msgs.append({"role": "assistant", "content": r.choices[0].message.content})


def metric(url, name):
    line = [l for l in httpx.get(url + "/metrics").text.splitlines() if l.startswith(name + " ")][0]
    return int(float(line.split()[1]))


def test_cancel_mid_stream_frees_slot(server, client):
    cancelled_before = metric(server.url, "ds4_requests_cancelled_total")
    entries_before = metric(server.url, "ds4_cache_entries")
    stream = ask(client, "count to cancel", max_tokens=30000, stream=True)
    got = ""
    for chunk in stream:
        if chunk.choices:
            got += chunk.choices[0].delta.content or ""
        if len(got) > 40:
            break
    stream.close()
    assert got.startswith("1 2 3 4 5 6 7 8 9 10")
    import time
    deadline = time.time() + 30
    while time.time() < deadline:
        h = health(server.url)
        m = httpx.get(server.url + "/metrics").text
        cancelled = int(float([l for l in m.splitlines() if l.startswith("ds4_requests_cancelled_total")][0].split()[1]))
        if h["live_sessions"] == 0 and cancelled == cancelled_before + 1:
            break
        time.sleep(0.05)
    assert h["live_sessions"] == 0
    assert cancelled == cancelled_before + 1
    # State not published: only the prompt-end snapshot is new, and a chat that continues the
    # partial answer reuses just the prompt (nothing that holds generated tokens).
    assert metric(server.url, "ds4_cache_entries") == entries_before + 1
    # <|im_start|> "user\n" text <|im_end|> "\n" <|im_start|> "assistant\n" (thinking off)
    prompt_tokens = 1 + 5 + len("count to cancel") + 1 + 1 + 1 + 10
    r = client.chat.completions.create(model="t", messages=[
        {"role": "user", "content": "count to cancel"}, {"role": "assistant", "content": got},
        {"role": "user", "content": "next"}])
    assert r.choices[0].message.content == "Echo: next. Done."
    assert r.usage.prompt_tokens_details.cached_tokens == prompt_tokens
    # The server keeps serving.
    assert ask(client, "after").choices[0].message.content == "Echo: after. Done."


def test_fifty_concurrent_streams(client):
    def one(i):
        text = ""
        for chunk in ask(client, f"user {i}", stream=True):
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
        return text
    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        results = list(pool.map(one, range(50)))
    assert results == [f"Echo: user {i}. Done." for i in range(50)]


def test_completions(client):
    r = client.completions.create(model="t", prompt="<|im_start|>user\nraw<|im_end|>\n", max_tokens=5)
    # Plain text: control strings are bytes, not control tokens -> the script sees no turn.
    assert r.choices[0].finish_reason in ("stop", "length")
    chunks = list(client.completions.create(model="t", prompt="x", max_tokens=3, stream=True))
    assert chunks[-1].choices[0].finish_reason is not None


def test_responses_api(client):
    r = client.responses.create(model="t", input="respond")
    assert r.output_text == "Echo: respond. Done."
    assert r.status == "completed"
    assert r.usage.output_tokens == len("Echo: respond. Done.") + 1
    events = list(client.responses.create(model="t", input="streamed", stream=True))
    types = [e.type for e in events]
    assert types[0] == "response.created" and types[-1] == "response.completed"
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Echo: streamed. Done."
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_models_and_min_p_error(server, client):
    assert client.models.list().data[0].id
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, "x", extra_body={"min_p": 0.1})
    assert "min_p" in str(e.value)


def test_bad_inputs_give_4xx_json_and_server_survives(server):
    url = server.url + "/v1/chat/completions"
    cases = [
        (b"{not json", 400),
        (json.dumps({"messages": "nope"}).encode(), 400),
        (json.dumps({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}).encode(), 400),
        (json.dumps({"messages": [{"role": "wizard", "content": "x"}]}).encode(), 400),
        (b'{"messages": [{"role": "user", "content": "\xff\xfe bad"}]}', 400),
        (json.dumps({"messages": [{"role": "user", "content": "x" * 70000}]}).encode(), 413),
        (json.dumps({"messages": [{"role": "user", "content": "x"}], "max_tokens": 10**9}).encode(), 400),
        (json.dumps({"messages": [{"role": "user", "content": "y" * 5000}]}).encode(), 400),  # > context
    ]
    for body, status in cases:
        r = httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=30)
        assert r.status_code == status, (body[:60], r.text)
        assert "message" in r.json()["error"]
    r = httpx.post(url, content=b"[1,2]", timeout=30)
    assert r.status_code == 400
    assert httpx.get(server.url + "/nope").status_code == 404
    assert server.alive()
    assert health(server.url)["status"] == "ok"


def test_keepalive_during_prefill(server):
    # Prompts longer than one prefill chunk (64 tokens for the test model) get SSE comments.
    body = {"model": "t", "stream": True, "messages": [{"role": "user", "content": "k" * 300}]}
    with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=30) as r:
        lines = [l for l in r.iter_lines()]
    assert ": keepalive" in lines
    assert lines[lines.index(": keepalive") + 1:].count("data: [DONE]") == 1


def test_health_and_metrics(server):
    h = health(server.url)
    assert "sampler:" in h["settings"] and "top_k: 20" in h["settings"]
    assert h["sampler"] == "mtplx"
    m = httpx.get(server.url + "/metrics").text
    for name in ["ds4_requests_total", "ds4_generated_tokens_total", "ds4_queue_depth", "ds4_cache_hits_total",
                 "ds4_resident_memory_bytes", "ds4_decode_tokens_per_second"]:
        assert f"\n{name} " in m or m.startswith(name), name


def test_api_key(auth_server):
    url = auth_server.url + "/v1"
    for key in ["wrong", "sekret-ke", "sekret-key-longer"]:
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(base_url=url, api_key=key, max_retries=0).models.list()
    r = httpx.post(url + "/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    ok = openai.OpenAI(base_url=url, api_key="sekret-key", max_retries=0)
    assert ask(ok, "auth").choices[0].message.content == "Echo: auth. Done."
    h = httpx.get(auth_server.url + "/health")
    assert h.status_code == 200  # health needs no key ...
    assert "sekret" not in h.text  # ... and never shows it
