"""Generated conversation matrix and the reference renderers per family."""
import copy
import json
import random
from pathlib import Path

import ds4_reference
import hf_jinja

DATA = Path(__file__).resolve().parents[2] / "data" / "tokenizer"
QWEN_TEMPLATE = (DATA / "qwen38_chat_template.jinja").read_text()
GLM_TEMPLATE = (DATA / "glm5_chat_template.jinja").read_text()
LEVELS = ["off", "on", "low", "medium", "high", "max"]

TEXTS = ["Hello there.", "Summarize the README in three bullet points.", "Write a short story about a fox.",
         "Écris une phrase en français, s'il te plaît.", "用中文解释一下递归。", "日本語で答えてください。",
         "Привет! Как дела?", "مرحبا بالعالم", "emoji: 👨‍👩‍👧 🇩🇪 👍🏽 done", "  padded with spaces  ",
         "\nleading newline and trailing\n\n", "code:\n```python\nprint('hi')\n```", "x" * 3,
         "math: 2 + 2 = 4, 10 ** 3 = 1000", "tabs\tand\ttabs", "Ünïcödé e\u0301 combining"]
REASONING = ["", "The user wants a summary. I will list three points.", "思考一下：先分析问题。",
             "  Step 1: read.\nStep 2: answer.  ", "Let me check edge cases: n < 2, even numbers."]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Get the weather for a city.",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string", "description": "City name, e.g. Paris"},
                                          "days": {"type": "integer"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "run_python", "description": "Run code & return stdout <out>.",
                                      "parameters": {"type": "object", "properties": {
                                          "code": {"type": "string"}, "timeout": {"type": "integer"}}}}},
]
ARGS = [{"city": "Paris", "days": 3}, {"city": "東京"}, {"code": "print(1 < 2 && 3 > 2)\nx = {'a': [1, 2]}", "timeout": 10},
        {"city": "São Paulo", "days": 0, "units": None, "flags": [True, False], "extra": {"k": "v", "n": [1, {"m": 2}]}}]
RESULTS = ['{"temp_c": 21, "sky": "clear"}', "stdout:\ntrue\n", "Error: city not found </tool_result> ok", "晴れ、25度"]


def conversation(rng, with_tools, turns, system, level):
    msgs = []
    if system:
        msgs.append({"role": "system", "content": rng.choice(["You are a helpful assistant.", "Réponds brièvement. 🙂",
                                                             "  System with spaces.  "])})
    for t in range(turns):
        msgs.append({"role": "user", "content": rng.choice(TEXTS)})
        last = t == turns - 1
        if last and rng.random() < 0.8:
            break
        if with_tools and rng.random() < 0.6:
            n = rng.randint(1, 2)
            calls = [{"id": f"call_{t}_{k}", "type": "function",
                      "function": {"name": rng.choice(TOOLS)["function"]["name"], "arguments": rng.choice(ARGS)}}
                     for k in range(n)]
            msgs.append({"role": "assistant", "content": rng.choice(["", "Let me check.", "Calling a tool now."]),
                         "reasoning_content": rng.choice(REASONING), "tool_calls": calls})
            for k in range(n):
                msgs.append({"role": "tool", "tool_call_id": f"call_{t}_{k}", "content": rng.choice(RESULTS)})
            if last:
                break
        msgs.append({"role": "assistant", "content": rng.choice(TEXTS), "reasoning_content": rng.choice(REASONING)})
    return msgs


def matrix(seed=5):
    rng = random.Random(seed)
    cases = []
    for level in LEVELS:
        for with_tools in (False, True):
            for system in (False, True):
                for turns in range(1, 6):
                    cases.append((conversation(rng, with_tools, turns, system, level), with_tools, level))
    for _ in range(150):
        wt = rng.random() < 0.5
        cases.append((conversation(rng, wt, rng.randint(1, 5), rng.random() < 0.5, rng.choice(LEVELS)), wt,
                      rng.choice(LEVELS)))
    return cases


def reference_text(family, messages, tools, level, add_generation_prompt=True):
    msgs = copy.deepcopy(messages)
    if family == "deepseek_v4":
        for m in msgs:
            for c in m.get("tool_calls", []):
                c["function"]["arguments"] = json.dumps(c["function"]["arguments"], ensure_ascii=False,
                                                        separators=(",", ":"))
        return ds4_reference.render(msgs, tools, level, add_generation_prompt)
    if family == "qwen35":
        kw = {"enable_thinking": level != "off", "preserve_thinking": True}
        if level in ("low", "medium"):
            kw["reasoning_effort"] = level
        if tools:
            kw["tools"] = tools
        return hf_jinja.render(QWEN_TEMPLATE, msgs, add_generation_prompt=add_generation_prompt, **kw)
    kw = {}
    if level in ("low", "high"):
        kw["reasoning_effort"] = level
    if tools:
        kw["tools"] = tools
    text = hf_jinja.render(GLM_TEMPLATE, msgs, add_generation_prompt=add_generation_prompt, **kw)
    if level == "off" and add_generation_prompt:
        # The GLM 5.3 template has no thinking-off shape; ours closes the block at once
        # (docs/reference-differences.md).
        assert text.endswith("<|assistant|><think>")
        text += "</think>"
    return text


def request(messages, tools, level, add_generation_prompt=True, **extra):
    r = {"messages": messages, "thinking": level, "add_generation_prompt": add_generation_prompt, **extra}
    if tools:
        r["tools"] = tools
    return r
