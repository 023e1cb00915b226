"""Output parsers against the families' own tool-call formats: the assistant text a
reference renderer writes for a turn (reasoning, content, tool calls) parses back into the
same reasoning, content and {name, arguments}; at every chunk size the result is the same;
cut at any byte, the parser never fails and never invents a call."""
import copy
import json
import random

import ds4_reference
import hf_jinja
import pytest
from chat_matrix import ARGS, GLM_TEMPLATE, QWEN_TEMPLATE, TOOLS

FAMILIES = ["deepseek_v4", "qwen35", "glm5"]


def assistant_text(family, reasoning, content, calls):
    """The generated text of one turn, as the family's reference renders it (the part the
    model writes after the generation prompt, stop token excluded)."""
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": content, "reasoning_content": reasoning,
             "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]}]
    if family == "deepseek_v4":
        m = copy.deepcopy(msgs)
        for c in m[1]["tool_calls"]:
            c["function"]["arguments"] = json.dumps(c["function"]["arguments"], ensure_ascii=False)
        text = ds4_reference.render(m, None, "on", False)
        body = text.split("<｜Assistant｜><think>", 1)[1]
        return body[: -len("<｜end▁of▁sentence｜>")]
    if family == "qwen35":
        text = hf_jinja.render(QWEN_TEMPLATE, msgs, add_generation_prompt=False, preserve_thinking=True)
        body = text.split("<|im_start|>assistant\n<think>\n", 1)[1]
        return body[: -len("<|im_end|>\n")]
    text = hf_jinja.render(GLM_TEMPLATE, msgs, add_generation_prompt=False)
    return text.split("<|assistant|><think>", 1)[1]


def samples(seed=3):
    rng = random.Random(seed)
    out = []
    for i in range(30):
        calls = [(rng.choice(TOOLS)["function"]["name"], rng.choice(ARGS)) for _ in range(rng.randint(0, 2))]
        reasoning = rng.choice(["Plan: call the tool.", "思考：先查天气。", "Check <b> & edge cases."])
        content = rng.choice(["", "Let me check.", "Voilà:", "Résultat ci-dessous."])
        out.append((reasoning, content, calls))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_parse_reference_turns(family, ds4):
    cases = samples()
    texts = [assistant_text(family, r, c, calls) for r, c, calls in cases]
    reqs = [{"op": "parse", "text": t, "thinking": True, "chunk": k} for t in texts for k in (0, 1, 2, 5)]
    got = ds4(family).ask(reqs)
    for i, (reasoning, content, calls) in enumerate(cases):
        whole = got[4 * i]
        assert "error" not in whole
        assert whole["reasoning"] == (reasoning.strip() if family == "qwen35" else reasoning)
        assert whole["content"] == content
        assert [(c["name"], json.loads(c["arguments"])) for c in whole["tool_calls"]] == calls
        for k in range(1, 4):
            assert got[4 * i + k] == whole, (texts[i], k)


@pytest.mark.parametrize("family", FAMILIES)
def test_parse_truncated_anywhere(family, ds4):
    reasoning, content, calls = "Plan.", "Calling:", [("get_weather", ARGS[3]), ("run_python", ARGS[2])]
    text = assistant_text(family, reasoning, content, calls)
    raw = text.encode()
    cuts = [raw[:n].decode("utf-8", "ignore") for n in range(len(raw) + 1)]
    got = ds4(family).ask([{"op": "parse", "text": t, "thinking": True, "chunk": 3} for t in cuts])
    ncalls = []
    for t, g in zip(cuts, got):
        assert "error" not in g
        ncalls.append(len(g["tool_calls"]))
        for c in g["tool_calls"]:  # a call only appears once it is complete and correct
            assert (c["name"], json.loads(c["arguments"])) in calls
    assert ncalls == sorted(ncalls) and ncalls[-1] == 2


@pytest.mark.parametrize("family", FAMILIES)
def test_parse_malformed_is_an_error_not_text(family, ds4):
    broken = {
        "deepseek_v4": '</think>x<｜DSML｜tool_calls><｜DSML｜invoke name="f"><｜DSML｜parameter name="a" string="false">{bad'
                       '</｜DSML｜parameter></｜DSML｜invoke></｜DSML｜tool_calls>',
        "qwen35": "</think>x<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>",
        "glm5": "</think>x<tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
    }[family]
    g = ds4(family).ask([{"op": "parse", "text": broken, "thinking": True}])[0]
    assert g["tool_calls"] == [] and g["content"] == "x"
    assert [e["type"] for e in g["tool_errors"]] == ["malformed"]
    assert g["tool_errors"][0]["text"] == broken[len("</think>x"):]
