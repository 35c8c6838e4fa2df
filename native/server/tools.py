"""Chat messages into the shape chat templates expect, and tool calls out of generated text.

Templates that support tools (Qwen, Hermes, Llama 3.x, SmolLM3 ...) are given the request's `tools`; the model
then answers with calls written inside `<tool_call>...</tool_call>` (the Hermes convention most templates use)
or as a bare JSON object `{"name": ..., "arguments": ...}`. Both are recognised here; anything else is text.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"


def message_dicts(messages: list[Any]) -> list[dict[str, Any]]:
    """Pydantic chat messages (OpenAI or Ollama) as template-ready dicts: text parts joined, the `developer`
    role as `system`, tool-call arguments as objects."""
    out = []
    for m in messages:
        d: dict[str, Any] = {"role": "system" if m.role == "developer" else m.role, "content": _text(m.content)}
        if getattr(m, "name", None) or getattr(m, "tool_name", None):  # Ollama names a tool's result tool_name
            d["name"] = getattr(m, "name", None) or m.tool_name
        reasoning = getattr(m, "reasoning_content", None) or getattr(m, "thinking", None)
        if reasoning:  # an earlier reply's reasoning, as the templates that render it name it
            d["reasoning_content"] = reasoning
        if getattr(m, "tool_call_id", None):
            d["tool_call_id"] = m.tool_call_id
        if m.tool_calls:
            d["tool_calls"] = [_call_for_template(c) for c in m.tool_calls]
        out.append(d)
    return out


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.text for part in content)  # text parts only (the schema refuses others)


def _call_for_template(call: Any) -> dict[str, Any]:
    """A history's tool call (schemas.ToolCall) as sent, its arguments as an object where they are JSON text."""
    d = call.model_dump(exclude_unset=True)
    fn = d["function"]
    if isinstance(fn.get("arguments"), str):
        with contextlib.suppress(ValueError):
            fn["arguments"] = json.loads(fn["arguments"])
    return d


def parse_tool_calls(text: str, names: set[str]) -> tuple[str | None, list[dict[str, Any]]]:
    """(content left, calls) of a reply; calls name one of the request's tools, arguments as parsed JSON."""
    calls = []
    bodies, rest = _tagged(text)
    for body in bodies:
        call = _call(body, names)
        if call:
            calls.append(call)
    if calls:
        return rest.strip() or None, calls
    stripped = text.strip()
    if stripped.startswith("{"):
        call = _call(stripped, names)
        if call:
            return None, [call]
    return text, []


def _tagged(text: str) -> tuple[list[str], str]:
    """The bodies of `<tool_call>...</tool_call>` (an unclosed last one runs to the end) and the text around
    them, in one pass (a regex with a lazy group rescans to the end from every unclosed opening: quadratic)."""
    bodies, rest = [], []
    i = 0
    while True:
        start = text.find(OPEN, i)
        if start < 0:
            rest.append(text[i:])
            return bodies, "".join(rest)
        rest.append(text[i:start])
        end = text.find(CLOSE, start + len(OPEN))
        stop = len(text) if end < 0 else end
        bodies.append(text[start + len(OPEN) : stop].strip())
        if end < 0:
            return bodies, "".join(rest)
        i = end + len(CLOSE)


def _call(body: str, names: set[str]) -> dict[str, Any] | None:
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("name") not in names:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    return {"name": obj["name"], "arguments": args if isinstance(args, dict) else {"value": args}}


def openai_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], ensure_ascii=False)},
        }
        for c in calls
    ]


def ollama_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]
