"""Chat sessions on disk through the real binary (issue #12): `ds4server serve` on the shipped
default model (models/default/model.gguf, Q8_0) with checkpoint.dir; a two-turn greedy chat, the server is
stopped (SIGTERM, or kill -9 once the turn-2 save is committed) and started again on the same
directory; turn 3 must report the whole previous history as cached (restored from disk, only
the new tokens computed) and answer exactly like a server that never restarted. A damaged
checkpoint is reported (log line + ds4_checkpoint_rejected_total), ignored and recomputed.
"""
import contextlib
import os
import pathlib
import re
import signal
import sys
import time

import httpx
import openai
import pytest

ROOT = pathlib.Path(os.environ.get("DS4_ROOT", pathlib.Path(__file__).resolve().parents[3]))
BIN = pathlib.Path(os.environ.get("DS4_BIN", ROOT / "build" / "debug" / "bin"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "common"))
from ds4_server_proc import ServerProcess  # noqa: E402

MODEL = ROOT / "models" / "default" / "model.gguf"  # the shipped Q8_0 default of serve
TURNS = ["hello", "tell me a story", "and another one"]
MAX_TOKENS = 16


class Server(ServerProcess):
    def __init__(self, ckpt_dir=None, *extra):
        exe = BIN / "ds4server"
        if not exe.exists():
            pytest.skip(f"{exe} not built")
        if not MODEL.exists():
            pytest.skip("models/default missing")
        cmd = [str(exe), "serve", "--model", str(MODEL), "--port", "0", "--host", "127.0.0.1",
               "--thinking", "off", "--sampler.temperature", "0", "--threads", "2",
               "--server.web_root", str(ROOT / "web")]
        if ckpt_dir is not None:
            cmd += ["--checkpoint.dir", str(ckpt_dir)]
        super().__init__(cmd + list(extra), start_s=120)
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="x", timeout=120, max_retries=0)

    def chat(self, msgs):
        r = self.client.chat.completions.create(model="default", messages=msgs, max_tokens=MAX_TOKENS)
        return r.choices[0].message.content or "", r.choices[0].finish_reason, r.usage

    def metric(self, name):
        text = httpx.get(self.url + "/metrics", timeout=10).text
        return int(float(re.search(r"\n" + name + r" (\S+)", text).group(1)))

    def stop(self, sig=signal.SIGTERM):
        return super().stop(sig, wait_s=60)


def messages(answers, upto):
    """The conversation sent for turn `upto` (0-based): earlier turns with their answers."""
    msgs = []
    for i in range(upto):
        msgs += [{"role": "user", "content": TURNS[i]}, {"role": "assistant", "content": answers[i]}]
    return msgs + [{"role": "user", "content": TURNS[upto]}]


@pytest.fixture(scope="module")
def reference():
    """Three turns on a server without checkpoints that never restarts."""
    s = Server()
    try:
        answers, out = [], []
        for t in range(3):
            content, finish, usage = s.chat(messages(answers, t))
            answers.append(content)
            out.append((content, finish, usage.completion_tokens, usage.prompt_tokens))
        assert out[2][0], "turn 3 answered nothing"
        return answers, out
    finally:
        assert s.stop() == 0


def two_turns(s, reference):
    answers, ref = reference
    for t in range(2):
        content, finish, usage = s.chat(messages(answers, t))
        assert (content, finish, usage.completion_tokens, usage.prompt_tokens) == ref[t]
    # The history the turn-2 state holds: its prompt and every generated token.
    return ref[1][3] + ref[1][2]


def wait_saves(s, n):
    deadline = time.time() + 60
    while s.metric("ds4_checkpoint_saves_total") < n:
        assert time.time() < deadline, "checkpoint saves never committed:\n" + "".join(s.lines[-20:])
        time.sleep(0.05)


@contextlib.contextmanager
def turn3(d, reference):
    """A server started again on `d` answers turn 3; the body checks it, then it must stop with 0."""
    answers, _ = reference
    s = Server(d)
    try:
        content, finish, usage = s.chat(messages(answers, 2))
        yield s, (content, finish, usage.completion_tokens, usage.prompt_tokens), usage
    except BaseException:
        s.stop()
        raise
    assert s.stop() == 0


