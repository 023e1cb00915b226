"""Anthropic Messages API through the official anthropic SDK (scripted test model)."""
import anthropic
import httpx
import pytest


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


def test_errors_in_anthropic_shape(server, client):
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(model="t", max_tokens=10, messages=[{"role": "system", "content": "x"}])
    r = httpx.post(server.url + "/v1/messages", content=b"{broken", timeout=10)
    assert r.status_code == 400 and r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.post(server.url + "/v1/messages", json={"messages": user("x")}, timeout=10)
    assert r.status_code == 400 and "max_tokens" in r.json()["error"]["message"]


def test_anthropic_api_key(auth_server):
    bad = anthropic.Anthropic(base_url=auth_server.url, api_key="nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        bad.messages.create(model="t", max_tokens=10, messages=user("x"))
    ok = anthropic.Anthropic(base_url=auth_server.url, api_key="sekret-key", max_retries=0)
    assert ok.messages.create(model="t", max_tokens=50, messages=user("k")).content[0].text == "Echo: k. Done."
