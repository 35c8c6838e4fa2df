"""Chat templates: render `tokenizer.chat_template` the way Hugging Face `transformers` does.

A sandboxed, immutable jinja2 environment with `trim_blocks` and `lstrip_blocks`, the `loopcontrols` extension,
a `{% generation %}` block that just renders its body, `tojson` with HF's arguments (no HTML escaping,
`ensure_ascii=False`, optional `indent`), and the globals `raise_exception(msg)` and `strftime_now(fmt)`.
Render variables: `messages`, `add_generation_prompt`, `tools`, `documents`, the special tokens as strings
(`bos_token`, `eos_token`, ...) and any extra keyword (e.g. `enable_thinking`).

Any failure, at compile or render time, becomes a `ChatTemplateError` that names the problem and the template
line. A model without a template gets ChatML (what llama.cpp falls back to).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any

from ..errors import LlamayError

CHATML = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}{{- message['content'] -}}{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


class ChatTemplateError(LlamayError):
    """A chat template that does not compile or that fails (or raises) while rendering."""


@dataclass(frozen=True)
class ChatPreset:
    """What a stored model adds to every conversation (Ollama's SYSTEM and MESSAGE layers), as Ollama adds it:
    the preset messages go first, and the system prompt before them when the conversation does not open with a
    system message of its own."""

    system: str | None = None
    messages: tuple[dict[str, Any], ...] = ()

    def apply(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        out = [*self.messages, *messages]
        if self.system and not (messages and messages[0].get("role") == "system"):
            out.insert(0, {"role": "system", "content": self.system})
        return out


def _raise_exception(message: str) -> None:
    import jinja2

    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:  # fmt: skip
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> Any:
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationBlock(Extension):
        """`{% generation %}...{% endgeneration %}` (HF marks assistant text with it): render the body."""

        tags = frozenset({"generation"})

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller: Any) -> str:
            return caller()

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, loopcontrols], undefined=jinja2.Undefined
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def _template_line(tb: TracebackType | None) -> int | None:
    """The template line of the innermost frame jinja2 attributed to the template."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class ChatTemplate:
    def __init__(self, source: str, *, special_tokens: dict[str, str] | None = None, name: str = "chat template"):
        import jinja2

        self.source = source
        self.name = name
        self.special_tokens = dict(special_tokens or {})
        try:
            self._template = _environment().from_string(source)
        except jinja2.TemplateSyntaxError as e:
            raise ChatTemplateError(f"{name}: syntax error at line {e.lineno}: {e.message}") from None
        except (SyntaxError, RecursionError, MemoryError) as e:
            # Jinja compiles to Python: blocks nested past Python's limit (100 indents) fail there, not in Jinja
            raise ChatTemplateError(f"{name}: too deeply nested to compile ({type(e).__name__}: {e})") from None

    def render(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True,
               tools: list[dict[str, Any]] | None = None, documents: list[dict[str, Any]] | None = None,
               **extra: Any) -> str:  # fmt: skip
        variables = {**self.special_tokens, **extra}
        variables.update(messages=messages, add_generation_prompt=add_generation_prompt, tools=tools,
                         documents=documents)  # fmt: skip
        try:
            return self._template.render(**variables)
        except Exception as e:  # a template can fail in any way: report it, by line
            line = _template_line(e.__traceback__)
            where = f" at line {line}" if line else ""
            what = "raised" if type(e).__name__ == "TemplateError" else f"failed ({type(e).__name__})"
            raise ChatTemplateError(f"{self.name}{where} {what}: {e}") from None
