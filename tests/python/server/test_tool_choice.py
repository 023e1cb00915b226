"""tool_choice on the three APIs with the official SDKs, for all three families' templates
(tests/data/<family>/model: random tiny DeepSeek V4 and GLM 5; models/default: the tiny
trained Qwen3.8 Flash Next). Decoding is constrained to the family's native call format, so
even a random model writes a call that parses, names an offered (or the chosen) function and
whose arguments validate against its schema; "none" gives no call; a call cut by max_tokens
comes back as a truncated-call error, never as text. Plus the 400s for bad tools /
tool_choice / speculative values and the per-request `speculative` extension."""
import json

import anthropic
import httpx
import openai
import pytest

from conftest import ROOT, ServerProc

MODELS = {
    "qwen35": ROOT / "models" / "default",
    "glm5": ROOT / "tests" / "data" / "glm5" / "model",
    "deepseek_v4": ROOT / "tests" / "data" / "deepseek_v4" / "model",
}
WEATHER = {"type": "object",
           "properties": {"city": {"type": "string", "maxLength": 12}, "days": {"type": "integer"},
                          "unit": {"type": "string", "enum": ["c", "f"]}},
           "required": ["city", "days"]}
PLAN = {"type": "object",
        "properties": {"steps": {"type": "array", "maxItems": 3, "items": {"enum": ["look", "think", "act"]}},
                       "urgent": {"type": "boolean"},
                       "budget": {"anyOf": [{"type": "number"}, {"type": "null"}]}},
        "required": ["steps", "urgent"]}
NOOP = {"type": "object", "properties": {}}
SCHEMAS = {"get_weather": WEATHER, "make_plan": PLAN, "noop": NOOP}
PROMPT = "What is the weather in Paris for the next 3 days?"
MAX = 400  # DSML on a 1024-token vocabulary: a call is a few hundred byte-sized tokens


def validate(schema, v, where="args"):
    """The JSON-schema keywords these tools use, checked by hand (no jsonschema in the venv)."""
    if "anyOf" in schema:
        errs = []
        for alt in schema["anyOf"]:
            try:
                return validate(alt, v, where)
            except AssertionError as e:
                errs.append(str(e))
        raise AssertionError(f"{where}: {v!r} matches no anyOf branch: {errs}")
    if "enum" in schema:
        assert v in schema["enum"], f"{where}: {v!r} not in {schema['enum']}"
    t = schema.get("type")
    if t == "object":
        assert isinstance(v, dict), f"{where}: {v!r} is not an object"
        for k in schema.get("required", []):
            assert k in v, f"{where}: required {k!r} missing in {v!r}"
        for k, x in v.items():
            assert k in schema["properties"], f"{where}: unknown key {k!r}"
            validate(schema["properties"][k], x, f"{where}.{k}")
    elif t == "array":
        assert isinstance(v, list), f"{where}: {v!r} is not an array"
        assert len(v) <= schema.get("maxItems", len(v))
        for i, x in enumerate(v):
            validate(schema["items"], x, f"{where}[{i}]")
    elif t == "string":
        assert isinstance(v, str), f"{where}: {v!r} is not a string"
        assert len(v) <= schema.get("maxLength", len(v)), f"{where}: {v!r} longer than {schema['maxLength']}"
    elif t == "integer":
        assert isinstance(v, int) and not isinstance(v, bool), f"{where}: {v!r} is not an integer"
    elif t == "number":
        assert isinstance(v, (int, float)) and not isinstance(v, bool), f"{where}: {v!r} is not a number"
    elif t == "boolean":
        assert isinstance(v, bool), f"{where}: {v!r} is not a boolean"
    elif t == "null":
        assert v is None, f"{where}: {v!r} is not null"


def check_call(name, args, want=None):
    assert name in SCHEMAS, name
    if want:
        assert name == want
    validate(SCHEMAS[name], args)


def oa_tools():
    return [{"type": "function", "function": {"name": n, "description": n, "parameters": s}} for n, s in SCHEMAS.items()]


def an_tools():
    return [{"name": n, "description": n, "input_schema": s} for n, s in SCHEMAS.items()]


def rs_tools():
    return [{"type": "function", "name": n, "description": n, "parameters": s} for n, s in SCHEMAS.items()]


