"""The probes of issue #25's server hardening, kept as tests against ds4server_testmodel:
a malformed-request corpus on every endpoint (type errors are 400s naming the field, never a
500 or a JSON library message), bad framing answered right after the headers and closed, the
401 keep-alive sequence over raw sockets (no request smuggled behind a refused body), slow
clients (a short header deadline for the test; the server stays reachable), the per-client
worker limit, the Responses state refusals, per-request seeds and the /metrics histograms.
No timing assertions: every wait is bounded by a generous socket timeout only."""
import copy
import json
import pathlib
import re
import socket
import time

import httpx
import pytest

from conftest import ServerProc

CORPUS = pathlib.Path(__file__).resolve().parents[2] / "data" / "server" / "malformed_requests.json"


@pytest.fixture(scope="module")
def srv():
    # Short deadlines and few workers so the slow-client cases end quickly and would starve
    # the server if the guard did not hold.
    s = ServerProc("--thinking", "off", "--server.max_body_bytes", "65536", "--server.http_threads", "4",
                   "--server.header_timeout_s", "1", "--server.body_timeout_s", "2")
    yield s
    assert s.stop() == 0, "".join(s.lines[-20:])


@pytest.fixture(scope="module")
def limited():
    # An explicit per-client limit applies to loopback peers too; long deadlines so held
    # connections stay held for the whole test.
    s = ServerProc("--thinking", "off", "--server.max_connections_per_client", "3",
                   "--server.body_timeout_s", "120")
    yield s
    assert s.stop() == 0, "".join(s.lines[-20:])


@pytest.fixture(scope="module")
def slow_body():
    # A body deadline just past httplib's old fixed 30 s read timeout, which answered first.
    s = ServerProc("--thinking", "off", "--server.body_timeout_s", "31")
    yield s
    assert s.stop() == 0, "".join(s.lines[-20:])


@pytest.fixture(scope="module")
def cors():
    s = ServerProc("--thinking", "off", "--server.cors_origin", "http://localhost:3000")
    yield s
    assert s.stop() == 0, "".join(s.lines[-20:])


@pytest.fixture(scope="module")
def keyed():
    s = ServerProc("--thinking", "off", "--server.api_key", "sekret-key")
    yield s
    s.stop()


