"""A tiny llama whose vocabulary has Mistral's tool-call marker as a control token (`[TOOL_CALLS]`, as Mistral's
vocabularies have it) and a Mistral-style chat template that renders tools: the case where a reply's decoder
must show a control token for the tool-call parser to read it."""

from __future__ import annotations

import dataclasses
import os

from llamay.gguf import GGUFValueType
from llamay.gguf.reader import GGUFArray
from llamay.tokenizer.vocab import TokenType
from tests.models import tiny

MARKER = "[TOOL_CALLS]"
MISTRAL = """{%- for m in messages %}{%- if m.role == 'user' %}{% if loop.last and tools %}[AVAILABLE_TOOLS] \
{{ tools | tojson }}[/AVAILABLE_TOOLS]{% endif %}[INST] {{ m.content }}[/INST]
{%- elif m.tool_calls %}[TOOL_CALLS] {{ m.tool_calls | map(attribute='function') | list | tojson }}</s>
{%- elif m.role == 'tool' %}[TOOL_RESULTS] {{ m.content }}[/TOOL_RESULTS]{%- else %}{{ m.content }}</s>{% endif %}\
{% endfor %}"""


def write_mistral_tools(path: str | os.PathLike[str], n_ctx: int = 2048) -> int:
    """Write the model to `path`; the marker's token id (the vocabulary's last, made a control token)."""
    saved = tiny.SPECS["llama"]
    tiny.SPECS["llama"] = dataclasses.replace(saved, n_ctx=n_ctx)  # tool prompts in a 512-token vocabulary are long
    try:
        w = tiny.build_tiny("llama")
    finally:
        tiny.SPECS["llama"] = saved
    for key, value in (("tokenizer.ggml.tokens", MARKER), ("tokenizer.ggml.token_type", int(TokenType.CONTROL))):
        vtype, arr = w.fields[key]
        items = list(arr)
        items[-1] = value
        w.fields[key] = (vtype, GGUFArray(arr.item_type, items))
    w.fields["tokenizer.chat_template"] = (GGUFValueType.STRING, MISTRAL)
    w.write(path)
    return len(items) - 1
