"""Chat templates: the SmolLM2 template renders what llama.cpp's /apply-template renders (golden below; the live
comparison is in test_llamacpp.py) and what Hugging Face's renderer gives; errors name the template line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llamay.tokenizer import ChatTemplate, ChatTemplateError
from tests.tokenizer.vocabs import tokenizer

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "Name three colours."},
]
# llama.cpp's /apply-template for CONVERSATION on SmolLM2-135M-Instruct (xllamacpp 2026.10)
SMOLLM2_PROMPT = (
    "<|im_start|>system\nYou are terse.<|im_end|>\n"
    "<|im_start|>user\nHi<|im_end|>\n"
    "<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"
    "<|im_start|>user\nName three colours.<|im_end|>\n"
    "<|im_start|>assistant\n"
)


def hf_render(source: str, messages: list[dict[str, Any]], **variables: Any) -> str:
    """Hugging Face transformers' renderer (`_compile_jinja_template`), restated: the reference."""
    from jinja2.exceptions import TemplateError
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None,
               sort_keys: bool = False) -> str:  # fmt: skip
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source).render(messages=messages, **variables)


def test_smollm2_multi_turn_with_system() -> None:
    assert tokenizer("smollm2").apply_chat_template(CONVERSATION) == SMOLLM2_PROMPT


def test_smollm2_default_system_prompt_and_no_generation_prompt() -> None:
    out = tokenizer("smollm2").apply_chat_template(CONVERSATION[1:2], add_generation_prompt=False)
    assert out == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
    )


@pytest.mark.parametrize("name", ["smollm2", "phi-3"])
@pytest.mark.parametrize("generation", [True, False])
def test_matches_hf_renderer(name: str, generation: bool) -> None:
    tok = tokenizer(name)
    source = tok.chat_template_source
    expected = hf_render(
        source, CONVERSATION, add_generation_prompt=generation, bos_token=tok.token_text(tok.bos_id),
        eos_token=tok.token_text(tok.eos_id), tools=None, documents=None,
    )  # fmt: skip
    assert tok.apply_chat_template(CONVERSATION, add_generation_prompt=generation) == expected


def test_bos_token_is_available() -> None:
    assert tokenizer("phi-3").apply_chat_template(CONVERSATION[1:2]).startswith("<s><|user|>\nHi<|end|>")


def test_fallback_is_chatml() -> None:
    tok = tokenizer("gpt-2")
    assert tok.chat_template_source is None
    assert tok.apply_chat_template([{"role": "user", "content": "Hi"}]) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


TOOLS_TEMPLATE = """
{%- if tools %}{{ 'Tools: ' + tools | tojson + '\\n' }}{% endif %}
{%- for m in messages %}
{%- if m.role == 'tool' %}{{ 'tool> ' + m.content | tojson(indent=2) }}
{%- elif m.tool_calls %}{% for c in m.tool_calls %}{{ 'call ' + c.function.name + '\\n' }}{% endfor %}
{%- else %}{{ m.role + ': ' + m.content + '\\n' }}{% endif %}
{%- if loop.index == 9 %}{% break %}{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}{% generation %}assistant:{% endgeneration %}{% endif %}"""
TOOLS = [{"type": "function", "function": {"name": "météo", "parameters": {"city": "<str>"}}}]
TOOL_MESSAGES = [
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "tool_calls": [{"function": {"name": "météo", "arguments": {"city": "Zürich"}}}]},
    {"role": "tool", "content": {"temp": "12°C"}},
]


def test_tools_tojson_and_generation_block() -> None:
    out = ChatTemplate(TOOLS_TEMPLATE).render(TOOL_MESSAGES, tools=TOOLS)
    assert out == (
        'Tools: [{"type": "function", "function": {"name": "météo", "parameters": {"city": "<str>"}}}]\n'
        "user: Weather in Zürich?\ncall météo\n"
        'tool> {\n  "temp": "12°C"\n}assistant:'
    )


def test_raise_exception_names_the_line() -> None:
    template = ChatTemplate("{% for m in messages %}\n{% if m.role == 'bad' %}\n{{ raise_exception('no bad roles') }}"
                            "{% endif %}{% endfor %}")  # fmt: skip
    with pytest.raises(ChatTemplateError, match=r"at line 3 raised: no bad roles"):
        template.render([{"role": "bad", "content": ""}])


def test_syntax_error_names_the_line() -> None:
    with pytest.raises(ChatTemplateError, match=r"syntax error at line 2"):
        ChatTemplate("{% for m in messages %}\n{{ m.content }\n{% endfor %}")


def test_failures_while_rendering_are_reported() -> None:
    with pytest.raises(ChatTemplateError, match="failed"):
        ChatTemplate("{{ messages[0].content + 1 }}").render([{"role": "user", "content": "x"}])
    with pytest.raises(ChatTemplateError, match="failed"):
        ChatTemplate("{{ ''.__class__.__mro__ }}").render([])  # the sandbox refuses


def test_strftime_now_and_extra_variables() -> None:
    out = ChatTemplate("{{ strftime_now('%Y') }} {{ enable_thinking }}").render([], enable_thinking=False)
    year, flag = out.split()
    assert year.isdigit() and len(year) == 4 and flag == "False"