def raw(port, data, timeout=15, pause_after=None):
    """Sends raw bytes; returns everything read until the server closes (or the timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if pause_after is not None:
            time.sleep(pause_after[0])
            s.sendall(pause_after[1])
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except socket.timeout:
                return out, False
            if not b:
                return out, True
            out += b


def status_of(resp: bytes):
    return int(resp.split(b" ", 2)[1]) if resp.startswith(b"HTTP/1.1 ") else None


def body_of(resp: bytes):
    return json.loads(resp.split(b"\r\n\r\n", 1)[1])


# ---- type errors: the committed corpus, then every top-level field with every wrong type --

def test_corpus_of_malformed_requests(srv):
    cases = json.loads(CORPUS.read_text())
    assert len(cases) >= 30
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        for case in cases:
            r = c.post(case["path"], json=case["body"])
            assert r.status_code == 400, (case, r.status_code, r.text)
            j = r.json()
            msg = j["error"]["message"]
            assert case["field"] in msg, (case, msg)
            assert "json.exception" not in msg and "type must be" not in msg, (case, msg)
            if case["path"].startswith("/v1/messages"):
                assert j["type"] == "error" and j["error"]["type"] == "invalid_request_error"
            else:
                assert j["error"]["type"] == "invalid_request_error"


BASES = {
    "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                             "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
    "/v1/completions": {"prompt": "hi", "max_tokens": 2},
    "/v1/messages": {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "system": "s",
                     "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}}]},
    "/v1/messages/count_tokens": {"messages": [{"role": "user", "content": "hi"}],
                                  "tools": [{"name": "f", "description": "d", "input_schema": {}}]},
    "/v1/responses": {"input": "hi", "max_output_tokens": 2, "instructions": "be brief",
                      "tools": [{"type": "function", "name": "f", "description": "d", "parameters": {}}]},
}
WRONG = [7, -1.5, "text", True, [1, "a"], {"k": {"n": 1}}]


def mutations(body):
    """Every value of the body (nested), replaced by each wrong-typed value in turn."""
    def walk(node, path):
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for k, v in items:
            yield path + [k]
            yield from walk(v, path + [k])
    for path in walk(body, []):
        for w in WRONG:
            b = copy.deepcopy(body)
            node = b
            for k in path[:-1]:
                node = node[k]
            node[path[-1]] = w
            yield path, b


def test_no_type_error_is_a_500(srv):
    seen = {200: 0, 400: 0}
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        for path, base in BASES.items():
            assert c.post(path, json=base).status_code == 200, path
            for where, body in mutations(base):
                r = c.post(path, json=body)
                assert r.status_code in (200, 400), (path, where, body, r.status_code, r.text)
                seen[r.status_code] += 1
                if r.status_code == 400:
                    msg = r.json()["error"]["message"]
                    assert "json.exception" not in msg and "[json" not in msg, (path, where, msg)
    assert seen[400] > 100, seen  # the mutations really are refused, not silently accepted


def oa_error(message, param):
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}


def an_error(message):
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


HI = [{"role": "user", "content": "hi"}]
# A black-box sweep's findings: each a 400 with the exact error, in its API's shape.
VALIDATION = [
    # A field of a nested object is named by its whole path (it was the bare key: param "role").
    ("/v1/chat/completions", {"messages": [{"role": 5, "content": "x"}]},
     oa_error("'messages[0].role' must be a string", "messages[0].role")),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
     oa_error("'messages[0].content[0].text' must be a string", "messages[0].content[0].text")),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}]},
     oa_error("'messages[1].tool_calls[0].function.arguments' must be a string",
              "messages[1].tool_calls[0].function.arguments")),
    ("/v1/responses", {"input": [{"role": "user", "content": [{"type": "input_text", "text": 5}]}]},
     oa_error("'input[0].content[0].text' must be a string", "input[0].content[0].text")),
    ("/v1/messages", {"max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
     an_error("'messages[0].content[0].text' must be a string")),
    # `model` may name anything (one model is served), but it must be a string (5 was taken).
    ("/v1/chat/completions", {"model": 5, "messages": HI}, oa_error("'model' must be a string", "model")),
    ("/v1/messages", {"model": ["m"], "max_tokens": 2, "messages": HI}, an_error("'model' must be a string")),
    # The protocols' temperature ranges (5 was sampled at 5).
    ("/v1/chat/completions", {"messages": HI, "temperature": 2.5},
     oa_error("'temperature' must be between 0 and 2", "temperature")),
    ("/v1/chat/completions", {"messages": HI, "temperature": -0.5},
     oa_error("'temperature' must be between 0 and 2", "temperature")),
    ("/v1/completions", {"prompt": "hi", "temperature": 3}, oa_error("'temperature' must be between 0 and 2", "temperature")),
    ("/v1/messages", {"max_tokens": 2, "messages": HI, "temperature": 1.5}, an_error("'temperature' must be between 0 and 1")),
    # The sampler's ranges name the request's field (the engine's refusal named none).
    ("/v1/chat/completions", {"messages": HI, "top_p": 1.5},
     oa_error("invalid top_p = 1.500000: must be in (0, 1]", "top_p")),
    ("/v1/completions", {"prompt": "hi", "top_p": 0}, oa_error("invalid top_p = 0.000000: must be in (0, 1]", "top_p")),
    ("/v1/chat/completions", {"messages": HI, "temperature": 1e-9},
     oa_error("invalid temperature = 0.000000: must be 0 (greedy) or at least 1e-6", "temperature")),
    ("/v1/messages", {"max_tokens": 2, "messages": HI, "top_p": 2}, an_error("invalid top_p = 2.000000: must be in (0, 1]")),
    # Unknown enumerated values (they were taken as "on").
    ("/v1/messages", {"max_tokens": 2, "messages": HI, "thinking": {"type": "disable"}},
     an_error("thinking.type 'disable' is not one of enabled, disabled, adaptive")),
    ("/v1/responses", {"input": "hi", "reasoning": {"effort": "ultra"}},
     oa_error("unknown reasoning.effort 'ultra'", "reasoning.effort")),
]


@pytest.mark.parametrize("path,body,error", VALIDATION)
def test_validation_errors_are_exact(srv, path, body, error):
    r = httpx.post(srv.url + path, json=body, timeout=30)
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json() == error
    assert httpx.post(srv.url + "/v1/chat/completions", json={"messages": HI, "max_tokens": 2}, timeout=30).status_code == 200


def test_temperature_range_ends_and_any_model_name_are_accepted(srv):
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        for t in (0, 2):
            assert c.post("/v1/chat/completions", json={"model": "no-such-model", "messages": HI, "max_tokens": 2,
                                                         "temperature": t}).status_code == 200
        assert c.post("/v1/messages", json={"model": "claude-x", "max_tokens": 2, "messages": HI,
                                            "temperature": 1, "thinking": {"type": "adaptive"}}).status_code == 200


def test_anthropic_empty_content_list_is_an_empty_turn(srv):
    """content [] gave no message at all: alone, the template's internal error ("qwen35
    template: no messages", a 400 naming no field); between turns, the turn vanished. It is
    an empty turn now, as content "" is."""
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        def count(content):
            msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": content}]
            r = c.post("/v1/messages/count_tokens", json={"messages": msgs})
            assert r.status_code == 200, r.text
            return r.json()["input_tokens"]
        assert count([]) == count("")
        r = c.post("/v1/messages", json={"max_tokens": 2, "messages": [{"role": "user", "content": []}]})
        assert r.status_code == 200, r.text
        assert r.json()["type"] == "message"


# ---- framing: answered right after the headers, then the connection closes -----------------

FRAMING = [
    (b"Content-Length: 99999999999\r\n", 413),
    (b"Content-Length: -1\r\n", 400),
    (b"Content-Length: 12abc\r\n", 400),
    (b"Content-Length: 5\r\nContent-Length: 6\r\n", 400),
    (b"Transfer-Encoding: gzip\r\n", 501),  # a coding the server does not understand (RFC 9112 §6.1)
    (b"Content-Length: 2\r\nExpect: teapot\r\n", 417),
    (b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400),
    (b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400),
    (b"Transfer-Encoding: chunked\r\n", 411),  # a negative chunk size or no last chunk never gets read
    (b"", 411),  # a POST with neither: httplib would read until the client closes
]


@pytest.mark.parametrize("headers,status", FRAMING)
def test_bad_framing_is_answered_and_closed(srv, headers, status):
    req = b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\n" + headers + b"\r\n"
    # The declared body never comes: the answer may not wait for it.
    out, closed = raw(srv.port, req)
    assert closed, out
    assert status_of(out) == status, out
    assert b"Connection: close" in out
    assert body_of(out)["error"]["type"] == "invalid_request_error"


# ---- statuses of RFC 9110: 405 + Allow, 501, 505, 431, 414 --------------------------------

def head_of(resp: bytes):
    """The response's header fields, names lowercased."""
    lines = resp.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")[1:]
    return {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines)}