def assert_resumed(s, got, usage, ref3, history):
    assert usage.prompt_tokens_details.cached_tokens == history, "".join(s.lines[-20:])
    assert got == ref3, (got, ref3)
    assert s.metric("ds4_checkpoint_restores_total") == 1
    assert s.metric("ds4_checkpoint_bytes_read_total") > 0
    assert s.metric("ds4_checkpoint_rejected_total") == 0
    # Only the tokens after the restored history were prefilled.
    assert s.metric("ds4_computed_prompt_tokens_total") == usage.prompt_tokens - history


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_restart_resumes_from_disk(tmp_path, reference, how):
    s = Server(tmp_path)
    history = two_turns(s, reference)
    if how == "sigterm":
        # Right after the answer: the turn-2 save may still be queued; shutdown finishes it.
        assert s.stop(signal.SIGTERM) == 0
    else:
        # Committed saves survive a crash: the process gets no chance to flush anything.
        wait_saves(s, 2)
        s.stop(signal.SIGKILL)
    with turn3(tmp_path, reference) as (s2, got, usage):
        assert_resumed(s2, got, usage, reference[1][2], history)
        wait_saves(s2, 1)  # turn 3's own state is saved too


def flip_byte(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x5A
    path.write_bytes(bytes(data))


def test_corrupted_checkpoint_is_reported_ignored_and_recomputed(tmp_path, reference):
    s = Server(tmp_path)
    history2 = two_turns(s, reference)
    wait_saves(s, 2)
    assert s.stop() == 0
    files = sorted(tmp_path.glob("*.ckpt"), key=lambda p: int(p.stem.split("-")[1]))
    assert [int(p.stem.split("-")[1]) for p in files][-1] == history2
    # Damage the turn-2 checkpoint in the middle of its state: the longest valid one left is turn 1's.
    flip_byte(files[-1])
    history1 = reference[1][0][3] + reference[1][0][2]
    with turn3(tmp_path, reference) as (s2, got, usage):
        assert got == reference[1][2], (got, reference[1][2])
        assert usage.prompt_tokens_details.cached_tokens == history1
        assert s2.metric("ds4_checkpoint_rejected_total") == 1
        assert s2.metric("ds4_checkpoint_restores_total") == 1
        assert s2.metric("ds4_computed_prompt_tokens_total") == usage.prompt_tokens - history1
        log = "".join(s2.lines)
        assert re.search(r"warn: checkpoint: .*" + re.escape(files[-1].name) + r".*checksum mismatch", log), log
        assert not files[-1].exists()  # refused files are deleted, never loaded again


def test_all_checkpoints_damaged_recomputes_everything(tmp_path, reference):
    s = Server(tmp_path)
    two_turns(s, reference)
    wait_saves(s, 2)
    s.stop(signal.SIGKILL)
    files = list(tmp_path.glob("*.ckpt"))
    assert len(files) == 2
    flip_byte(files[0])
    files[1].write_bytes(files[1].read_bytes()[:-100])  # truncated
    with turn3(tmp_path, reference) as (s2, got, usage):
        assert got == reference[1][2]
        assert usage.prompt_tokens_details.cached_tokens == 0
        assert s2.metric("ds4_checkpoint_rejected_total") == 2
        assert s2.metric("ds4_checkpoint_restores_total") == 0
        assert s2.metric("ds4_computed_prompt_tokens_total") == usage.prompt_tokens


def test_states_without_the_draft_head_are_not_resumed_with_speculation_on(tmp_path, reference):
    """A server with speculation off saves states without the MTP head's state; one with it on
    (the default) cannot speculate from them, so it recomputes instead of failing the turn."""
    s = Server(tmp_path, "--speculative.enabled", "false")
    two_turns(s, reference)
    assert s.stop() == 0
    assert len(list(tmp_path.glob("*.ckpt"))) == 2
    with turn3(tmp_path, reference) as (s2, got, usage):
        assert got == reference[1][2]
        assert usage.prompt_tokens_details.cached_tokens == 0
        assert s2.metric("ds4_checkpoint_restores_total") == 0
        assert s2.metric("ds4_checkpoint_rejected_total") == 0
