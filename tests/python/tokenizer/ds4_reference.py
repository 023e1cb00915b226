"""antirez/ds4's DeepSeek V4 prompt renderer (ds4_server.c: render_chat_prompt_text and its
DSML helpers), transcribed to Python as the golden master for the DeepSeek template test.
Messages use the OpenAI shape; tool-call arguments are JSON text, tools are dicts."""
import json

BOS, EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
USER, ASSISTANT = "<｜User｜>", "<｜Assistant｜>"
PARAM_END = "</｜DSML｜parameter>"
MAX_PREFIX = (
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n")
TOOLS_HEADER = (
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user question. "
    "You can invoke tools by writing a \"<｜DSML｜tool_calls>\" block like the following:\n\n"
    "<｜DSML｜tool_calls>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as raw text and set `string=\"true\"`. "
    "Preserve characters such as `>`, `&`, and `&&` exactly; never replace normal string characters with XML "
    "or HTML entity escapes. "
    "Only if a string value itself contains the exact closing parameter tag `</｜DSML｜parameter>`, write that "
    "tag as `&lt;/｜DSML｜parameter>` inside the value. "
    "For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
    "<think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n")
TOOLS_FOOTER = ("\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool "
                "calls. Use the exact parameter names from the schemas.")


def _compact(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def _attr(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _tool_calls(calls):
    if not calls:
        return ""
    out = "\n\n<｜DSML｜tool_calls>\n"
    for c in calls:
        fn = c.get("function", c)
        out += '<｜DSML｜invoke name="' + _attr(fn["name"]) + '">\n'
        raw = fn.get("arguments", "")
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            args = None
        if isinstance(args, dict):
            for k, v in args.items():
                if isinstance(v, str):
                    out += f'<｜DSML｜parameter name="{_attr(k)}" string="true">'
                    out += v.replace(PARAM_END, "&lt;" + PARAM_END[1:])
                else:
                    out += f'<｜DSML｜parameter name="{_attr(k)}" string="false">'
                    out += _compact(v).replace(PARAM_END, "\\u003c" + PARAM_END[1:])
                out += PARAM_END + "\n"
        else:
            out += '<｜DSML｜parameter name="arguments" string="true">'
            out += str(raw).replace(PARAM_END, "&lt;" + PARAM_END[1:]) + PARAM_END + "\n"
        out += "</｜DSML｜invoke>\n"
    return out + "</｜DSML｜tool_calls>"


def render(messages, tools=None, thinking="on", add_generation_prompt=True):
    think = thinking != "off"
    is_sys = lambda r: r in ("system", "developer")  # noqa: E731
    is_tool = lambda r: r in ("tool", "function")  # noqa: E731
    schemas = "\n".join(_compact(t["function"]) if "function" in t else _compact(t) for t in (tools or []))
    system = ""
    if schemas:
        system = TOOLS_HEADER + schemas + TOOLS_FOOTER
    for m in messages:
        if is_sys(m["role"]):
            if system:
                system += "\n\n"
            system += m.get("content") or ""
    tool_context = bool(schemas) or any(
        (m["role"] == "assistant" and m.get("tool_calls")) or is_tool(m["role"]) for m in messages)
    last_user = max([i for i, m in enumerate(messages) if m["role"] == "user" or is_tool(m["role"])], default=-1)
    out = BOS + (MAX_PREFIX if thinking == "max" else "") + system
    pending_assistant = pending_tool = False
    for i, m in enumerate(messages):
        role, content = m["role"], m.get("content") or ""
        if is_sys(role):
            continue
        if role == "user":
            out += USER + content
            pending_assistant, pending_tool = True, False
        elif is_tool(role):
            if not pending_tool:
                out += USER
            out += "<tool_result>" + content.replace("</tool_result>", "&lt;/tool_result>") + "</tool_result>"
            pending_assistant = pending_tool = True
        elif role == "assistant":
            if pending_assistant:
                out += ASSISTANT
                if think and (tool_context or i > last_user):
                    out += "<think>" + (m.get("reasoning_content") or "") + "</think>"
                else:
                    out += "</think>"
            out += content + _tool_calls(m.get("tool_calls")) + EOS
            pending_assistant = pending_tool = False
    if pending_assistant and add_generation_prompt:
        out += ASSISTANT + ("<think>" if think else "</think>")
    return out
