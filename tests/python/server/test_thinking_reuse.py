"""Prompt reuse with thinking on when the client sends back only the answer (issue #25), on
each family's tiny model and the shipped default model, through `ds4server serve`.

The template renders a past assistant turn without the reasoning it generated, so the
engine resumes from its snapshot at the end of the previous user message (engine/
turn_boundary.h). Per turn: cached tokens are exactly the longest reusable prefix (that
boundary, or the previous prompt where the template keeps the generation prompt's tokens, as
GLM's "<|assistant|><think>"), only the rest is computed, and the greedy answer equals a
server with no cache (a full prefill every turn). Then a restart: the next turn resumes from
the disk checkpoint at the boundary. With reasoning_content sent back, the longer match
(the whole previous turn) still wins."""
import os
import re
import subprocess
import json

import httpx
import pytest

from conftest import BIN, ROOT, ServerProc

FAMILIES = {
    "default": ("models/default", "qwen35"),
    "qwen_next": ("tests/data/qwen_next/model", "qwen35"),
    "glm5": ("tests/data/glm5/model", "glm5"),
    "deepseek_v4": ("tests/data/deepseek_v4/model", "deepseek_v4"),
}
USERS = ["hello there", "tell me a story", "now the summary", "write python code"]
MAX_TOKENS = 64


@pytest.fixture(scope="module", params=list(FAMILIES))
def model(request, tmp_path_factory):
    """(model dir, chat-template family). The tiny Qwen model ships no tokenizer: the one
    test_real_model trains (1024 ids) goes beside links to its files."""
    rel, fam = FAMILIES[request.param]
    src = ROOT / rel
    if not (src / "config.json").exists():
        pytest.skip(f"no {rel}")
    if (src / "tokenizer.json").exists():
        return src, fam
    from test_real_model import build_tokenizer
    d = tmp_path_factory.mktemp("qwen_tiny_reuse")
    for f in ["config.json", "model.safetensors"]:
        os.symlink(src / f, d / f)
    build_tokenizer(d / "tokenizer.json")
    return d, fam


def serve(model_dir, *extra):
    return ServerProc("--model", str(model_dir), "--sampler.temperature", "0", "--threads", "2",
                      "--context_size", "2048", "--speculative.enabled", "false", *extra,
                      exe="ds4server", subcommand="serve")


def render_ids(model_dir, fam, msgs, generation_prompt):
    req = {"messages": msgs, "add_generation_prompt": generation_prompt, "thinking": "on"}
    out = subprocess.run([str(BIN / "ds4server"), "chat-template", "--family", fam, "--tokenizer",
                          str(model_dir / "tokenizer.json")], input=json.dumps(req), capture_output=True,
                         text=True, check=True, timeout=60)
    return json.loads(out.stdout)["ids"]


def chat(url, msgs):
    r = httpx.post(url + "/v1/chat/completions", timeout=120,
                   json={"model": "m", "messages": msgs, "max_tokens": MAX_TOKENS})
    assert r.status_code == 200, r.text
    j = r.json()
    m = j["choices"][0]["message"]
    return {"content": m.get("content") or "", "reasoning": m.get("reasoning_content") or "",
            "finish": j["choices"][0]["finish_reason"], "usage": j["usage"]}


def metric(url, name):
    m = httpx.get(url + "/metrics", timeout=10).text
    return int(float(re.search(r"\n" + name + r" (\S+)", m).group(1)))


def expected_cached(model_dir, fam, prev_msgs, msgs):
    """The longest reusable prefix after a turn whose reasoning the client dropped: the
    previous conversation without its generation prompt, or its whole prompt when that is a
    token prefix of the new one."""
    boundary = len(render_ids(model_dir, fam, prev_msgs, False))
    prev_prompt = render_ids(model_dir, fam, prev_msgs, True)
    new_prompt = render_ids(model_dir, fam, msgs, True)
    return len(prev_prompt) if new_prompt[:len(prev_prompt)] == prev_prompt else boundary


def test_dropped_reasoning_reuses_up_to_the_previous_user_message(model, tmp_path):
    model_dir, fam = model
    ref = serve(model_dir, "--cache.mib", "0")  # nothing fits the cache: full prefill every turn
    srv = serve(model_dir, "--checkpoint.dir", str(tmp_path))
    try:
        msgs, prev_msgs = [], None
        for turn, text in enumerate(USERS):
            if turn == len(USERS) - 1:  # the last turn after a restart: from the disk checkpoints
                assert srv.stop() == 0
                srv = serve(model_dir, "--checkpoint.dir", str(tmp_path))
            msgs.append({"role": "user", "content": text})
            before = metric(srv.url, "ds4_computed_prompt_tokens_total")
            got, want = chat(srv.url, msgs), chat(ref.url, msgs)
            u = got["usage"]
            cached = u["prompt_tokens_details"]["cached_tokens"]
            assert want["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
            # Greedy: the same tokens as a full prefill.
            assert (got["reasoning"], got["content"], got["finish"], u["completion_tokens"]) == \
                (want["reasoning"], want["content"], want["finish"], want["usage"]["completion_tokens"]), turn
            assert u["prompt_tokens"] == len(render_ids(model_dir, fam, msgs, True))
            if prev_msgs is None:
                assert cached == 0
            elif turn == len(USERS) - 1:
                # Memory is gone; the disk holds the boundary state (and the unusable turn end).
                assert cached == len(render_ids(model_dir, fam, prev_msgs, False)), (turn, u)
                assert metric(srv.url, "ds4_checkpoint_restores_total") == 1
            else:
                assert cached == expected_cached(model_dir, fam, prev_msgs, msgs), (turn, u)
            assert metric(srv.url, "ds4_computed_prompt_tokens_total") - before == u["prompt_tokens"] - cached
            prev_msgs = list(msgs)
            msgs.append({"role": "assistant", "content": got["content"]})  # reasoning dropped
    finally:
        assert srv.stop() == 0, "".join(srv.lines[-20:])
        ref.stop()


def test_reasoning_sent_back_still_reuses_the_whole_turn(tmp_path):
    """A client that sends reasoning_content back (Qwen keeps it in past turns) gets the
    longer match: the whole previous turn, not just the boundary before it."""
    model_dir, fam = ROOT / "models" / "default", "qwen35"
    if not (model_dir / "config.json").exists():
        pytest.skip("no models/default")
    srv = serve(model_dir)
    try:
        msgs = [{"role": "user", "content": USERS[0]}]
        first = chat(srv.url, msgs)
        assert first["finish"] == "stop" and first["reasoning"] and first["content"]
        boundary = len(render_ids(model_dir, fam, msgs, False))
        msgs += [{"role": "assistant", "content": first["content"], "reasoning_content": first["reasoning"]},
                 {"role": "user", "content": USERS[1]}]
        u = chat(srv.url, msgs)["usage"]
        history = first["usage"]["prompt_tokens"] + first["usage"]["completion_tokens"]
        assert u["prompt_tokens_details"]["cached_tokens"] == history > boundary, (u, history, boundary)
    finally:
        assert srv.stop() == 0, "".join(srv.lines[-20:])