@pytest.fixture(scope="module", params=list(MODELS))
def fam(request):
    model = MODELS[request.param]
    if not (model / "config.json").exists():
        pytest.skip(f"no {model}")
    s = ServerProc("--model", str(model), "--thinking", "off", "--threads", "1", "--sampler.seed", "7",
                   exe="ds4server", subcommand="serve")
    s.family = request.param
    yield s
    assert s.stop() == 0, "".join(s.lines[-20:])


def clients(url):
    return (openai.OpenAI(base_url=url + "/v1", api_key="x", timeout=120, max_retries=0),
            anthropic.Anthropic(base_url=url, api_key="x", timeout=120, max_retries=0))


OA_CHOICES = {"required": "required", "named": {"type": "function", "function": {"name": "get_weather"}},
              "none": "none", "auto": "auto"}


@pytest.mark.parametrize("mode", list(OA_CHOICES))
def test_chat_completions(fam, mode):
    oa, _ = clients(fam.url)
    c = oa.chat.completions.create(model="m", max_tokens=MAX, messages=[{"role": "user", "content": PROMPT}],
                                   tools=oa_tools(), tool_choice=OA_CHOICES[mode])
    ch = c.choices[0]
    calls = ch.message.tool_calls or []
    extra = c.usage.model_extra
    if mode in ("required", "named"):
        assert ch.finish_reason == "tool_calls", (ch, fam.family)
        assert calls
        for tc in calls:
            check_call(tc.function.name, json.loads(tc.function.arguments), "get_weather" if mode == "named" else None)
        if mode == "named":
            assert len(calls) == 1
        assert extra["constrained_steps"] == c.usage.completion_tokens
    elif mode == "none":
        assert not calls and ch.finish_reason in ("stop", "length")
        assert extra["constrained_steps"] == c.usage.completion_tokens
    else:
        assert extra["constrained_steps"] == 0  # auto is left to the model


@pytest.mark.parametrize("mode", ["any", "tool", "none"])
def test_anthropic_messages(fam, mode):
    _, an = clients(fam.url)
    choice = {"any": {"type": "any"}, "tool": {"type": "tool", "name": "make_plan"}, "none": {"type": "none"}}[mode]
    m = an.messages.create(model="m", max_tokens=MAX, messages=[{"role": "user", "content": PROMPT}],
                           tools=an_tools(), tool_choice=choice)
    uses = [b for b in m.content if b.type == "tool_use"]
    if mode == "none":
        assert not uses and m.stop_reason in ("end_turn", "max_tokens")
        return
    assert m.stop_reason == "tool_use", m
    for b in uses:
        check_call(b.name, b.input, "make_plan" if mode == "tool" else None)
    if mode == "tool":
        assert len(uses) == 1


@pytest.mark.parametrize("mode", ["required", "named", "none"])
def test_responses(fam, mode):
    oa, _ = clients(fam.url)
    choice = {"required": "required", "named": {"type": "function", "name": "noop"}, "none": "none"}[mode]
    r = oa.responses.create(model="m", max_output_tokens=MAX, input=PROMPT, tools=rs_tools(), tool_choice=choice)
    calls = [o for o in r.output if o.type == "function_call"]
    if mode == "none":
        assert not calls
        return
    assert r.status == "completed" and calls, r
    for o in calls:
        check_call(o.name, json.loads(o.arguments), "noop" if mode == "named" else None)
    if mode == "named":
        assert [o.arguments for o in calls] == ["{}"]
        assert r.tool_choice.name == "noop"


def test_streams_carry_the_forced_calls(fam):
    oa, an = clients(fam.url)
    stream = oa.chat.completions.create(model="m", max_tokens=MAX, messages=[{"role": "user", "content": PROMPT}],
                                        tools=oa_tools(), tool_choice="required", stream=True)
    calls, finish = [], None
    for ch in stream:
        if ch.choices:
            calls += ch.choices[0].delta.tool_calls or []
            finish = ch.choices[0].finish_reason or finish
    assert finish == "tool_calls" and calls
    for tc in calls:
        check_call(tc.function.name, json.loads(tc.function.arguments))
    with an.messages.stream(model="m", max_tokens=MAX, messages=[{"role": "user", "content": PROMPT}],
                            tools=an_tools(), tool_choice={"type": "tool", "name": "get_weather"}) as s:
        final = s.get_final_message()
    uses = [b for b in final.content if b.type == "tool_use"]
    assert final.stop_reason == "tool_use" and len(uses) == 1
    check_call(uses[0].name, uses[0].input, "get_weather")
    events = list(oa.responses.create(model="m", max_output_tokens=MAX, input=PROMPT, tools=rs_tools(),
                                      tool_choice={"type": "function", "name": "make_plan"}, stream=True))
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert len(done) == 1 and done[0].name == "make_plan"
    check_call("make_plan", json.loads(done[0].arguments))


