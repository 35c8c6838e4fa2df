"""The grammar of a reply that calls tools: the syntax's markers around JSON whose arguments follow each tool's
JSON Schema (as llama-server builds its tool grammars).

A call is the schema `{"name": {"const": NAME}, ARGS_KEY: PARAMETERS}` (name first, so a stream names the
function before its arguments); the tools are an `anyOf` of their calls. Each tool's own `$ref`s (`#`,
`#/$defs/x`, `#/properties/y`: any pointer) are moved under `#/$defs/tool-I...` of the combined document, so
they still point into the tool's parameters (not into the call around them). The
JSON grammar comes from the constraint engine's `schema_to_gbnf`; its `root` is renamed `tc-call` and the
syntax's rules (`tc-...`) are written around it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..constraints import LLAMACPP, Budget, ConstraintError, ConstraintLimits, schema_to_gbnf
from .syntax import ToolSyntax

ROOT = "tc-root"
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _gbnf_text(text: str) -> str:
    return json.dumps(text)  # a GBNF string literal is written as a JSON string


def _rebase(schema: Any, prefix: str, defs: dict[str, Any]) -> Any:
    """`schema` with its `$ref`s pointing under `#/$defs/{prefix}...`, its own $defs moved into `defs`."""

    whole = [False]  # `#` is referred to: the parameters are a definition too

    def ref(target: str) -> str:
        for key in ("#/$defs/", "#/definitions/"):
            if target.startswith(key):
                return f"#/$defs/{prefix}-{target[len(key) :]}"
        if target == "#" or target.startswith("#/"):  # (any other pointer: into the parameters themselves)
            whole[0] = True
            return f"#/$defs/{prefix}{target[1:]}"
        return target  # an anchor (the document's own) or another document's: the compiler resolves or names it

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(x) for x in node]
        if not isinstance(node, dict):
            return node
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out[k] = ref(v)
            elif k in ("$defs", "definitions") and isinstance(v, dict) and node is schema:
                for name, sub in v.items():
                    defs[f"{prefix}-{name}"] = walk(sub)
            else:
                out[k] = walk(v)
        return out

    body = walk(schema)
    if whole[0]:
        defs[prefix] = body
    return body


def call_schema(tools: list[dict[str, Any]], args_key: str) -> dict[str, Any]:
    """The JSON Schema of one call of any of `tools` (OpenAI's shape: {"type": "function", "function": {...}})."""
    defs: dict[str, Any] = {}
    calls = []
    for i, tool in enumerate(tools):
        fn = tool["function"]
        params = _rebase(fn.get("parameters") or NO_PARAMETERS, f"tool-{i}", defs)
        calls.append({"type": "object", "properties": {"name": {"const": fn["name"]}, args_key: params},
                      "required": ["name", args_key]})  # fmt: skip
    schema: dict[str, Any] = calls[0] if len(calls) == 1 else {"anyOf": calls}
    return {**schema, "$defs": defs} if defs else schema


def payload_schema(syntax: ToolSyntax, tools: list[dict[str, Any]], required: bool, parallel: bool) -> dict[str, Any]:
    """The JSON that follows the opener: one call (tagged syntaxes, Llama 3.x), an array of calls (Mistral), or
    llama-server's generic object (with a `response` alternative unless a call is required)."""
    call = call_schema(tools, syntax.args_key)
    defs = call.pop("$defs", None)
    if syntax.array:
        schema: dict[str, Any] = {"type": "array", "items": call, "minItems": 1}
        if not parallel:
            schema["maxItems"] = 1
    elif syntax.opener is None and not syntax.native:  # generic
        if parallel:
            schema = {"type": "object", "required": ["tool_calls"],
                      "properties": {"tool_calls": {"type": "array", "items": call, "minItems": 1}}}  # fmt: skip
        else:
            schema = {"type": "object", "properties": {"tool_call": call}, "required": ["tool_call"]}
        if not required:
            reply = {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"]}
            schema = {"anyOf": [schema, reply]}
    else:
        schema = call
    return {**schema, "$defs": defs} if defs else schema


def tool_gbnf(syntax: ToolSyntax, tools: list[dict[str, Any]], *, required: bool, parallel: bool,
              limits: ConstraintLimits | Budget | None = None) -> str:  # fmt: skip
    """GBNF (root `tc-root`) of a reply made of tool calls in `syntax` (or, for the generic format without a
    required call, of a `response`)."""
    budget = limits if isinstance(limits, Budget) else Budget(limits)
    for tool in tools:  # each on its own first: the compiler leaves out a failing anyOf branch, never a tool
        try:
            schema_to_gbnf(call_schema([tool], syntax.args_key), True, budget, **LLAMACPP)
        except ConstraintError as e:
            raise ConstraintError(f"tool {tool['function']['name']!r}: {e}") from None
    # llama.cpp's choices (closed objects, whole-match patterns): a model free to add properties rambles on
    json_rules = schema_to_gbnf(payload_schema(syntax, tools, required, parallel), True, budget, **LLAMACPP)
    json_rules = re.sub(r"^root ::=", "tc-call ::=", json_rules, count=1, flags=re.MULTILINE)
    if syntax.opener is None or syntax.array:
        prefix = _gbnf_text(syntax.opener) + ' " "? ' if syntax.opener else ""  # `[TOOL_CALLS] [` is seen too
        head = f"{ROOT} ::= {prefix}tc-call"
    else:  # tagged calls: opener, the call (its trailing space takes the newline), closer; repeated if parallel
        one = f'tc-one ::= {_gbnf_text(syntax.opener)} "\\n"? tc-call {_gbnf_text(syntax.closer)}'
        more = f" ({_gbnf_text(syntax.separator)} tc-one)*" if parallel else ""
        head = f"{ROOT} ::= tc-one{more}\n{one}"
    return f"{head}\n{json_rules}"
