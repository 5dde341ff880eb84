"""The chat-template environment of Hugging Face transformers, rebuilt on jinja2 (a
reference for kiln's own evaluator; jinja2 is never a build or run dependency of kiln).

transformers (utils/chat_template_utils.py) renders with ImmutableSandboxedEnvironment
(trim_blocks=True, lstrip_blocks=True, extensions AssistantTracker ({% generation %}) and
loopcontrols), its own tojson filter (json.dumps, ensure_ascii=False, no HTML escaping),
and the globals raise_exception and strftime_now.
"""

import json
from datetime import datetime

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class _Generation(Extension):
    """{% generation %}...{% endgeneration %}: renders its body (transformers tracks its
    span for assistant masks, which changes nothing in the text)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def render(template, variables):
    return environment().from_string(template).render(**variables)


def render_chat(template, messages, add_generation_prompt, kwargs, special_tokens):
    """What apply_chat_template(..., tokenize=False) renders."""
    variables = dict(special_tokens)
    variables.update(messages=messages, tools=None, documents=None, add_generation_prompt=add_generation_prompt)
    variables.update(kwargs)
    return render(template, variables)
