import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("DS4_ROOT", Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(ROOT / "tools" / "tokenizer"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def ds4server():
    bin_dir = os.environ.get("DS4_BIN")
    candidates = [Path(bin_dir) / "ds4server"] if bin_dir else []
    candidates += [ROOT / "build" / p / "bin" / "ds4server" for p in ("release", "debug")]
    for c in candidates:
        if c.exists():
            return str(c)
    pytest.skip("ds4server binary not built")


class Session:
    """One long-lived `ds4server chat-template --jsonl` per family: the vocabulary is
    loaded once for the whole test session (it dominates the run time under ASan)."""

    def __init__(self, family, path):
        self.proc = subprocess.Popen([ds4server(), "chat-template", "--family", family, "--tokenizer", path, "--jsonl"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, requests):
        payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests).encode()
        # Write from a thread: answers stream back while requests are still going in.
        writer = threading.Thread(target=lambda: (self.proc.stdin.write(payload), self.proc.stdin.flush()))
        writer.start()
        out = []
        for _ in requests:
            line = self.proc.stdout.readline()
            assert line, "ds4server exited early"
            out.append(json.loads(line.decode()))
        writer.join()
        return out

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


_SESSIONS = {}


@pytest.fixture(scope="session")
def tokenizer_paths():
    import paths
    return {fam: str(paths.tokenizer_path(fam)) for fam in paths.FAMILIES}


@pytest.fixture(scope="session")
def ds4(tokenizer_paths):
    """ds4("qwen35").ask([requests]) -> answers."""
    def get(family):
        if family not in _SESSIONS:
            _SESSIONS[family] = Session(family, tokenizer_paths[family])
        return _SESSIONS[family]
    yield get
    for s in _SESSIONS.values():
        s.close()
    _SESSIONS.clear()