# A call that cannot end within CUT tokens: its one argument needs 200 characters at least.
NOTE = {"type": "object", "properties": {"text": {"type": "string", "minLength": 200}}, "required": ["text"]}
OPEN = {"qwen35": "<tool_call>", "glm5": "<tool_call>", "deepseek_v4": "<｜DSML｜tool_calls>"}
CUT = 20  # past every family's opening marker (DSML's takes up to 16 byte tokens)


def test_cut_off_call_is_an_error_not_text(fam):
    """max_tokens ends the turn inside the forced call: the finish says so, an error field
    carries what was written, and no text or call comes back."""
    oa, an = clients(fam.url)
    msgs = [{"role": "user", "content": PROMPT}]
    c = oa.chat.completions.create(model="m", max_tokens=CUT, messages=msgs,
                                   tools=[{"type": "function", "function": {"name": "note", "parameters": NOTE}}],
                                   tool_choice={"type": "function", "function": {"name": "note"}})
    ch = c.choices[0]
    assert ch.finish_reason == "length"
    assert not ch.message.tool_calls and not ch.message.content
    err = ch.model_extra["tool_call_error"]
    assert err["type"] == "truncated" and err["text"].startswith(OPEN[fam.family]), err
    m = an.messages.create(model="m", max_tokens=CUT, messages=msgs, tools=[{"name": "note", "input_schema": NOTE}],
                           tool_choice={"type": "any"})
    assert m.stop_reason == "max_tokens"
    assert not [b for b in m.content if b.type in ("tool_use", "text")]
    assert m.model_extra["tool_call_error"]["type"] == "truncated"
    r = oa.responses.create(model="m", max_output_tokens=CUT, input=PROMPT,
                            tools=[{"type": "function", "name": "note", "parameters": NOTE}], tool_choice="required")
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert not r.output
    assert r.model_extra["tool_call_error"]["type"] == "truncated"
    # Cut before the opening marker is even complete: still the missing call, not text.
    one = oa.chat.completions.create(model="m", max_tokens=1, messages=msgs, tools=oa_tools(), tool_choice="required")
    assert one.choices[0].finish_reason == "length"
    assert one.choices[0].model_extra["tool_call_error"]["type"] == "truncated"


def post(url, path, body):
    return httpx.post(url + path, json=body, timeout=60)


