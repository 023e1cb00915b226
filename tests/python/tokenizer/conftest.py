import json
import os
import subprocess
import sys
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


def run_jsonl(args, requests):
    """One ds4server process for a whole batch: one JSON request per line in, one out."""
    payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests)
    proc = subprocess.run([ds4server(), *args, "--jsonl"], input=payload.encode(), capture_output=True)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    lines = proc.stdout.decode().split("\n")[:-1]  # not splitlines(): U+2028 is data
    assert len(lines) == len(requests)
    return [json.loads(line) for line in lines]


@pytest.fixture(scope="session")
def tokenizer_paths():
    import paths
    return {fam: str(paths.tokenizer_path(fam)) for fam in paths.FAMILIES}