@pytest.mark.parametrize("method,path,allow", [
    ("GET", "/v1/chat/completions", "POST, OPTIONS"),
    ("HEAD", "/v1/responses", "POST, OPTIONS"),
    ("POST", "/v1/models", "GET, HEAD, OPTIONS"),
    ("POST", "/health", "GET, HEAD, OPTIONS"),
    ("POST", "/v1/responses/resp_1", "GET, HEAD, OPTIONS"),
])
def test_a_known_path_with_another_method_is_405_with_allow(srv, method, path, allow):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=15) as s:
        body = b"" if method in ("GET", "HEAD") else b"Content-Length: 0\r\n"
        s.sendall(f"{method} {path} HTTP/1.1\r\nHost: t\r\n".encode() + body + b"\r\n")
        first = read_one_response(s) if method != "HEAD" else s.recv(65536)
        assert status_of(first) == 405, first
        assert head_of(first)["allow"] == allow
        if method != "HEAD":
            assert body_of(first) == {"error": {"message": f"method {method} is not allowed on {path} (allowed: {allow})",
                                                "type": "invalid_request_error", "param": None, "code": None}}
        # Nothing was left unread: the connection serves the next request.
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status_of(read_one_response(s)) == 200


def test_405_on_anthropic_paths_and_options(srv):
    r = httpx.get(srv.url + "/v1/messages", timeout=10)
    assert r.status_code == 405 and r.headers["allow"] == "POST, OPTIONS"
    assert r.json() == {"type": "error", "error": {"type": "invalid_request_error",
                                                   "message": "method GET is not allowed on /v1/messages (allowed: POST, OPTIONS)"}}
    # A body that was declared is never read: answered, then the connection closes.
    inner = b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n"
    out, closed = raw(srv.port, b"POST /v1/models HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(inner) + inner)
    assert closed and out.count(b"HTTP/1.1 ") == 1 and status_of(out) == 405, out
    assert b"Connection: close" in out
    out, closed = raw(srv.port, b"PUT /v1/messages HTTP/1.1\r\nHost: t\r\nContent-Length: 30\r\n\r\n")
    assert closed and out.count(b"HTTP/1.1 ") == 1 and status_of(out) == 501, out
    assert b"Connection: close" in out
    assert anthropic_error(out, "invalid_request_error") == "method 'PUT' is not implemented by this server (GET, HEAD, POST, OPTIONS)"
    # OPTIONS on a known path (no CORS configured): 204 with Allow; unknown paths stay 404.
    r = httpx.options(srv.url + "/v1/messages", timeout=10)
    assert r.status_code == 204 and r.headers["allow"] == "POST, OPTIONS"
    assert httpx.options(srv.url + "/v1/nope", timeout=10).status_code == 404
    assert httpx.get(srv.url + "/v1/nope", timeout=10).status_code == 404
    assert httpx.post(srv.url + "/v1/nope", json={}, timeout=10).status_code == 404


@pytest.mark.parametrize("line,status,message", [
    (b"PATCH /v1/chat/completions HTTP/1.1", 501, "method 'PATCH' is not implemented by this server (GET, HEAD, POST, OPTIONS)"),
    (b"DELETE /v1/models HTTP/1.1", 501, "method 'DELETE' is not implemented by this server (GET, HEAD, POST, OPTIONS)"),
    (b"PROPFIND / HTTP/1.1", 501, "method 'PROPFIND' is not implemented by this server (GET, HEAD, POST, OPTIONS)"),
    (b"get /health HTTP/1.1", 501, "method 'get' is not implemented by this server (GET, HEAD, POST, OPTIONS)"),
    (b"GET /health HTTP/2.0", 505, "HTTP version 'HTTP/2.0' is not supported (HTTP/1.0 and HTTP/1.1)"),
    (b"GET /health", 400, "malformed request (request line, headers or body)"),
])
def test_request_lines_httplib_refuses(srv, line, status, message):
    out, closed = raw(srv.port, line + b"\r\nHost: t\r\n\r\n")
    assert closed and status_of(out) == status, out
    assert body_of(out)["error"]["message"] == message


def test_unimplemented_method_on_an_anthropic_path_is_501_in_its_shape(srv):
    out, closed = raw(srv.port, b"PROPFIND /v1/messages HTTP/1.1\r\nHost: t\r\n\r\n")
    assert closed and status_of(out) == 501, out
    # A fault in the request's format, not the server's: invalid_request_error, as Anthropic
    # types "an issue with the format or content of your request" (api_error is a server fault).
    assert anthropic_error(out, "invalid_request_error") == \
        "method 'PROPFIND' is not implemented by this server (GET, HEAD, POST, OPTIONS)"


@pytest.mark.parametrize("request_head,status", [
    (b"GET /v1/messages HTTP/2.0\r\nHost: t\r\n\r\n", 505),
    (b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
])
def test_505_and_501_on_anthropic_paths_are_invalid_request_errors(srv, request_head, status):
    out, closed = raw(srv.port, request_head)
    assert closed and status_of(out) == status, out
    anthropic_error(out, "invalid_request_error")


@pytest.mark.parametrize("headers,status,message", [
    (b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(20)), 431,
     "request header section over 16384 bytes, or a header line over 8192"),
    (b"X-Long: " + b"a" * 9000 + b"\r\n", 431, "request header section over 16384 bytes, or a header line over 8192"),
])
def test_oversized_header_sections_are_431(srv, headers, status, message):
    out, closed = raw(srv.port, b"POST /v1/messages HTTP/1.1\r\nHost: t\r\n" + headers + b"\r\n")
    assert closed and status_of(out) == status, out
    assert anthropic_error(out, "invalid_request_error") == message


def test_a_request_line_without_end_is_414(srv):
    out, closed = raw(srv.port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: t\r\n\r\n")
    assert closed and status_of(out) == 414, out
    assert body_of(out)["error"] == {"message": "request line over 16384 bytes", "type": "invalid_request_error",
                                     "param": None, "code": "uri_too_long"}


def test_get_with_a_body_is_not_a_second_request(srv):
    inner = b"GET /v1/models HTTP/1.1\r\nHost: t\r\n\r\n"
    out, closed = raw(srv.port, b"GET /health HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(inner) + inner)
    assert closed and out.count(b"HTTP/1.1 ") == 1 and status_of(out) == 400, out
    assert "carries no body" in body_of(out)["error"]["message"]


def test_body_deadline_closes_a_short_body(srv):
    out, closed = raw(srv.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 50\r\n\r\n{\"mess")
    assert closed and status_of(out) == 408, out
    assert "body not received" in body_of(out)["error"]["message"]


# ---- the guard's own answers on Anthropic routes: Anthropic's error shape ------------------

def anthropic_error(resp: bytes, etype: str):
    """The body of a raw response in Anthropic's error shape, checked field by field."""
    j = body_of(resp)
    assert set(j) == {"type", "error"} and j["type"] == "error", j
    assert set(j["error"]) == {"type", "message"} and j["error"]["type"] == etype, j
    return j["error"]["message"]


def test_guard_408s_use_the_anthropic_shape_on_messages(srv):
    # Headers that never complete (the guard answers from the peeked request line) ...
    out, closed = raw(srv.port, b"POST /v1/messages HTTP/1.1\r\nHost: t\r\n")
    assert closed and status_of(out) == 408, out
    assert anthropic_error(out, "invalid_request_error") == "request headers not received within 1 s"
    # ... and a body that never completes (the path httplib parsed).
    out, closed = raw(srv.port, b"POST /v1/messages/count_tokens HTTP/1.1\r\nHost: t\r\nContent-Length: 50\r\n\r\n{")
    assert closed and status_of(out) == 408, out
    assert anthropic_error(out, "invalid_request_error") == "request body not received within 2 s"
    # The OpenAI routes keep theirs.
    out, closed = raw(srv.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\n")
    assert closed and status_of(out) == 408, out
    assert body_of(out) == {"error": {"message": "request headers not received within 1 s",
                                      "type": "invalid_request_error", "param": None, "code": "request_timeout"}}


def test_a_stalled_body_is_a_408_not_httplibs_400(slow_body):
    # Headers with a Content-Length, then nothing: the guard's body deadline answers (a 408 in the
    # route's shape), never httplib's read timeout (a bare 400). Waits the 31 s deadline once.
    out, closed = raw(slow_body.port, b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nContent-Length: 40\r\n\r\n{\"max",
                      timeout=90)
    assert closed and status_of(out) == 408, out
    assert anthropic_error(out, "invalid_request_error") == "request body not received within 31 s"


# ---- control characters in header fields: a 400 naming the header, then the close -----------

@pytest.mark.parametrize("value,code", [(b"ab\x00cd", "0x00"), (b"ab%00cd", "0x00"), (b"a\rb", "0x0d"),
                                        (b"a\x01b", "0x01"), (b"a\x7f", "0x7f")])
def test_control_characters_in_header_values_are_400(srv, value, code):
    out, closed = raw(srv.port, b"GET /v1/models HTTP/1.1\r\nHost: t\r\nX-Trace: " + value + b"\r\n\r\n")
    assert closed and status_of(out) == 400, out
    assert b"Connection: close" in out
    assert body_of(out) == {"error": {"message": f"header 'X-Trace' contains a control character ({code})",
                                      "type": "invalid_request_error", "param": None, "code": None}}


def test_header_control_characters_on_anthropic_paths_and_htab(srv):
    body = b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
    out, closed = raw(srv.port, b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nanthropic-version: 2023\x0006-01\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert closed and status_of(out) == 400, out
    assert anthropic_error(out, "invalid_request_error") == "header 'anthropic-version' contains a control character (0x00)"
    r = httpx.post(srv.url + "/v1/messages", content=body, headers={"X-Note": "a\tb", "Content-Type": "application/json"},
                   timeout=30)
    assert r.status_code == 200, r.text


# ---- CORS: the preflight allows what the official SDKs send ---------------------------------

# What the OpenAI and Anthropic SDKs (Python / JS, dangerouslyAllowBrowser) send besides the basics.
SDK_HEADERS = ["authorization", "content-type", "x-api-key", "anthropic-version", "anthropic-beta",
               "anthropic-dangerous-direct-browser-access", "x-stainless-arch", "x-stainless-lang", "x-stainless-os",
               "x-stainless-package-version", "x-stainless-retry-count", "x-stainless-runtime",
               "x-stainless-runtime-version", "x-stainless-timeout", "x-stainless-async", "x-stainless-helper-method",
               "openai-organization", "openai-project"]


def preflight(srv, path, request_headers=None):
    h = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST"}
    if request_headers is not None:
        h["Access-Control-Request-Headers"] = request_headers
    return httpx.options(srv.url + path, headers=h, timeout=10)


def test_cors_preflight_echoes_the_requested_headers(cors):
    asked = "content-type,x-stainless-os,x-stainless-lang,anthropic-version,anthropic-beta,x-api-key,authorization"
    for path in ("/v1/messages", "/v1/chat/completions", "/v1/nope"):
        r = preflight(cors, path, asked)
        assert r.status_code == 204, (path, r.text)
        assert r.headers["access-control-allow-origin"] == "http://localhost:3000"
        assert r.headers["access-control-allow-methods"] == "GET, POST, OPTIONS"
        assert r.headers["access-control-allow-headers"] == asked
        assert r.headers["access-control-max-age"] == "600"
        assert r.headers["vary"] == "Access-Control-Request-Headers"


def test_cors_preflight_lists_every_sdk_header_when_it_cannot_echo(cors):
    for asked in (None, "x-a(b), content-type", "x" * 5000):
        r = preflight(cors, "/v1/messages", asked)
        assert r.status_code == 204
        allowed = [h.strip() for h in r.headers["access-control-allow-headers"].split(",")]
        missing = [h for h in SDK_HEADERS if h not in allowed]
        assert not missing, (asked, missing)
        assert "x-a(b)" not in r.headers["access-control-allow-headers"]
    # The actual request then carries the origin header too.
    r = httpx.get(cors.url + "/health", headers={"Origin": "http://localhost:3000"}, timeout=10)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "http://localhost:3000"


# ---- HTTP/1.0: no chunked coding, the stream ends with the connection -----------------------

STREAMS = [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True},
     "data: [DONE]\n\n"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 8, "stream": True}, "data: [DONE]\n\n"),
    ("/v1/messages", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": True},
     'event: message_stop\ndata: {"type":"message_stop"}\n\n'),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 64, "stream": True}, None),
]


@pytest.mark.parametrize("path,body,last", STREAMS)
@pytest.mark.parametrize("connection", [b"", b"Connection: Keep-Alive\r\n"])
def test_http10_streams_are_unchunked_and_closed(srv, path, body, last, connection):
    data = json.dumps(body).encode()
    out, closed = raw(srv.port, b"POST %s HTTP/1.0\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n"
                      % (path.encode(), connection, len(data)) + data)
    assert closed and status_of(out) == 200, out
    head, stream = out.split(b"\r\n\r\n", 1)
    h = head_of(out)
    assert "transfer-encoding" not in h and "content-length" not in h, head
    assert h["connection"] == "close" and h["content-type"] == "text/event-stream"
    text = stream.decode()
    assert text.startswith(("data: {", "event: ")), text[:80]  # an event, not a chunk size
    if last:
        assert text.endswith(last), text[-200:]
    else:
        assert text.rstrip("\n").split("\n")[-2] == "event: response.completed", text[-300:]


def test_http11_streams_stay_chunked(srv):
    data = json.dumps(STREAMS[0][1]).encode()
    out, closed = raw(srv.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(data) + data)
    assert closed and status_of(out) == 200 and head_of(out)["transfer-encoding"] == "chunked", out[:300]
    assert out.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"), out[-80:]


# ---- auth: a refused body is never parsed as the next request -------------------------------

def test_refused_body_is_not_a_second_request(keyed):
    inner = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}).encode()
    smuggled = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer sekret-key\r\n"
                b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(inner) + inner)
    outer = b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(smuggled)
    # The body follows the headers in a second write, as Python's http.client sends it.
    out, closed = raw(keyed.port, outer, pause_after=(0.2, smuggled))
    assert closed
    assert out.count(b"HTTP/1.1 ") == 1, out
    assert status_of(out) == 401 and b"Connection: close" in out


