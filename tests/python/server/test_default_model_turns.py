"""Three-turn chat on the shipped default model (models/default: real BPE tokenizer, Qwen
chat template that trims answers) through `ds4server serve`: turn 1 ends on max_tokens,
turn 2 on a stop string. The next turn reuses the whole cut turn 1, and for turn 2 the
state from before the stop string (never the one that also holds the stop string's tokens);
only the rest is computed."""
import re

import httpx
import openai
import pytest

from conftest import ROOT, ServerProc

MODEL = ROOT / "models" / "default"


@pytest.fixture(scope="module", params=["false", "true"], ids=["ar", "speculative"])
def srv(request):
    # With speculation the stop string may begin inside an accepted draft that was fed with
    # its cycle: the engine then rebuilds the state from before it (engine publish_pre_stop).
    if not (MODEL / "model.safetensors").exists():
        pytest.skip("no models/default")
    s = ServerProc("--model", str(MODEL), "--thinking", "off", "--sampler.temperature", "0", "--threads", "2",
                   "--speculative.enabled", request.param, exe="ds4server", subcommand="serve")
    yield s
    s.stop()


def computed(url):
    m = httpx.get(url + "/metrics", timeout=10).text
    return int(float(re.search(r"\nds4_computed_prompt_tokens_total (\S+)", m).group(1)))


def test_length_and_stop_string_turns_reuse_the_matching_state(srv):
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x", timeout=120, max_retries=0)
    msgs = [{"role": "user", "content": "hello"}]
    r1 = client.chat.completions.create(model="m", messages=msgs, max_tokens=6)
    assert r1.choices[0].finish_reason == "length" and r1.usage.completion_tokens == 6
    msgs += [{"role": "assistant", "content": r1.choices[0].message.content},
             {"role": "user", "content": "Write a Python function is_prime(n)."}]
    # Turn 2 once without a stop string: it continues all of turn 1 (its 6 generated tokens).
    probe = client.chat.completions.create(model="m", messages=msgs, max_tokens=40)
    assert probe.usage.prompt_tokens_details.cached_tokens == r1.usage.prompt_tokens + r1.usage.completion_tokens
    full = probe.choices[0].message.content
    words = full.split(" ")
    assert len(words) >= 4, full
    # Stop at a word in the middle (with its leading space: it begins a token).
    stop = " " + words[len(words) // 2]
    r2 = client.chat.completions.create(model="m", messages=msgs, max_tokens=40, stop=[stop])
    assert r2.choices[0].finish_reason == "stop"
    content2 = r2.choices[0].message.content
    assert content2 == full[:full.find(stop)].strip()
    msgs += [{"role": "assistant", "content": content2}, {"role": "user", "content": "thanks"}]
    before = computed(srv.url)
    r3 = client.chat.completions.create(model="m", messages=msgs, max_tokens=8)
    cached = r3.usage.prompt_tokens_details.cached_tokens
    # More than turn 2's prompt (its answer up to the stop string is reused), less than
    # prompt + every generated token (the stop string's tokens are not).
    assert r2.usage.prompt_tokens < cached < r2.usage.prompt_tokens + r2.usage.completion_tokens, (cached, r2.usage)
    assert computed(srv.url) - before == r3.usage.prompt_tokens - cached
