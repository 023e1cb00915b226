#!/usr/bin/env python3
"""Chat prompts for on-policy text (issue #13: self-distilling the default model's MTP head).

Greedy speculative decoding keeps a draft exactly when it equals the trunk's argmax, so the
head should be trained on the contexts it drafts in: the trunk's own answers to chat prompts.
This script writes the prompts, rendered by the server's own Qwen template (`ds4server
chat-template`: what a chat request really feeds the model, including the reasoning-effort
system instruction of the default thinking level) and tokenized; the trunk answers them with `ds4server run --batch` (the shipped quantized trunk, on CPU or CUDA)
and distill_mtp.py trains the head on prompt + answer.

Prompt kinds mirror what a chat user sends: greetings, explanations, code and arithmetic
tasks (synth_chat.py templates), short-story requests, summaries / explanations /
continuations of long documents, and two-turn chats whose second question follows a long
first turn. Documents are Python standard-library docstrings (PSF licence, the training
data's source). The evaluation's own prompts (tools/eval) and this project's README are not
used.

Usage: python tools/train/onpolicy_prompts.py --model models/default --n 20000 --out prompts.txt
       [--bin build/release/bin/ds4server]
Writes one prompt per line as space-separated token ids, and OUT.jsonl with the messages.
"""
from __future__ import annotations

import argparse
import inspect
import json
import pydoc
import random
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import synth_chat as sc  # noqa: E402

STORY_SUBJECTS = ["a robot", "a small dog", "a fisherman", "a lost key", "a dragon", "a baker",
                  "a train", "a river", "an old clock", "a student", "a cat", "a garden", "the moon",
                  "a sailor", "a library", "a bicycle", "a snowman", "a fox", "a violin", "a tree",
                  "a painter", "a mountain village", "a teacher", "a lonely star", "a farmer"]
STORY_TWISTS = ["who learns to paint", "that cannot sleep", "on a rainy day", "in a quiet town",
                "who finds a map", "that wants to fly", "at the end of winter", "who makes a friend",
                "in the mountains", "that tells the truth", "who finds a letter", "during a storm"]
STORY_ASKS = ["Write a short story about {}.", "Tell me a story about {}.", "Write a very short story about {}.",
              "Write a short story (about {n} words) about {}.", "Write a story of about {n} words about {}."]
SUMMARY_ASKS = ["Summarize the following text in a few sentences:\n\n{}", "Summarize this:\n\n{}",
                "What is this text about?\n\n{}", "Give a short summary of this documentation:\n\n{}",
                "Summarize this document in a few sentences:\n\n{}", "Read this and explain it briefly:\n\n{}"]
CODE_ASKS = ["Write a Python function {f} and {k} assert statements that test it.",
             "Write a Python function {f}. Put the code in one ```python code block.",
             "Write a Python function {f} and {k} tests. Put all the code in one ```python code block."]
FUNCS = ["add(a, b)", "is_even(n)", "reverse(s)", "factorial(n)", "fib(n)", "count_vowels(s)",
         "max_of(xs)", "is_palindrome(s)", "gcd(a, b)", "square(x)", "mean(xs)", "clamp(x, lo, hi)",
         "celsius_to_fahrenheit(c)", "word_count(s)", "flatten(xss)", "unique(xs)"]
SHORT_ASKS = ["Ping. Answer with one line.", "Say hello.", "Answer in one word: yes or no?", "Who are you?",
              "Reply with one short sentence.", "Hello, are you there?"]
STDLIB = ["os", "os.path", "json", "re", "math", "random", "itertools", "functools", "collections",
          "pathlib", "string", "textwrap", "datetime", "statistics", "heapq", "bisect", "shutil",
          "subprocess", "argparse", "logging", "csv", "time", "typing", "dataclasses", "enum",
          "fractions", "decimal", "operator", "copy", "pprint", "glob", "tempfile", "zipfile",
          "unittest", "sqlite3", "urllib.parse", "http.client", "email", "threading", "queue"]