def test_keepalive_clients_after_401_get_no_spurious_errors(keyed):
    body = {"messages": [{"role": "user", "content": "x" * 3000}], "max_tokens": 2}
    counts = {}
    with httpx.Client(base_url=keyed.url, timeout=30) as c:
        for i in range(40):
            key = "sekret-key" if i % 2 else "wrong"
            r = c.post("/v1/chat/completions", json=body, headers={"Authorization": "Bearer " + key})
            counts[(key, r.status_code)] = counts.get((key, r.status_code), 0) + 1
    assert counts == {("wrong", 401): 20, ("sekret-key", 200): 20}, counts


def read_one_response(s):
    """One whole response (headers + Content-Length body) from a socket left open."""
    def more():
        b = s.recv(65536)
        assert b, "the server closed the connection before the whole response"
        return b
    data = b""
    while b"\r\n\r\n" not in data:
        data += more()
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(next(l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")))
    while len(body) < length:
        body += more()
    return head + b"\r\n\r\n" + body


def test_401_without_body_keeps_the_connection(keyed):
    with socket.create_connection(("127.0.0.1", keyed.port), timeout=15) as s:
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: t\r\n\r\n")
        first = read_one_response(s)
        assert status_of(first) == 401 and b"Connection: close" not in first
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        rest = b""
        while b := s.recv(65536):
            rest += b
    assert status_of(rest) == 200, rest


# ---- slow clients ------------------------------------------------------------------------

def test_slow_header_clients_do_not_starve_the_server(srv):
    # Twice as many slow connections as HTTP threads, each sending a header line now and then.
    slow = [socket.create_connection(("127.0.0.1", srv.port), timeout=15) for _ in range(8)]
    try:
        for s in slow:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n")
        for _ in range(2):
            r = httpx.get(srv.url + "/health", timeout=10)  # would wait forever with all threads held
            assert r.status_code == 200
            for s in slow:
                try:
                    s.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass  # already past its deadline (a slow machine)
            time.sleep(0.2)
        answered = 0
        for s in slow:  # the header deadline (1 s here) ends each of them with a 408
            out = b""
            try:
                while b := s.recv(65536):
                    out += b
            except ConnectionResetError:
                pass  # a late header line of ours crossed the close: the 408 may be lost, the close is not
            if out:
                assert status_of(out) == 408, out
                answered += 1
        assert answered >= 1
    finally:
        for s in slow:
            s.close()
    metrics = httpx.get(srv.url + "/metrics", timeout=10).text
    line = next(l for l in metrics.splitlines() if l.startswith("ds4_http_header_timeouts_total"))
    assert float(line.split()[1]) >= 8


def parked_connections(srv):
    # Connection: close, or this request's own connection would wait for a next request on
    # the server (parked) until the server sees the client's close: a slot the next test's 16
    # would then miss (one 408 short under a loaded CI run).
    metrics = httpx.get(srv.url + "/metrics", timeout=10, headers={"Connection": "close"}).text
    line = next(l for l in metrics.splitlines() if l.startswith("ds4_http_connections_parked"))
    return float(line.split()[1])


def test_waiting_connections_are_bounded(srv):
    # 4 workers: at most 16 connections may wait for their headers (each costs fds); beyond,
    # a 503 at once. The server stays reachable once they are gone. A connection of an earlier
    # test that the server has not yet timed out still holds a slot: wait until none is parked
    # (a loaded machine, e.g. the ASan CI run, can be late to close them), so the 16 are ours.
    deadline = time.time() + 15
    while parked_connections(srv) > 0 and time.time() < deadline:
        time.sleep(0.1)
    assert parked_connections(srv) == 0
    idle = [socket.create_connection(("127.0.0.1", srv.port), timeout=15) for _ in range(20)]
    try:
        statuses = []
        for s in idle:
            out = b""
            while b := s.recv(65536):
                out += b
            statuses.append(status_of(out))
        assert sorted(statuses) == [408] * 16 + [503] * 4, statuses
    finally:
        for s in idle:
            s.close()
    deadline = time.time() + 15
    while httpx.get(srv.url + "/health", timeout=10).status_code != 200 and time.time() < deadline:
        time.sleep(0.2)
    assert httpx.get(srv.url + "/health", timeout=10).status_code == 200


def test_refusals_at_accept_use_the_shape_of_their_request_line(srv):
    # As above, 16 idle connections fill this peer's open limit (16 for 4 workers); the next four
    # are refused at accept, and their 503 waits for their request line: two Anthropic, two OpenAI.
    deadline = time.time() + 15
    while parked_connections(srv) > 0 and time.time() < deadline:
        time.sleep(0.1)
    assert parked_connections(srv) == 0
    idle = [socket.create_connection(("127.0.0.1", srv.port), timeout=15) for _ in range(16)]
    lines = [b"POST /v1/messages HTTP/1.1\r\n", b"GET /v1/messages/count_tokens?x=1 HTTP/1.1\r\n",
             b"POST /v1/chat/completions HTTP/1.1\r\n", b"GET /v1/models HTTP/1.1\r\n"]
    refused = [socket.create_connection(("127.0.0.1", srv.port), timeout=15) for _ in lines]
    try:
        for s, line in zip(refused, lines):
            s.sendall(line)
        outs = []
        for s in refused:
            out = b""
            while b := s.recv(65536):
                out += b
            outs.append(out)
        assert [status_of(o) for o in outs] == [503] * 4, outs
        for o in outs[:2]:
            assert anthropic_error(o, "overloaded_error") == "too many open connections from this client"
        for o in outs[2:]:
            assert body_of(o) == {"error": {"message": "too many open connections from this client",
                                            "type": "invalid_request_error", "param": None,
                                            "code": "too_many_connections"}}
    finally:
        for s in idle + refused:
            s.close()


def test_per_client_worker_limit(limited):
    srv = limited
    # Three connections hold a worker each (headers in, body pending); the fourth gets a 503.
    held = [socket.create_connection(("127.0.0.1", srv.port), timeout=15) for _ in range(3)]
    try:
        for s in held:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{")
        time.sleep(0.5)  # let the guard hand them to workers
        out, closed = raw(srv.port, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        assert closed and status_of(out) == 503, out
        assert "too many concurrent requests" in body_of(out)["error"]["message"]
        out, closed = raw(srv.port, b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}")
        assert closed and status_of(out) == 503, out
        assert anthropic_error(out, "overloaded_error") == "too many concurrent requests from this client (limit 3)"
    finally:
        for s in held:
            s.close()
    # Their slots come back once they are gone.
    deadline = time.time() + 15
    while time.time() < deadline:
        if httpx.get(srv.url + "/health", timeout=10).status_code == 200:
            break
        time.sleep(0.2)
    assert httpx.get(srv.url + "/health", timeout=10).status_code == 200


# ---- Responses state, seeds, metrics --------------------------------------------------------

def test_responses_state_is_refused_by_name(srv):
    r = httpx.post(srv.url + "/v1/responses", json={"input": "hi", "previous_response_id": "resp_123"}, timeout=30)
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "previous_response_id"
    assert "does not store responses" in r.json()["error"]["message"]
    r = httpx.get(srv.url + "/v1/responses/resp_123", timeout=30)
    assert r.status_code == 404
    assert "resp_123" in r.json()["error"]["message"] and "does not store" in r.json()["error"]["message"]
    r = httpx.post(srv.url + "/v1/responses", json={"input": "hi", "max_output_tokens": 2}, timeout=30)
    assert r.status_code == 200 and r.json()["store"] is False


def test_fresh_seed_per_request_reproduces(srv):
    body = {"messages": [{"role": "user", "content": "tell me"}], "max_tokens": 12, "temperature": 1.5}
    with httpx.Client(base_url=srv.url, timeout=30) as c:
        a = c.post("/v1/chat/completions", json=body).json()
        b = c.post("/v1/chat/completions", json=body).json()
        assert a["usage"]["seed"] != b["usage"]["seed"]
        again = c.post("/v1/chat/completions", json={**body, "seed": a["usage"]["seed"]}).json()
        assert again["usage"]["seed"] == a["usage"]["seed"]
        assert again["choices"][0]["message"]["content"] == a["choices"][0]["message"]["content"]
        fixed = c.post("/v1/chat/completions", json={**body, "seed": 7}).json()
        assert fixed["usage"]["seed"] == 7
        # The whole unsigned 64-bit range is a seed (it wrapped to a negative int64 and was refused).
        top = c.post("/v1/chat/completions", json={**body, "seed": 2**64 - 1}).json()
        assert top["usage"]["seed"] == 2**64 - 1, top


def test_metrics_histograms(srv):
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
    httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=30).raise_for_status()
    text = httpx.get(srv.url + "/metrics", timeout=10).text
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            values[k] = float(v)
    for h in ["ds4_ttft_seconds", "ds4_time_per_output_token_seconds", "ds4_prefill_tokens_per_second",
              "ds4_queue_wait_seconds"]:
        assert f"# TYPE {h} histogram" in text
        assert values[f"{h}_count"] >= 1, h
        assert values[f'{h}_bucket{{le="+Inf"}}'] == values[f"{h}_count"]
    family = httpx.get(srv.url + "/health", timeout=10).json()["family"]
    for c in ["drafted", "accepted", "bonus"]:
        assert f'ds4_speculative_{c}_tokens_total{{family="{family}"}}' in values


def test_metrics_exposition_is_valid_prometheus_text(srv):
    # Prometheus refuses a whole scrape with a second TYPE for a name (the prefill rate was a
    # gauge and a histogram under one name), a sample of an undeclared family, or a repeated
    # sample.
    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
    httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=30).raise_for_status()
    text = httpx.get(srv.url + "/metrics", timeout=10).text
    types, helps, samples = {}, set(), set()
    sample_re = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"(,[a-zA-Z_][a-zA-Z0-9_]*="[^"]*")*\})? (\S+)$')
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name, kind = line[len("# TYPE "):].split(" ", 1)
            assert name not in types, f"second TYPE for {name}"
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            types[name] = kind
        elif line.startswith("# HELP "):
            name = line[len("# HELP "):].split(" ", 1)[0]
            assert name not in helps, f"second HELP for {name}"
            helps.add(name)
        elif line and not line.startswith("#"):
            m = sample_re.match(line)
            assert m, f"not a sample line: {line!r}"
            name = m.group(1)
            family = name
            for suffix in ("_bucket", "_sum", "_count"):
                base = name[: -len(suffix)]
                if name.endswith(suffix) and types.get(base) == "histogram":
                    family = base
            assert family in types, f"sample of an undeclared family: {line!r}"
            float(m.group(4))
            key = name + (m.group(2) or "")
            assert key not in samples, f"repeated sample {key}"
            samples.add(key)
    assert types.get("ds4_prefill_tokens_per_second") == "histogram"
    assert types.get("ds4_overall_prefill_tokens_per_second") == "gauge"


