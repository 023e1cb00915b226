#!/usr/bin/env python3
"""Tokenizer throughput: ds4 (bench_tokenizer, C++) vs HF `tokenizers` (Rust), one thread
each, same corpus (tools/tokenizer/corpus.py, valid-UTF-8 view), same run, best of N.
Writes bench/results/tokenizer.md.

Usage: bench/tokenizer/run.py BUILD_DIR   (e.g. build/release)
"""
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # HF encode_batch on one thread
os.environ["RAYON_NUM_THREADS"] = "1"
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "tokenizer"))
import corpus  # noqa: E402
import paths  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

REPEAT = 3


def hf_run(path, texts):
    tk = Tokenizer.from_file(path)
    best, tokens = 1e30, 0
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        enc = tk.encode_batch(texts, add_special_tokens=False)
        best = min(best, time.perf_counter() - t0)
        tokens = sum(len(e.ids) for e in enc)
    return tokens, best


def main(build):
    texts = [b.decode("utf-8", "replace") for b in corpus.corpus()]
    rows = []
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
        corpus_file = f.name
    for fam in paths.FAMILIES:
        path = str(paths.tokenizer_path(fam))
        out = subprocess.run([str(Path(build) / "bin" / "bench_tokenizer"), "--tokenizer", path, "--corpus", corpus_file,
                              "--repeat", str(REPEAT)], capture_output=True, text=True, check=True).stdout
        ours = json.loads(out)
        hf_tokens, hf_s = hf_run(path, texts)
        assert hf_tokens == ours["tokens"], (fam, hf_tokens, ours["tokens"])
        rows.append((fam, ours["tokens"], ours["tokens_per_s"], hf_tokens / hf_s))
    os.unlink(corpus_file)
    lines = ["# Tokenizer encode throughput", "",
             f"Work: {len(texts)} generated strings (tools/tokenizer/corpus.py, {sum(map(len, texts))} chars), "
             "special tokens matched, best of 3; one thread each; same run.",
             f"Peer: HF tokenizers {__import__('tokenizers').__version__} encode_batch with TOKENIZERS_PARALLELISM=false.",
             f"Hardware: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs (shared dev machine).",
             "Command: `python bench/tokenizer/run.py build/release`", "",
             "| family | tokens | ds4 tok/s | HF tok/s | ratio |", "| --- | --- | --- | --- | --- |"]
    for fam, tokens, ours, hf in rows:
        lines.append(f"| {fam} | {tokens} | {ours:,.0f} | {hf:,.0f} | {ours / hf:.2f}x |")
    text = "\n".join(lines) + "\n"
    (ROOT / "bench" / "results" / "tokenizer.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/release")
