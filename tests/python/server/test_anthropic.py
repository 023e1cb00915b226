"""Anthropic Messages API through the official anthropic SDK (scripted test model)."""
import json
import re
import time

import anthropic
import httpx
import pytest

from conftest import health


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key="unused", timeout=60, max_retries=0)


def user(text):
    return [{"role": "user", "content": text}]


def test_messages_nonstreaming(client):
    m = client.messages.create(model="t", max_tokens=100, messages=user("hello"))
    assert m.content[0].type == "text" and m.content[0].text == "Echo: hello. Done."
    assert m.stop_reason == "end_turn"
    assert m.usage.output_tokens == len("Echo: hello. Done.") + 1


def test_messages_streaming_events(client):
    with client.messages.stream(model="t", max_tokens=100, messages=user("streamy")) as s:
        events = [e.type for e in s]
        final = s.get_final_message()
    assert final.content[0].text == "Echo: streamy. Done."
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "content_block_start" in events and "content_block_stop" in events and "message_delta" in events


def test_thinking_block(client):
    m = client.messages.create(model="t", max_tokens=200, messages=user("hi"),
                               thinking={"type": "enabled", "budget_tokens": 100})
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert m.content[0].thinking == "\nThe user wrote 2 bytes.\n"
    assert m.content[1].text == "Echo: hi. Done."


def test_tool_use_round_trip(client):
    tools = [{"name": "get_weather", "description": "weather", "input_schema": {"type": "object"}}]
    msgs = user("call tool now")
    m = client.messages.create(model="t", max_tokens=200, messages=msgs, tools=tools)
    assert m.stop_reason == "tool_use"
    tu = [b for b in m.content if b.type == "tool_use"][0]
    assert tu.name == "get_weather" and tu.input == {"city": "Paris"}
    msgs.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]})
    msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tu.id, "content": "rainy"}]})
    m2 = client.messages.create(model="t", max_tokens=200, messages=msgs, tools=tools)
    assert m2.content[0].text == "Tool said: rainy."
    with client.messages.stream(model="t", max_tokens=200, messages=user("call tool"), tools=tools) as s:
        final = s.get_final_message()
    assert final.stop_reason == "tool_use" and final.content[-1].input == {"city": "Paris"}


def test_stop_sequences_and_max_tokens(client):
    m = client.messages.create(model="t", max_tokens=100, messages=user("hello"), stop_sequences=["Done"])
    assert m.content[0].text == "Echo: hello. "
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == "Done"
    m = client.messages.create(model="t", max_tokens=6, messages=user("count"))
    assert m.content[0].text == "1 2 3 " and m.stop_reason == "max_tokens"


def test_cache_read_tokens_on_second_turn(client):
    msgs = user("turn one")
    m1 = client.messages.create(model="t", max_tokens=100, messages=msgs)
    msgs += [{"role": "assistant", "content": m1.content[0].text}, {"role": "user", "content": "turn two"}]
    m2 = client.messages.create(model="t", max_tokens=100, messages=msgs)
    assert m2.content[0].text == "Echo: turn two. Done."
    assert m2.usage.cache_read_input_tokens == m1.usage.input_tokens + m1.usage.output_tokens


def test_count_tokens(client):
    r = client.messages.count_tokens(model="t", messages=user("abc"))
    # <|im_start|> "user\n" "abc" <|im_end|> "\n" <|im_start|> "assistant\n" (thinking off)
    assert r.input_tokens == 1 + 5 + 3 + 1 + 1 + 1 + 10


def test_cancel_mid_stream(server, client):
    def cancelled():
        m = httpx.get(server.url + "/metrics").text
        return int(float(re.search(r"\nds4_requests_cancelled_total (\S+)", m).group(1)))
    before = cancelled()
    got = ""
    with client.messages.stream(model="t", max_tokens=30000, messages=user("count and stop")) as s:
        for text in s.text_stream:
            got += text
            if len(got) > 30:
                break
    assert got.startswith("1 2 3 4 5 6 7 8 9 10")
    deadline = time.time() + 30
    while time.time() < deadline and not (cancelled() == before + 1 and health(server.url)["live_sessions"] == 0):
        time.sleep(0.05)
    assert cancelled() == before + 1
    assert health(server.url)["live_sessions"] == 0
    assert client.messages.create(model="t", max_tokens=50, messages=user("on")).content[0].text == "Echo: on. Done."


def test_errors_in_anthropic_shape(server, client):
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="t", max_tokens=10, messages=[{"role": "system", "content": "x"}])
    r = httpx.post(server.url + "/v1/messages", content=b"{broken", timeout=10)
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.post(server.url + "/v1/messages", json={"messages": user("x")}, timeout=10)
    assert r.status_code == 400 and "max_tokens" in r.json()["error"]["message"]
    bad = [
        (json.dumps({"max_tokens": "ten", "messages": user("x")}).encode(), 400, "invalid_request_error"),
        (json.dumps({"max_tokens": 5, "messages": [{"role": "user", "content": 7}]}).encode(), 400, "invalid_request_error"),
        (b'{"max_tokens": 5, "messages": [{"role": "user", "content": "\xff bad"}]}', 400, "invalid_request_error"),
        (json.dumps({"max_tokens": 5, "messages": user("x" * 70000)}).encode(), 413, "request_too_large"),
    ]
    for body, status, kind in bad:
        r = httpx.post(server.url + "/v1/messages", content=body, headers={"content-type": "application/json"}, timeout=10)
        assert r.status_code == status, (body[:50], r.text)
        assert r.json()["type"] == "error" and r.json()["error"]["type"] == kind, r.text
    assert server.alive() and health(server.url)["status"] == "ok"


def test_anthropic_api_key(auth_server):
    bad = anthropic.Anthropic(base_url=auth_server.url, api_key="nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(model="t", max_tokens=10, messages=user("x"))
    r = httpx.post(auth_server.url + "/v1/messages", json={"max_tokens": 5, "messages": user("x")}, timeout=10)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    ok = anthropic.Anthropic(base_url=auth_server.url, api_key="sekret-key", max_retries=0)
    assert ok.messages.create(model="t", max_tokens=50, messages=user("k")).content[0].text == "Echo: k. Done."
