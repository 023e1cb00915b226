"""The prompt-reuse scenario of ds4-eval (issue #25): an N-turn chat with thinking on where
the client sends back only the answer text (as the OpenAI and Anthropic SDKs and our web page
do), on one server process per cell. Per turn: prompt, cached and newly computed tokens, and
how many tokens lie before the previous user message ended (what must come from the cache).
With `--restart-at K` the server is restarted (on the same checkpoint dir) before turn K, so
the turn resumes from the disk checkpoints."""
import pathlib
import tempfile

import httpx

USER_TURNS = [
    "Name three prime numbers.",
    "Which of them is the largest?",
    "Write a haiku about it.",
    "Now explain the haiku in one sentence.",
    "Give the next prime after it.",
    "Is 91 prime? Answer yes or no.",
    "Why?",
    "List two even numbers.",
    "Add them.",
    "Summarize our chat in one line.",
]


def chat_once(url, messages, max_tokens, timeout, temperature, thinking):
    body = {"model": "x", "messages": messages, "max_tokens": max_tokens, "temperature": temperature}
    if thinking:
        body["reasoning_effort"] = thinking
    r = httpx.post(url + "/v1/chat/completions", json=body, timeout=timeout)
    r.raise_for_status()
    j = r.json()
    return j["choices"][0]["message"], j["usage"]


def run(make_server, chat_template, turns, max_tokens, timeout, temperature=0.0, thinking=None, restart_at=None,
        emit=None):
    """make_server(extra_args) -> a started server with .url and .stop(); chat_template: see
    history_tokens. Returns one row per turn: turn, prompt, cached, new, must_cache (the
    previous turn's prompt up to the end of its last user message: what the cache must
    give back), restored (a restart happened before this turn)."""
    ckdir = tempfile.mkdtemp(prefix="ds4-eval-reuse-")
    extra = ["--checkpoint.dir", ckdir]
    srv = make_server(extra)
    rows, msgs, must = [], [], 0
    try:
        for i in range(turns):
            restored = restart_at is not None and i + 1 == restart_at
            if restored:
                srv.stop()
                srv = make_server(extra)
            msgs.append({"role": "user", "content": USER_TURNS[i % len(USER_TURNS)]})
            msg, u = chat_once(srv.url, msgs, max_tokens, timeout, temperature, thinking)
            cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            row = {"turn": i + 1, "prompt_tokens": u["prompt_tokens"], "cached_tokens": cached,
                   "new_tokens": u["prompt_tokens"] - cached, "completion_tokens": u["completion_tokens"],
                   "must_cache": must, "restored": restored,
                   "reasoning_chars": len(msg.get("reasoning_content") or "")}
            rows.append(row)
            if emit:
                emit(row)
            # The client drops the reasoning: only the answer text goes back.
            must = history_tokens(chat_template, msgs, thinking)
            msgs.append({"role": "assistant", "content": msg.get("content") or ""})
    finally:
        srv.stop()
    return rows


def history_tokens(chat_template, msgs, thinking):
    """Tokens of the conversation rendered without the generation prompt (the assistant
    header, "<think>"): chat_template(request) -> `ds4server chat-template`'s answer."""
    req = {"messages": msgs, "add_generation_prompt": False, "thinking": thinking or "on"}
    return len(chat_template(req)["ids"])


def table(rows):
    out = ["turn  prompt  cached  new  >=must  restored"]
    for r in rows:
        out.append(f"{r['turn']:>4}  {r['prompt_tokens']:>6}  {r['cached_tokens']:>6}  {r['new_tokens']:>4}  "
                   f"{r['must_cache']:>6}  {'yes' if r['restored'] else ''}")
    tot_p = sum(r["prompt_tokens"] for r in rows)
    tot_c = sum(r["cached_tokens"] for r in rows)
    out.append(f"total {tot_p} prompt tokens, {tot_c} cached ({100 * tot_c / max(tot_p, 1):.0f} %), "
               f"{tot_p - tot_c} computed")
    return "\n".join(out)


if __name__ == "__main__":
    print(pathlib.Path(__file__).name, "is run through tools/ds4-eval --reuse-turns N")
