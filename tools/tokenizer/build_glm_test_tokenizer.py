#!/usr/bin/env python3
"""Build a small GLM-5-format tokenizer.json for tests (no PyPI package ships GLM 5's).

Same format as GLM 5's released tokenizer.json: byte-level BPE, the GLM split regex
(digits in runs of 1-3), ByteLevel without its own regex, no normalizer, and GLM's chat
control tokens as added tokens. The vocabulary is trained with HF `tokenizers` on a small
deterministic corpus (about 2k entries, ~100 KB), written to a cache directory at test time.

Usage: build_glm_test_tokenizer.py OUT.json
"""
import sys
from pathlib import Path

GLM_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GLM_SPECIALS = ["<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>",
                "<|user|>", "<|assistant|>", "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>",
                "<|begin_of_video|>", "<|end_of_video|>", "<|begin_of_audio|>", "<|end_of_audio|>",
                "<|code_prefix|>", "<|code_middle|>", "<|code_suffix|>", "/nothink"]
# Text-like control tokens of GLM 4.5+ (added, not "special": decode keeps them).
GLM_ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
             "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"]

SEED_TEXT = [
    "The quick brown fox jumps over the lazy dog. Reasoning Effort: Max High Low",
    "You may call one or more functions to assist with the user query.",
    "def is_prime(n):\n    if n < 2:\n        return False\n    return all(n % d for d in range(2, int(n ** 0.5) + 1))\n",
    "Der schnelle braune Fuchs springt über den faulen Hund. Größe, Übung, ändern.",
    "El rápido zorro marrón salta sobre el perro perezoso. ¿Qué tal? ¡Muy bien!",
    "Быстрая коричневая лиса прыгает через ленивую собаку.",
    "敏捷的棕色狐狸跳过了懒狗。今天天气很好，我们去公园散步吧。",
    "素早い茶色の狐が怠け者の犬を飛び越える。カタカナ ひらがな",
    "빠른 갈색 여우가 게으른 개를 뛰어넘는다.",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}",
    "The year 2026 has 365 days; 3.14159 and 1,000,000 and 0x1F.",
    "Summarize the README, write a story, then write is_prime with 5 asserts.",
]


def corpus():
    import random
    rng = random.Random(1234)
    words = " ".join(SEED_TEXT).split()
    for _ in range(3000):
        yield " ".join(rng.choice(words) for _ in range(rng.randint(3, 25)))
    yield from SEED_TEXT * 20


def main(out):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(GLM_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tk.train_from_iterator(corpus(), trainer=trainer)
    tk.add_special_tokens(GLM_SPECIALS)
    tk.add_tokens(GLM_ADDED)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(str(out) + ".tmp")
    tk.save(str(tmp))
    tmp.replace(out)


if __name__ == "__main__":
    main(sys.argv[1])
