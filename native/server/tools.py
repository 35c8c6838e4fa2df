"""Chat messages into the shape chat templates expect; tool calls of a reply in Ollama's shapes.

The syntaxes, grammars and parsing are the core's (`llamay.tools`): a template with tools of a known syntax
(Hermes/Qwen, Llama 3.x, Mistral) renders them itself, any other model gets llama-server's generic JSON format
in its prompt. Here: the request's fields into a `ToolPlan` (400s naming the field), the parser's events into
Ollama's `message.tool_calls` (arguments as objects); OpenAI's shapes are the core's (`llamay.tools.openai`).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from llamay.tokenizer import StreamDecoder
from llamay.tools import ToolPlan, ToolRequestError, ToolStream, collect, plan_tools

from .errors import bad_request


def message_dicts(messages: list[Any]) -> list[dict[str, Any]]:
    """Pydantic chat messages (OpenAI or Ollama) as template-ready dicts: text parts joined, the `developer`
    role as `system`, tool-call arguments as objects."""
    out = []
    for m in messages:
        d: dict[str, Any] = {"role": "system" if m.role == "developer" else m.role, "content": _text(m.content)}
        name = getattr(m, "name", None) or getattr(m, "tool_name", None)  # Ollama names a result's tool so
        if name:
            d["name"] = name
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


def plan_for(template: str | None, tools: list[Any] | None, tool_choice: Any = None,
             parallel: bool | None = None) -> ToolPlan | None:  # fmt: skip
    """The request's tool plan (None: no tool may be called); what cannot be honoured is a 400 naming it."""
    specs = [t.model_dump(exclude_none=True) for t in tools] if tools else None
    try:
        return plan_tools(template, specs, tool_choice, parallel)
    except ToolRequestError as e:
        raise bad_request(str(e), e.field, "invalid_tools") from None


def reply_decoder(tokenizer: Any, plan: ToolPlan | None) -> StreamDecoder:
    """The streaming decoder of a reply: with tools, the plan's (`ToolPlan.decoder`, the library's too)."""
    return plan.decoder(tokenizer) if plan is not None else tokenizer.detokenizer()


def ollama_message(plan: ToolPlan, text: str) -> dict[str, Any]:
    stream = ToolStream(plan.syntax)
    content, calls = collect(stream.feed(text) + stream.end())
    message: dict[str, Any] = {"role": "assistant", "content": content or ""}
    done = ollama_calls([c for c in calls if c["complete"]])
    if done:
        message["tool_calls"] = done
    return message


def ollama_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Complete calls in Ollama's shape: arguments as an object."""
    return [{"function": {"name": c["name"], "arguments": json.loads(c["arguments"])}} for c in calls]


class OllamaPieces:
    """One reply's stream for Ollama: content as it comes, each call in a message of its own once complete."""

    def __init__(self, plan: ToolPlan) -> None:
        self.stream = ToolStream(plan.syntax)
        self.calls: list[dict[str, Any]] = []

    def feed(self, text: str, last: bool = False) -> tuple[str, list[dict[str, Any]]]:
        events = self.stream.feed(text) if text else []
        if last:
            events += self.stream.end()
        content, done = [], []
        for e in events:
            if e[0] == "content":
                content.append(e[1])
            elif e[0] == "name":
                self.calls.append({"name": e[2], "arguments": "", "complete": False})
            elif e[0] == "args":
                self.calls[e[1]]["arguments"] += e[2]
            elif e[0] == "end":
                self.calls[e[1]]["complete"] = True
                done.append(self.calls[e[1]])
        return "".join(content), ollama_calls(done)
