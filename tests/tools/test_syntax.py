"""Which syntax a chat template's model writes its calls in (the templates' own give-away texts)."""

from __future__ import annotations

import pytest

from llamay.tools import GENERIC, HERMES, LLAMA3, MISTRAL, SYNTAXES, detect_syntax

# the lines of real templates that give their syntax away (Qwen 2.5, Llama 3.1, Mistral v0.3), and two without
QWEN = '{{- "\\n</tools>\\n\\nFor each function call, return a json object ... within <tool_call></tool_call>'
LLAMA31 = ('{{- \'Respond in the format {"name": function name, "parameters": dictionary of argument name and its '
           "value}.' }}{%- if builtin_tools is defined %}<|python_tag|>")  # fmt: skip
MISTRAL_V3 = "{%- if message.tool_calls is defined %}{{- '[TOOL_CALLS] [' }}"
CHATML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content']}}{% endfor %}"


@pytest.mark.parametrize(("template", "syntax"), [(QWEN, HERMES), (LLAMA31, LLAMA3), (MISTRAL_V3, MISTRAL),
                                                  (CHATML, GENERIC), (None, GENERIC), ("", GENERIC)])  # fmt: skip
def test_detection(template, syntax):
    assert detect_syntax(template) is syntax


def test_one_table():
    assert set(SYNTAXES) == {"hermes", "llama3", "mistral", "generic"}
    assert [s.name for s in SYNTAXES.values() if not s.native] == ["generic"]  # the one put into prompts
    for s in SYNTAXES.values():
        assert s.args_key in ("arguments", "parameters")
        assert all(marker for marker in s.detect)