# ---- Expect: 100-continue ----------------------------------------------------------------

@pytest.mark.parametrize("request_head,status", [
    # over --server.max_body_bytes 65536
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n", 413),
    # no route takes the path
    (b"POST /v1/nope HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n", 404),
    # a GET-only path
    (b"POST /v1/models HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n", 405),
    # a method the server does not implement
    (b"PUT /v1/messages HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n", 501),
    # another expectation beside 100-continue (before: 100 Continue, then the 417 after the body)
    (b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\nExpect: 100-continue\r\n"
     b"Expect: x-other\r\n", 417),
])
def test_expect_100_continue_on_a_refused_request_gets_the_final_status(srv, request_head, status):
    # The body is never sent: the client waits for 100 Continue or the final answer.
    out, closed = raw(srv.port, request_head + b"Expect: 100-continue\r\n\r\n")
    assert closed and status_of(out) == status, out
    assert b"100 Continue" not in out, out


def test_expect_100_continue_with_a_wrong_key_gets_the_401(keyed):
    out, closed = raw(keyed.port, b"POST /v1/messages HTTP/1.1\r\nHost: t\r\nx-api-key: wrong\r\n"
                                  b"Content-Length: 10\r\nExpect: 100-continue\r\n\r\n")
    assert closed and status_of(out) == 401, out
    assert anthropic_error(out, "authentication_error") == "invalid or missing API key"


