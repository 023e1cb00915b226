#!/usr/bin/env python3
"""Build the training data and the tokenizer of the default model (issue #13).

Sources (nothing is downloaded except these two Debian packages, through apt-get):
  python3.11-doc  - the Python 3.11 documentation sources (_sources/*.rst.txt), PSF licence
  wordnet-base    - WordNet 3.0 glosses and example sentences, WordNet 3.0 licence
plus synthetic chat turns from synth_chat.py, rendered with chat_template.jinja (the Qwen
chat format).

Outputs in --out: tokenizer.json, tokenizer_config.json, train.bin / val.bin (uint16 token
ids, documents separated by <|endoftext|>), meta.json (counts per source).
Run: .venv/bin/python tools/train/prep_data.py --out build/train/data
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import subprocess
from pathlib import Path

import jinja2
import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, trainers

import synth_chat

HERE = Path(__file__).resolve().parent
VOCAB_SIZE = 8192
# Qwen3.5/3.6 split regex (same pre-tokenization as the Qwen tokenizer).
QWEN_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
            r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen3.5 control tokens in Qwen's order; tag-like ones are not "special" (they stay in
# decoded text), as in Qwen's tokenizer.json.
CONTROL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
]
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>",
               "</think>"}
PACKAGES = ["python3.11-doc", "wordnet-base"]


def fetch_packages(work: Path) -> Path:
    """apt-get download + dpkg -x the two source packages into work/root."""
    root = work / "root"
    if (root / "usr/share/wordnet/data.noun").exists():
        return root
    debs = work / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    subprocess.run(["apt-get", "download", *PACKAGES], cwd=debs, check=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True)
    return root


ROLE_RE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")


def clean_rst(text: str) -> str:
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s and len(set(s)) == 1 and s[0] in "=-~^*#+\"'":
            continue  # section underlines
        if s.startswith((".. index::", ".. _", ".. highlight", ".. sectionauthor", ".. moduleauthor",
                         ".. versionadded", ".. versionchanged", ".. seealso", ".. toctree",
                         ":maxdepth:", ":synopsis:", ":noindex:", ".. testsetup", ".. impl-detail")):
            continue
        line = ROLE_RE.sub(r"\1", line).replace("``", "`").replace("**", "")
        out.append(line.rstrip())
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def python_docs(root: Path):
    """One document per .rst.txt file, plus (name, summary) pairs from function entries."""
    base = root / "usr/share/doc/python3.11/html/_sources"
    docs, pydoc = [], []
    sig = re.compile(r"^\.\. (?:function|method)::\s+([A-Za-z_][\w.]*)\(")
    for path in sorted(base.rglob("*.rst.txt")):
        raw = path.read_text(encoding="utf-8", errors="replace")
        lines = raw.splitlines()
        for i, line in enumerate(lines):
            m = sig.match(line.strip())
            if not m:
                continue
            para = []
            for nxt in lines[i + 1:i + 12]:
                if nxt.strip().startswith(".."):
                    if para:
                        break
                    continue
                if not nxt.strip():
                    if para:
                        break
                    continue
                if nxt.strip().startswith(":"):
                    continue
                para.append(nxt.strip())
            summary = ROLE_RE.sub(r"\1", " ".join(para)).replace("``", "`").replace("*", "")
            first = re.split(r"(?<=\.)\s", summary)[0]
            if 20 <= len(first) <= 240 and first.endswith("."):
                pydoc.append((m.group(1), first))
        text = clean_rst(raw)
        if len(text) > 200:
            docs.append(text)
    return docs, pydoc


def wordnet(root: Path):
    """(word, pos, gloss, examples) per synset, and documents of 40 entries each."""
    posname = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}
    entries = []
    for pos, name in posname.items():
        with open(root / f"usr/share/wordnet/data.{pos}", encoding="latin-1") as f:
            for line in f:
                if line.startswith("  ") or " | " not in line:
                    continue
                head, gloss = line.split(" | ", 1)
                parts = head.split()
                nwords = int(parts[3], 16)
                words = [parts[4 + 2 * i].replace("_", " ") for i in range(nwords)]
                words = [re.sub(r"\(.*\)$", "", w) for w in words]
                gloss = gloss.strip()
                examples = re.findall(r"\"([^\"]+)\"", gloss)
                definition = gloss.split("; \"")[0].strip().rstrip(";")
                if not definition:
                    continue
                entries.append((words, name, definition, examples))
    rng = random.Random(7)
    order = list(range(len(entries)))
    rng.shuffle(order)
    docs = []
    for i in range(0, len(order), 40):
        lines = []
        for j in order[i:i + 40]:
            words, pos, definition, examples = entries[j]
            line = f"{', '.join(words)} ({pos}): {definition}."
            if examples:
                line += " Example: " + "; ".join(f"\"{e}\"" for e in examples) + "."
            lines.append(line)
        docs.append("\n".join(lines))
    # Questions only about single, lower-case words (clean targets for "what does X mean").
    qa = [(w[0], p, d, e) for w, p, d, e in entries if re.fullmatch(r"[a-z]{3,14}", w[0])]
    return docs, qa


def render_chats(convs):
    env = jinja2.Environment(trim_blocks=False, lstrip_blocks=False)
    tmpl = env.from_string((HERE / "chat_template.jinja").read_text())
    return [tmpl.render(messages=c, add_generation_prompt=False, tools=None) for c in convs]


def train_tokenizer(texts, out: Path) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - len(CONTROL_TOKENS), min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, special_tokens=[])
    tok.train_from_iterator(texts, trainer=trainer)
    # Control tokens go after the learned vocabulary, in Qwen's order (as in Qwen's files).
    for t in CONTROL_TOKENS:
        added = AddedToken(t, special=t not in NOT_SPECIAL, normalized=False)
        if t in NOT_SPECIAL:
            tok.add_tokens([added])
        else:
            tok.add_special_tokens([added])
    assert tok.get_vocab_size() == VOCAB_SIZE, tok.get_vocab_size()
    tok.save(str(out / "tokenizer.json"))
    decoder = {}
    for t in CONTROL_TOKENS:
        decoder[str(tok.token_to_id(t))] = {"content": t, "lstrip": False, "normalized": False,
                                            "rstrip": False, "single_word": False,
                                            "special": t not in NOT_SPECIAL}
    config = {
        "add_bos_token": False, "add_prefix_space": False, "added_tokens_decoder": decoder,
        "bos_token": None, "chat_template": (HERE / "chat_template.jinja").read_text(),
        "clean_up_tokenization_spaces": False, "eos_token": "<|im_end|>", "errors": "replace",
        "model_max_length": 4096, "pad_token": "<|endoftext|>", "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer", "unk_token": None,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return tok


def encode_docs(tok: Tokenizer, docs, eot: int) -> np.ndarray:
    ids = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eot)
    return np.asarray(ids, dtype=np.uint16)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="build/train/data")
    ap.add_argument("--work", default="build/train/pkg")
    ap.add_argument("--chats", type=int, default=120000)
    ap.add_argument("--val-frac", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = fetch_packages(Path(args.work))
    py_docs, pydoc = python_docs(root)
    wn_docs, wn_qa = wordnet(root)
    convs = synth_chat.conversations(args.chats, args.seed, wn_qa, pydoc)
    chats = render_chats(convs)
    sources = {"python3.11-doc": py_docs, "wordnet-base": wn_docs, "synthetic-chat": chats}
    tok = train_tokenizer(py_docs + wn_docs + chats[:30000], out)
    eot = tok.token_to_id("<|endoftext|>")
    rng = random.Random(args.seed)
    train_docs, val_docs, meta = [], [], {"sources": {}}
    for name, docs in sources.items():
        docs = list(docs)
        rng.shuffle(docs)
        nval = max(1, int(len(docs) * args.val_frac))
        val_docs += docs[:nval]
        train_docs += docs[nval:]
        meta["sources"][name] = {"documents": len(docs), "chars": sum(map(len, docs))}
    rng.shuffle(train_docs)
    train = encode_docs(tok, train_docs, eot)
    val = encode_docs(tok, val_docs, eot)
    train.tofile(out / "train.bin")
    val.tofile(out / "val.bin")
    meta.update(train_tokens=int(train.size), val_tokens=int(val.size), vocab_size=VOCAB_SIZE,
                pydoc_pairs=len(pydoc), wordnet_qa=len(wn_qa), example_chat=chats[0])
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps({k: v for k, v in meta.items() if k != "example_chat"}, indent=2))


if __name__ == "__main__":
    main()