def test_bad_tools_and_choices_are_400s_naming_the_field(fam):
    msgs = [{"role": "user", "content": "hi"}]
    fn = {"type": "function", "function": {"name": "f", "parameters": NOOP}}
    cases = [
        ("/v1/chat/completions", {"messages": msgs, "tools": [fn, {"type": "bogus"}]}, "tools[1].type"),
        ("/v1/chat/completions", {"messages": msgs, "tools": [fn], "tool_choice": "sometimes"}, "tool_choice"),
        ("/v1/chat/completions", {"messages": msgs, "tool_choice": "required"}, "tool_choice"),
        ("/v1/chat/completions", {"messages": msgs, "tools": [fn],
                                  "tool_choice": {"type": "function", "function": {"name": "g"}}}, "tool_choice"),
        ("/v1/chat/completions", {"messages": msgs, "tools": [{"type": "function"}]}, "tools[0].function"),
        ("/v1/chat/completions", {"messages": msgs, "tools": [fn, {"type": "function", "function": {"name": 5}}]},
         "tools[1].function.name"),
        ("/v1/chat/completions", {"messages": msgs, "tools": [{"type": "function", "function": {"name": ""}}]},
         "tools[0].function.name"),
        ("/v1/chat/completions", {"messages": msgs, "tools": [{"type": "function", "function": {
            "name": "f", "parameters": "x"}}]}, "tools[0].function.parameters"),
        ("/v1/chat/completions", {"messages": msgs, "tools": [{"type": "function", "function": {
            "name": "f", "description": 5}}]}, "tools[0].function.description"),
        ("/v1/chat/completions", {"messages": msgs, "speculative": {"depth": 9}}, "speculative.depth"),
        ("/v1/chat/completions", {"messages": msgs, "speculative": {"on": True}}, "speculative.on"),
        ("/v1/responses", {"input": "hi", "tools": [{"type": "bogus"}]}, "tools[0].type"),
        ("/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": "f"}],
                           "tool_choice": {"type": "function", "name": "g"}}, "tool_choice"),
    ]
    for path, body, param in cases:
        r = post(fam.url, path, {"model": "m", "max_tokens": 4, **body} if "chat" in path else {"model": "m", **body})
        assert r.status_code == 400, (path, body, r.text)
        assert r.json()["error"]["param"] == param, r.text
    for body, word in [({"tools": [{"type": "bogus", "name": "x"}]}, "tools[0].type"),
                       ({"tools": [{"name": "f", "input_schema": NOOP}], "tool_choice": {"type": "sometimes"}}, "tool_choice.type"),
                       ({"tools": [{"name": "f", "input_schema": NOOP}], "tool_choice": {"type": "tool", "name": "g"}}, "'g'")]:
        r = post(fam.url, "/v1/messages", {"model": "m", "max_tokens": 4, "messages": msgs, **body})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["type"] == "invalid_request_error" and word in r.json()["error"]["message"], r.text


def test_speculative_request_extension(fam):
    """On the default Qwen model (MTP head, speculation on by default): off per request, another
    depth per request (same greedy text), off for constrained turns (reported). On models
    without a draft head only `enabled: false` is accepted."""
    oa, _ = clients(fam.url)
    base = dict(model="m", max_tokens=24, messages=[{"role": "user", "content": PROMPT}], temperature=0)

    def run(**kw):
        c = oa.chat.completions.create(**base, **kw)
        return c.choices[0].message.content, c.usage.model_extra["speculative"]

    text_off, off = run(extra_body={"speculative": {"enabled": False}})
    assert off["mode"] == "target_only" and off["drafted"] == 0
    if fam.family != "qwen35":
        assert off["off_reason"] == ""  # nothing to switch off
        with pytest.raises(openai.BadRequestError):
            run(extra_body={"speculative": {"enabled": True}})
        return
    assert off["off_reason"] == "request"
    text_d2, d2 = run(extra_body={"speculative": {"depth": 2}})
    assert d2["mode"] == "greedy" and d2["depth"] == 2 and d2["drafted"] > 0
    assert text_d2 == text_off  # greedy speculation gives the AR text
    # A request that does not say follows the server's default: the cost model's decision
    # (test_spec_default.py), read just before the turn that decides.
    on = httpx.get(fam.url + "/health", timeout=10).json()["speculation"]["default"]
    _, default = run()
    assert default["depth"] == (3 if on else 0)
    c = oa.chat.completions.create(**base, tools=oa_tools(), tool_choice="required")
    spec = c.usage.model_extra["speculative"]
    assert spec["mode"] == "target_only" and spec["off_reason"] == "constrained" and spec["drafted"] == 0
    an = anthropic.Anthropic(base_url=fam.url, api_key="x", timeout=120, max_retries=0)
    m = an.messages.create(model="m", max_tokens=24, messages=[{"role": "user", "content": PROMPT}],
                           extra_body={"temperature": 0, "speculative": {"enabled": False}})
    assert m.usage.model_extra["speculative"]["off_reason"] == "request"
    r = oa.responses.create(model="m", max_output_tokens=24, input=PROMPT, temperature=0,
                            extra_body={"speculative": {"depth": 1}})
    assert r.usage.model_extra["speculative"]["depth"] == 1


UNSATISFIABLE = {"type": "object", "properties": {"s": {"type": "string", "minLength": 1, "maxLength": 0}},
                 "required": ["s"]}