def test_expect_100_continue_on_a_good_request_continues(srv):
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}).encode()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=15) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(body))
        interim = b""
        while b"\r\n\r\n" not in interim:
            interim += s.recv(1)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n", interim
        s.sendall(body)
        final = read_one_response(s)
    assert status_of(final) == 200, final
    assert body_of(final)["choices"][0]["message"]["content"] == "Echo: hi. Done."


# ---- keep-alive: pipelined requests, later requests' header blocks -----------------------

def read_responses(s, n):
    """n whole responses (Content-Length bodies) read in order from a socket left open; one
    recv may hold the end of one and the start of the next."""
    data, out = b"", []
    while len(out) < n:
        while b"\r\n\r\n" not in data:
            b = s.recv(65536)
            assert b, f"the server closed the connection after {len(out)} responses: {out}"
            data += b
        head, rest = data.split(b"\r\n\r\n", 1)
        length = int(next(l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")))
        while len(rest) < length:
            b = s.recv(65536)
            assert b, "the server closed the connection mid-response"
            rest += b
        out.append(head + b"\r\n\r\n" + rest[:length])
        data = rest[length:]
    return out


def test_pipelined_requests_are_all_answered_in_order(srv):
    chat = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20}).encode()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=15) as s:
        # Three requests in one write, the second with a body: each is answered, in order.
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n"
                  b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s"
                  b"GET /v1/models HTTP/1.1\r\nHost: t\r\n\r\n" % (len(chat), chat))
        health, answer, models = read_responses(s, 3)
    assert status_of(health) == 200 and body_of(health)["status"] == "ok", health
    assert status_of(answer) == 200 and body_of(answer)["choices"][0]["message"]["content"] == "Echo: hi. Done.", answer
    assert status_of(models) == 200 and body_of(models)["object"] == "list", models


