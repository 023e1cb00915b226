"""A client that closes its connection in the middle of a NON-streaming request: the server
notices (src/server/client_watch.h), cancels the job (slot freed, generation stops long
before max_tokens, no state with generated tokens published) and keeps serving."""
import json
import re
import socket
import time

import httpx
import pytest

from conftest import health


def metric(url, name):
    text = httpx.get(url + "/metrics", timeout=10).text
    return float(re.search(r"\n" + name + r" (\S+)", text).group(1))


BODIES = {
    "/v1/chat/completions": lambda text: {"model": "t", "max_tokens": 30000,
                                          "messages": [{"role": "user", "content": text}]},
    "/v1/messages": lambda text: {"model": "t", "max_tokens": 30000,
                                  "messages": [{"role": "user", "content": text}]},
    "/v1/responses": lambda text: {"model": "t", "max_output_tokens": 30000, "input": text},
}


@pytest.mark.parametrize("path", list(BODIES))
def test_nonstreaming_disconnect_cancels_the_job(server, path):
    url = server.url
    cancelled0 = metric(url, "ds4_requests_cancelled_total")
    generated0 = metric(url, "ds4_generated_tokens_total")
    entries0 = metric(url, "ds4_cache_entries")
    # "count" makes the test model write "1 2 3 ..." until max_tokens: 30000 tokens at the
    # fixture's 200 us per token, far longer than the wait below.
    body = json.dumps(BODIES[path](f"count for {path}")).encode()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    deadline = time.time() + 30
    while health(url)["live_sessions"] != 1 and time.time() < deadline:
        time.sleep(0.02)
    assert health(url)["live_sessions"] == 1
    while metric(url, "ds4_generated_tokens_total") < generated0 + 50 and time.time() < deadline:
        time.sleep(0.02)
    sock.close()
    while time.time() < deadline:
        if metric(url, "ds4_requests_cancelled_total") == cancelled0 + 1 and health(url)["live_sessions"] == 0:
            break
        time.sleep(0.05)
    assert metric(url, "ds4_requests_cancelled_total") == cancelled0 + 1
    assert health(url)["live_sessions"] == 0
    # Stopped early, and only the prompt-end snapshot was published (no generated tokens).
    assert metric(url, "ds4_generated_tokens_total") - generated0 < 30000
    assert metric(url, "ds4_cache_entries") == entries0 + 1
    # The server keeps serving.
    r = httpx.post(url + "/v1/chat/completions", json={"model": "t", "messages": [{"role": "user", "content": "still"}]},
                   timeout=30)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Echo: still. Done."


def test_nonstreaming_client_that_stays_gets_its_answer(server):
    # The watch must not cancel a client that is only waiting (keep-alive connection, no bytes).
    # A long echo (the connection is watched every 200 ms while it runs) ended by max_tokens.
    text = "w" * 1500
    with httpx.Client(timeout=60) as c:
        for _ in range(2):
            r = c.post(server.url + "/v1/chat/completions",
                       json={"model": "t", "max_tokens": 400, "messages": [{"role": "user", "content": text}]})
            assert r.status_code == 200
            assert r.json()["choices"][0]["finish_reason"] == "length"
            assert r.json()["choices"][0]["message"]["content"] == ("Echo: " + text)[:400]
            assert r.json()["usage"]["completion_tokens"] == 400
