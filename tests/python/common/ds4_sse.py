"""One streaming OpenAI chat turn against a running ds4server, with the arrival time of every
server-sent event: the shared client side of the benches that time turns (bench_streams.py,
serve_long_prompt.py). Suites and benches put this folder on sys.path."""
import http.client
import json
import time


def chat_stream(port, prompt, max_tokens, timeout=600):
    """Sends `prompt` as one user message (greedy, streamed, usage included) and reads the whole
    stream. Returns (t0, events): t0 the perf_counter time the request was sent, events a list of
    (perf_counter time, decoded event object) in arrival order. Raises RuntimeError on a non-200
    answer."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
                       "temperature": 0, "stream": True, "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        t0 = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:300]!r}")
        events = []
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append((time.perf_counter(), json.loads(line[6:])))
        return t0, events
    finally:
        conn.close()


def final_usage(events):
    """The usage object of the stream's last event that carries one (None without)."""
    usage = None
    for _, ev in events:
        if ev.get("usage"):
            usage = ev["usage"]
    return usage


def stream_text(events):
    """The assistant text of a chat stream: every choice delta's content, in order."""
    return "".join(ch.get("delta", {}).get("content") or "" for _, ev in events for ch in ev.get("choices", []))
