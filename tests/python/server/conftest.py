"""Starts ds4server_testmodel (the serve entry with the scripted test model) on 127.0.0.1
with a free port and stops it after the module. Everything bounded in time."""
import os
import pathlib
import sys

import httpx
import pytest

ROOT = pathlib.Path(os.environ.get("DS4_ROOT", pathlib.Path(__file__).resolve().parents[3]))
BIN = pathlib.Path(os.environ.get("DS4_BIN", ROOT / "build" / "debug" / "bin"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "common"))
from ds4_server_proc import ServerProcess  # noqa: E402


class ServerProc(ServerProcess):
    """ds4server_testmodel by default; exe="ds4server", subcommand="serve" for a real model."""

    def __init__(self, *extra, exe="ds4server_testmodel", subcommand=None):
        exe = BIN / exe
        if not exe.exists():
            pytest.skip(f"{exe} not built")
        cmd = [str(exe), *([subcommand] if subcommand else []), "--port", "0", "--host", "127.0.0.1",
               "--server.web_root", str(ROOT / "web"), *extra]
        super().__init__(cmd, start_s=60)


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
