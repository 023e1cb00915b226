#!/usr/bin/env python3
"""Compares the answers of two ds4-eval runs turn by turn (e.g. the same cells on the CPU and
on the CUDA backend, greedy): per (cell, repeat, turn) the answer excerpt, the output token
count and the finish reason must be equal. Prints one line per turn and a summary; exits 1 on
any difference, 2 when a turn of one run is missing in the other.
Usage: compare_receipts.py A/receipts.jsonl B/receipts.jsonl [--cell-map qwen-AR=qwen-AR,...]"""
import argparse
import json
import sys

KEYS = ("answer_excerpt", "output_tokens", "finish_reason")


def turns(path):
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if "answer_excerpt" in r:  # chat turns (load/ping receipts carry no answer)
                out[(r["cell"], r["repeat"], r["turn"])] = r
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    args = ap.parse_args()
    a, b = turns(args.a), turns(args.b)
    missing = sorted(set(a) ^ set(b))
    same = diff = 0
    for key in sorted(set(a) & set(b)):
        d = [k for k in KEYS if a[key].get(k) != b[key].get(k)]
        if d:
            diff += 1
            print(f"DIFF {key}: " + "; ".join(f"{k}: {a[key].get(k)!r:.80} vs {b[key].get(k)!r:.80}" for k in d))
        else:
            same += 1
            print(f"same {key}: {a[key]['output_tokens']} tokens, {a[key]['finish_reason']}")
    for key in missing:
        print(f"MISSING {key} in {'b' if key in a else 'a'}")
    print(f"{same} turns equal, {diff} differ, {len(missing)} missing")
    sys.exit(2 if missing else 1 if diff else 0)


if __name__ == "__main__":
    main()
