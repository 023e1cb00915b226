#!/usr/bin/env python3
"""Three-turn chat with the default model through the C++ engine only: the native Qwen chat
template (`ds4server chat-template`) renders each turn, `ds4server run` generates greedily.
Usage: .venv/bin/python tools/train/chat_demo.py [--bin build/release/bin/ds4server]
       [--thinking off|medium|on]
"""
import argparse
import json
import subprocess

from tokenizers import Tokenizer

TURNS = ["Hello!", "What is a dictionary in Python?",
         "Write a Python function that returns the square of a number."]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/release/bin/ds4server")
    ap.add_argument("--model", default="models/default")
    ap.add_argument("--thinking", default="off")
    ap.add_argument("--max-tokens", type=int, default=120)
    args = ap.parse_args()
    tok = Tokenizer.from_file(f"{args.model}/tokenizer.json")
    msgs = []
    for turn in TURNS:
        msgs.append({"role": "user", "content": turn})
        req = json.dumps({"messages": msgs, "thinking": args.thinking})
        r = subprocess.run([args.bin, "chat-template", "--family", "qwen35", "--tokenizer",
                            f"{args.model}/tokenizer.json"], input=req, capture_output=True,
                           text=True, check=True)
        ids = json.loads(r.stdout)["ids"]
        g = subprocess.run([args.bin, "run", "--model", args.model, "--tokens",
                            ",".join(map(str, ids)), "--max-tokens", str(args.max_tokens)],
                           capture_output=True, text=True, check=True)
        out = [int(t) for t in g.stdout.split()]
        if 8168 in out:  # <|im_end|> ends the turn (config eos is <|endoftext|>)
            out = out[:out.index(8168)]
        text = tok.decode(out, skip_special_tokens=False)
        reasoning, _, answer = text.rpartition("</think>")
        print(f"user: {turn}\nassistant: {answer.strip()}\n")
        msgs.append({"role": "assistant", "content": answer.strip(),
                     "reasoning_content": reasoning.replace("<think>", "").strip()})


if __name__ == "__main__":
    main()