def docstrings(rng):
    """(name, docstring) pairs of stdlib modules and their public callables."""
    out = []
    for mod_name in STDLIB:
        mod = pydoc.locate(mod_name)
        if mod is None:
            continue
        for name in [None] + sorted(n for n in dir(mod) if not n.startswith("_")):
            obj = mod if name is None else getattr(mod, name, None)
            doc = inspect.getdoc(obj) if obj is not None else None
            if doc and 80 <= len(doc) <= 3000:
                out.append((mod_name + ("." + name if name else ""), doc))
    rng.shuffle(out)
    return out


def long_document(rng, docs, chars):
    """Several docstrings joined as one markdown-ish document of about `chars` characters."""
    parts, n = [], 0
    while n < chars:
        name, doc = rng.choice(docs)
        part = f"## {name}\n\n{doc}\n"
        parts.append(part)
        n += len(part)
    return "\n".join(parts)[:chars]


def user_turn(rng, docs):
    gens = [
        lambda: sc.gen_greeting(rng)[0], lambda: sc.gen_explain(rng)[0], lambda: sc.gen_code(rng)[0],
        lambda: sc.gen_math(rng)[0], lambda: rng.choice(SHORT_ASKS),
        lambda: rng.choice(STORY_ASKS).format(rng.choice(STORY_SUBJECTS) + " " + rng.choice(STORY_TWISTS),
                                              n=rng.choice([50, 100, 150, 200])),
        lambda: rng.choice(CODE_ASKS).format(f=rng.choice(FUNCS), k=rng.choice(["three", "five", "two"])),
        lambda: rng.choice(SUMMARY_ASKS).format(rng.choice(docs)[1]),
        lambda: rng.choice(SUMMARY_ASKS).format(long_document(rng, docs, rng.randint(600, 1800))),
        lambda: f"Explain what {rng.choice(docs)[0]} does in Python.",
        lambda: f"Continue this text:\n\n{rng.choice(docs)[1][:400]}",
    ]
    weights = [1, 1, 2, 1, 1, 3, 2, 2, 3, 1, 1]
    return rng.choices(gens, weights)[0]()


def conversation(rng, docs):
    """One or two user turns; an earlier assistant turn is a short template answer."""
    msgs = []
    if rng.random() < 0.15:
        msgs.append({"role": "system", "content": rng.choice(sc.SYSTEM_PROMPTS)})
    if rng.random() < 0.35:
        name, doc = rng.choice(docs)
        msgs.append({"role": "user", "content": rng.choice(SUMMARY_ASKS).format(long_document(rng, docs, rng.randint(400, 1500)))})
        msgs.append({"role": "assistant", "content": f"This text documents {name}. " + doc.split("\n")[0][:200]})
    msgs.append({"role": "user", "content": user_turn(rng, docs)})
    return msgs


# The request's thinking level (the server's default is "on"), weighted toward the default.
THINKING = (["on", "medium", "off", "low"], [70, 10, 15, 5])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/default")
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--max-prompt-tokens", type=int, default=768)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bin", default=str(ROOT / "build/release/bin/ds4server"))
    args = ap.parse_args()
    tmpl = subprocess.Popen([args.bin, "chat-template", "--family", "qwen35", "--jsonl", "--tokenizer",
                             str(Path(args.model) / "tokenizer.json")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    rng = random.Random(args.seed)
    docs = docstrings(rng)
    n_written = 0
    with open(args.out, "w") as out, open(args.out + ".jsonl", "w") as meta:
        while n_written < args.n:
            msgs = conversation(rng, docs)
            thinking = rng.choices(*THINKING)[0]
            tmpl.stdin.write(json.dumps({"messages": msgs, "thinking": thinking}) + "\n")
            tmpl.stdin.flush()
            res = json.loads(tmpl.stdout.readline())
            if "error" in res:
                raise SystemExit(f"chat-template: {res['error']}")
            ids = res["ids"]
            if len(ids) > args.max_prompt_tokens:
                continue
            out.write(" ".join(map(str, ids)) + "\n")
            meta.write(json.dumps({"messages": msgs, "thinking": thinking, "tokens": len(ids)}) + "\n")
            n_written += 1
    tmpl.stdin.close()
    tmpl.wait()
    print(f"{n_written} prompts -> {args.out}")


if __name__ == "__main__":
    main()
