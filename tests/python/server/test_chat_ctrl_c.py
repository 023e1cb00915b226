"""`ds4server chat` in a pseudo-terminal (issue #25): a Ctrl-C at the idle prompt, or right after
a turn, gives a fresh prompt and does not cancel the next turn. The tiny Qwen model
(tests/data/qwen_next/model) with test_real_model's tokenizer; every read bounded in time."""
import os
import pty
import select
import signal
import time

import pytest

from conftest import BIN
from test_real_model import tiny_qwen_dir


class Pty:
    def __init__(self, argv):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.execv(argv[0], argv)
        self.out = b""

    def expect(self, needle: bytes, timeout=120, must=True):
        """Reads until `needle` appears after what was consumed; returns the text up to it
        (None when it did not come in time and must is False)."""
        deadline = time.time() + timeout
        while needle not in self.out:
            left = deadline - time.time()
            if left <= 0 and not must:
                return None
            assert left > 0, f"no {needle!r} in {self.out[-2000:]!r}"
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    chunk = b""
                assert chunk, f"chat exited; output {self.out[-2000:]!r}"
                self.out += chunk
        head, self.out = self.out.split(needle, 1)
        return head

    def send(self, data: bytes):
        os.write(self.fd, data)

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tiny_qwen_dir(tmp_path_factory, "qwen_chat")


def test_ctrl_c_at_the_prompt_does_not_cancel_the_next_turn(model_dir):
    exe = BIN / "ds4server"
    if not exe.exists():
        pytest.skip(f"{exe} not built")
    chat = Pty([str(exe), "chat", "--model", str(model_dir), "--thinking", "off", "--context_size", "1024",
                "--threads", "2", "--server.default_max_tokens", "6", "--sampler.temperature", "0"])
    try:
        chat.expect(b"> ")
        # Ctrl-C at the idle prompt (the terminal sends SIGINT). One that lands between the
        # prompt and the read is only ignored, so on a loaded machine press it again.
        for _ in range(5):
            time.sleep(0.5)
            chat.send(b"\x03")
            if chat.expect(b"Ctrl-D or /quit leaves", timeout=3, must=False) is not None:
                break
        else:
            raise AssertionError(f"no fresh prompt after Ctrl-C: {chat.out[-2000:]!r}")
        chat.expect(b"> ")
        chat.send(b"hello world\r")
        stats = chat.expect(b"]\r\n") + b"]"
        assert b"generated" in stats and b"cancelled" not in stats, stats
        # Right after a turn (the prompt may or may not be up yet): a Ctrl-C before the next
        # line belongs to no turn either.
        chat.send(b"\x03")
        time.sleep(0.5)
        chat.send(b"tell me a story\r")
        stats = chat.expect(b"]\r\n") + b"]"
        assert b"generated" in stats and b"cancelled" not in stats, stats
        chat.expect(b"> ")
        chat.send(b"/quit\r")
    finally:
        chat.close()
