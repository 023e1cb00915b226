"""Starts ds4server_testmodel (the serve entry with the scripted test model) on 127.0.0.1
with a free port and stops it after the module. Everything bounded in time."""
import os
import pathlib
import re
import subprocess
import threading
import time

import httpx
import pytest

ROOT = pathlib.Path(os.environ.get("DS4_ROOT", pathlib.Path(__file__).resolve().parents[3]))
BIN = pathlib.Path(os.environ.get("DS4_BIN", ROOT / "build" / "debug" / "bin"))


class ServerProc:
    """ds4server_testmodel by default; exe="ds4server", subcommand="serve" for a real model."""

    def __init__(self, *extra, exe="ds4server_testmodel", subcommand=None):
        exe = BIN / exe
        if not exe.exists():
            pytest.skip(f"{exe} not built")
        cmd = [str(exe), *([subcommand] if subcommand else []), "--port", "0", "--host", "127.0.0.1",
               "--server.web_root", str(ROOT / "web"), *extra]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.lines.append(line)
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("server did not start:\n" + "".join(self.lines))
        # Keep draining stderr so the pipe never blocks the server.
        threading.Thread(target=self._drain, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode


@pytest.fixture(scope="module")
def server():
    # 200 us per token keeps streams long enough to cancel, short enough for fast tests.
    s = ServerProc("--test-delay-us", "200", "--server.max_body_bytes", "65536", "--thinking", "off")
    yield s
    assert s.stop() == 0, "".join(s.lines[-20:])


@pytest.fixture(scope="module")
def auth_server():
    s = ServerProc("--server.api_key", "sekret-key", "--thinking", "off")
    yield s
    s.stop()


def health(url):
    return httpx.get(url + "/health", timeout=10).json()
