"""Incremental append: the token history of a finished turn (prompt + the tokens the model
generated, ending in its stop token) plus the next user turn must equal a full re-render,
and the known bug classes must not come back: an extra BOS/EOS before the first prompt, a
second system message on continuation, the missing template newline after a generated EOS,
a stop token left in the parsed text."""
import random

import pytest
from chat_matrix import TEXTS, TOOLS, request
from tokenizers import Tokenizer

FAMILIES = ["deepseek_v4", "qwen35", "glm5"]
STOP = {"deepseek_v4": "<｜end▁of▁sentence｜>", "qwen35": "<|im_end|>", "glm5": "<|user|>"}


def generated_text(family, thinking, reasoning, content):
    """What the model writes after the generation prompt, in the family's own format."""
    if not thinking:
        return content
    if family == "qwen35":
        return reasoning + "\n</think>\n\n" + content
    return reasoning + "</think>" + content


def cases(seed=11):
    rng = random.Random(seed)
    out = []
    for family in FAMILIES:
        for i in range(40):
            thinking = rng.choice(["on", "off", "max", "low"])
            system = i % 3 == 0
            tools = TOOLS if i % 4 == 1 else None
            msgs = ([{"role": "system", "content": "You are terse. ✓"}] if system else [])
            msgs.append({"role": "user", "content": rng.choice(TEXTS).strip() or "hi"})
            reasoning = rng.choice(["Think about it.", "先想一想。", "Check n < 2 first."])
            content = rng.choice(["Sure: 4.", "Voilà — fini.", "答案是四。", "def f():\n    return 1"])
            out.append((family, thinking, msgs, tools, reasoning, content))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_append_after_generated_turn(family, tokenizer_paths, ds4):
    path = tokenizer_paths[family]
    hf = Tokenizer.from_file(path)
    stop = hf.token_to_id(STOP[family])
    mine = [c for c in cases() if c[0] == family]
    first = ds4(family).ask([request(m, t, th) for _, th, m, t, _, _ in mine])
    reqs, hist, gens, convs = [], [], [], []
    for (fam, th, msgs, tools, reasoning, content), r in zip(mine, first):
        gen_text = generated_text(fam, th != "off", reasoning, content)
        gen_ids = hf.encode(gen_text, add_special_tokens=False).ids
        history = r["ids"] + gen_ids + [stop]
        follow = msgs + [{"role": "assistant", "content": content, "reasoning_content": reasoning if th != "off" else ""},
                         {"role": "user", "content": "And now in one word?"}]
        reqs.append(request(follow, tools, th, op="continue", history=history))
        hist.append(history)
        gens.append(gen_ids)
        convs.append(request(follow, tools, th))
    cont = ds4(family).ask(reqs)
    full = ds4(family).ask(convs)
    fast = 0
    for (fam, th, msgs, tools, *_), h, c, f in zip(mine, hist, cont, full):
        assert h[: c["keep"]] + c["append"] == f["ids"]
        rewrites_past = fam == "deepseek_v4" and th != "off" and not tools
        assert (c["keep"] == len(h)) == (not rewrites_past)
        if c["keep"] == len(h):
            fast += 1
        else:
            # Only DeepSeek rewrites the past: a finished turn's reasoning is dropped once a
            # later user turn exists (no tools). The cache keeps everything before it.
            assert fam == "deepseek_v4" and th != "off" and not tools
            assert hf.decode(h[: c["keep"]], skip_special_tokens=False).endswith("<｜Assistant｜>")
    assert fast >= len(mine) // 3

    # Regression: exactly one BOS / no EOS before the first prompt.
    for r in first:
        ids = r["ids"]
        assert stop not in ids[:3]
        if family == "deepseek_v4":
            assert ids.count(hf.token_to_id("<｜begin▁of▁sentence｜>")) == 1 and ids[0] == 0
        if family == "glm5":
            assert ids[:2] == [hf.token_to_id("[gMASK]"), hf.token_to_id("<sop>")]
    # Regression: no second system message on continuation.
    for (fam, th, msgs, tools, *_), c, f in zip(mine, cont, full):
        text = hf.decode(c["append"], skip_special_tokens=False)
        assert "<|im_start|>system" not in text and "<|system|>" not in text
        if fam == "qwen35":
            assert hf.decode(f["ids"], skip_special_tokens=False).count("<|im_start|>system") <= 1
    # Regression: the template newline after a generated <|im_end|> is appended.
    if family == "qwen35":
        for c, h in zip(cont, hist):
            assert c["keep"] == len(h) and hf.decode(c["append"][:2], skip_special_tokens=False) == "\n<|im_start|>"


@pytest.mark.parametrize("family", FAMILIES)
def test_parsed_turn_reproduces_history(family, tokenizer_paths, ds4):
    """Generated tokens -> text (stop token removed) -> parser -> conversation -> the
    re-render continues the very same tokens (no stop token left in the text)."""
    path = tokenizer_paths[family]
    hf = Tokenizer.from_file(path)
    mine = [c for c in cases(23) if c[0] == family and c[3] is None]
    parse_reqs = []
    for fam, th, msgs, tools, reasoning, content in mine:
        text = generated_text(fam, th != "off", reasoning, content)
        parse_reqs.append({"op": "parse", "text": text, "thinking": th != "off", "chunk": 3})
    parsed = ds4(family).ask(parse_reqs)
    for (fam, th, msgs, tools, reasoning, content), p in zip(mine, parsed):
        assert STOP[family] not in p["content"]
        assert p["content"] == content
        assert p["reasoning"] == (reasoning if th != "off" else "")
        assert p["tool_calls"] == []
