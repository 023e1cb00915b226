"""Renders a chat template the way transformers' apply_chat_template does (same Jinja
environment: sandboxed, trim_blocks, lstrip_blocks, loopcontrols, its tojson and
raise_exception), without needing transformers/torch in CI."""
import json

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def _raise(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


_ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
_ENV.filters["tojson"] = _tojson
_ENV.globals["raise_exception"] = _raise
_CACHE = {}


def render(template_text, messages, **kwargs):
    tmpl = _CACHE.get(template_text)
    if tmpl is None:
        tmpl = _CACHE[template_text] = _ENV.from_string(template_text)
    return tmpl.render(messages=messages, **kwargs)