def test_an_unsatisfiable_forced_schema_is_a_400_before_any_stream(fam):
    """A forced call whose schema no value satisfies would reach a dead end mid-turn, after the
    200 and the stream's first events. It is refused up front, streaming or not, in each
    protocol's error shape. An optional property with that schema is refused too: the grammar
    may open it and then dead-end (it did: a 500). tool_choice auto never forces it."""
    msg = ("tool_choice forces a call of 'f', but a part of its parameters schema has no valid value "
           "(e.g. minLength over maxLength): the constrained decoder could never complete that call")
    oa_body = {"model": "m", "max_tokens": MAX, "messages": [{"role": "user", "content": PROMPT}],
               "tools": [{"type": "function", "function": {"name": "f", "parameters": UNSATISFIABLE}}],
               "tool_choice": "required"}
    an_body = {"model": "m", "max_tokens": MAX, "messages": [{"role": "user", "content": PROMPT}],
               "tools": [{"name": "f", "input_schema": UNSATISFIABLE}], "tool_choice": {"type": "tool", "name": "f"}}
    rs_body = {"model": "m", "max_output_tokens": MAX, "input": PROMPT,
               "tools": [{"type": "function", "name": "f", "parameters": UNSATISFIABLE}], "tool_choice": "required"}
    for stream in (True, False):
        for path, body in (("/v1/chat/completions", oa_body), ("/v1/responses", rs_body)):
            r = post(fam.url, path, {**body, "stream": stream})
            assert r.status_code == 400, r.text
            assert r.headers["content-type"] == "application/json"
            assert r.json() == {"error": {"message": msg, "type": "invalid_request_error", "param": "tool_choice",
                                          "code": None}}
        r = post(fam.url, "/v1/messages", {**an_body, "stream": stream})
        assert r.status_code == 400, r.text
        assert r.json() == {"type": "error", "error": {"type": "invalid_request_error", "message": msg}}
    # A recursive required property has no finite value either.
    loop = {"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}
    r = post(fam.url, "/v1/chat/completions", {**oa_body, "tools": [{"type": "function", "function": {"name": "f", "parameters": loop}}]})
    assert r.status_code == 400 and r.json()["error"]["message"] == msg, r.text
    optional = {"type": "object", "properties": {"s": UNSATISFIABLE["properties"]["s"], "t": {"type": "string"}}}
    r = post(fam.url, "/v1/chat/completions",
             {**oa_body, "tools": [{"type": "function", "function": {"name": "f", "parameters": optional}}]})
    assert r.status_code == 400 and r.json()["error"]["message"] == msg, r.text
    r = post(fam.url, "/v1/chat/completions", {**oa_body, "tool_choice": "auto", "max_tokens": 8})
    assert r.status_code == 200, r.text
    # The server serves on.
    ok = post(fam.url, "/v1/chat/completions", {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
    assert ok.status_code == 200


def nested(levels):
    """A required parameter that must nest `levels` arrays: [[...["x"]...]]."""
    s = {"enum": ["x"]}
    for _ in range(levels):
        s = {"type": "array", "items": s, "minItems": 1, "maxItems": 1}
    return {"type": "object", "properties": {"a": s}, "required": ["a"]}


def test_a_forced_schema_nested_past_the_grammar_is_a_400(fam):
    """The grammar's frame stack holds 24 levels of a parameter's JSON: a forced call that must
    nest deeper reached a dead end mid-turn (a 500 "constrained decoding reached a dead end",
    or an error event after a stream's 200). Refused up front; 24 levels are written."""
    body = {"model": "m", "max_tokens": MAX, "messages": [{"role": "user", "content": PROMPT}], "tool_choice": "required"}
    for stream in (False, True):
        r = post(fam.url, "/v1/chat/completions",
                 {**body, "stream": stream, "tools": [{"type": "function", "function": {"name": "f", "parameters": nested(25)}}]})
        assert r.status_code == 400, r.text
        assert r.json() == {"error": {"message": "tool_choice forces a call of 'f', but its required parameter 'a' nests "
                                                 "arrays / objects 25 levels deep; the constrained decoder writes at most 24",
                                      "type": "invalid_request_error", "param": "tool_choice", "code": None}}
    r = post(fam.url, "/v1/chat/completions",
             {**body, "tools": [{"type": "function", "function": {"name": "f", "parameters": nested(24)}}]})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    deep = ["x"]
    for _ in range(23):
        deep = [deep]
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {"a": deep}
