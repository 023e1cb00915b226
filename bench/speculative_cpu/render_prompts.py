"""Token ids of tools/train/eval.py's SPEC_PROMPTS rendered exactly as eval.py renders them
(tools/train/chat_template.jinja, thinking off: the assistant header ends with an empty
<think></think> block), one prompt per line. The torch acceptance figure in
models/default/README.md was measured on these prompts.

    .venv/bin/python bench/speculative_cpu/render_prompts.py > bench/speculative_cpu/chat_prompts.txt
"""
import ast
from pathlib import Path

import jinja2
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[2]


def spec_prompts():
    # Read the list literal from eval.py (importing it would need torch).
    src = (ROOT / "tools/train/eval.py").read_text()
    start = src.index("SPEC_PROMPTS = [") + len("SPEC_PROMPTS = ")
    end = src.index("]\nTEXT_PROMPTS") + 1
    return ast.literal_eval(src[start:end])


def main():
    tok = Tokenizer.from_file(str(ROOT / "models/default/tokenizer.json"))
    tmpl = jinja2.Environment().from_string((ROOT / "tools/train/chat_template.jinja").read_text())
    for msgs in spec_prompts():
        text = tmpl.render(messages=msgs, add_generation_prompt=True, enable_thinking=False, tools=None)
        print(" ".join(str(i) for i in tok.encode(text, add_special_tokens=False).ids))


if __name__ == "__main__":
    main()
