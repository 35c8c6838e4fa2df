"""The tool-call syntaxes models write, as data, and which one a chat template uses.

    hermes   <tool_call>\\n{"name": "f", "arguments": {...}}\\n</tool_call>      Qwen 2.5/3, Hermes, SmolLM3 ...
    llama3   {"name": "f", "parameters": {...}}                               Llama 3.1-3.3 (JSON tool calling)
    mistral  [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]             Mistral v0.3+, Mixtral, Nemo
    generic  {"tool_call": {"name": "f", "arguments": {...}}}                 llama-server's format for templates
             {"tool_calls": [{...}, ...]} | {"response": "text"}              that know no tools (put in the prompt)

Each syntax is a row of `SYNTAXES`: the marker that opens a call (None: the call is the reply's first JSON
object), the key of a call's arguments, whether several calls come as one JSON array or as repeated tagged
calls, and the texts of the template that give it away (`detect`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolSyntax:
    name: str
    opener: str | None  # the text that starts a call (None: the reply itself is JSON from its first byte)
    closer: str  # after each call object ("" for none)
    separator: str  # between two calls (tagged calls) or JSON array items
    args_key: str  # "arguments" or "parameters"
    array: bool  # the calls come as one JSON array after the opener (Mistral)
    parallel: bool  # can write several calls in one reply
    native: bool  # the chat template renders the tools itself (else the prompt gets them: `generic`)
    detect: tuple[str, ...] = ()  # any of these in a template's source: it writes this syntax


HERMES = ToolSyntax("hermes", "<tool_call>", "</tool_call>", "\n", "arguments", False, True, True,
                    ("<tool_call>",))  # fmt: skip
LLAMA3 = ToolSyntax("llama3", None, "", "", "parameters", False, False, True,
                    ("<|python_tag|>", '"parameters": dictionary of argument name'))  # fmt: skip
MISTRAL = ToolSyntax("mistral", "[TOOL_CALLS]", "", ",", "arguments", True, True, True, ("[TOOL_CALLS]",))
GENERIC = ToolSyntax("generic", None, "", ",", "arguments", False, True, False)

SYNTAXES: dict[str, ToolSyntax] = {s.name: s for s in (HERMES, LLAMA3, MISTRAL, GENERIC)}


def detect_syntax(template: str | None) -> ToolSyntax:
    """The syntax a chat template's model writes calls in: the first row whose marker the template holds, and
    llama-server's generic JSON format for a template that renders no tools (or one of no known syntax)."""
    source = template or ""
    for syntax in SYNTAXES.values():
        if any(marker in source for marker in syntax.detect):
            return syntax
    return GENERIC