@pytest.mark.parametrize("headers", [
    b"".join(b"X-Pad-%d: %s\r\n" % (i, b"a" * 1000) for i in range(20)),  # the section over 16 KiB
    b"X-Long: " + b"a" * 9000 + b"\r\n",                                     # one line over 8 KiB
])
def test_oversized_header_sections_of_later_requests_are_431(srv, headers):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=15) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status_of(read_one_response(s)) == 200
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: t\r\n" + headers + b"\r\n")
        out = b""
        while b := s.recv(65536):  # then the server closes
            out += b
    assert status_of(out) == 431 and b"Connection: close" in out, out
    assert anthropic_error(out, "invalid_request_error") == \
        "request header section over 16384 bytes, or a header line over 8192"


def test_a_later_request_line_without_end_is_414(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=15) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        assert status_of(read_one_response(s)) == 200
        s.sendall(b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: t\r\n\r\n")
        out = b""
        while b := s.recv(65536):
            out += b
    assert status_of(out) == 414, out
    assert body_of(out)["error"]["code"] == "uri_too_long"


def test_a_pipelined_request_whose_headers_never_complete_meets_the_header_deadline(srv):
    # The second request's first bytes came with the first request: the header deadline (1 s
    # here) still ends the connection, not httplib's backstop read timeout (the 15 s socket
    # timeout here would see that as an open connection).
    out, closed = raw(srv.port, b"GET /health HTTP/1.1\r\nHost: t\r\n\r\nGET /health HTTP/1.1\r\nHo")
    assert closed and out.count(b"HTTP/1.1 ") == 1 and status_of(out) == 200, out


@pytest.mark.parametrize("first", [True, False])
def test_a_header_block_ended_by_bare_lf_lf_still_counts_toward_the_limit(srv, first):
    # httplib reads past a bare LF LF (it skips lines that do not end in CRLF): the header lines
    # after it count toward the 16 KiB section, on a first and on a later request (before, the
    # guard took LF LF as the end and httplib stored every following line until the deadline).
    flood = b"GET /health HTTP/1.1\r\nHost: t\r\n\n" + b"".join(b"x-%d: y\r\n" % i for i in range(2500))
    with socket.create_connection(("127.0.0.1", srv.port), timeout=15) as s:
        if not first:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
            assert status_of(read_one_response(s)) == 200
        s.sendall(flood)
        out = b""
        while b := s.recv(65536):
            out += b
    assert status_of(out) == 431 and b"Connection: close" in out, out[:200]


@pytest.fixture(scope="module")
def slow_tokens():
    # 150 ms per forwarded token: a streamed answer lasts longer than the 1 s header deadline.
    s = ServerProc("--thinking", "off", "--server.header_timeout_s", "1", "--test-delay-us", "150000")
    yield s
    assert s.stop() == 0, "".join(s.lines[-20:])


def test_a_request_pipelined_behind_a_long_stream_waits_for_it(slow_tokens):
    # The second request arrives while the first one's SSE stream runs (longer than the 1 s header
    # deadline): the stream ends whole, then the second request is answered (before, bytes after
    # the response began started a header deadline that cut the stream).
    chat = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, "stream": True}).encode()
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", slow_tokens.port), timeout=30) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(chat), chat))
        time.sleep(0.3)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        out = b""
        while b := s.recv(65536):
            out += b
    assert time.monotonic() - t0 > 1.5, "the stream must outlast the header deadline for this test to mean anything"
    stream, _, rest = out.partition(b"data: [DONE]\n\n\r\n0\r\n\r\n")
    assert rest, out[-300:]  # the stream ended whole (chunked: its last chunk, then the terminator)
    assert b"Echo: " in stream or b'"content"' in stream, stream[:300]
    assert status_of(rest) == 200 and body_of(rest)["status"] == "ok", rest
