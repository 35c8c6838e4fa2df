"""A reply's tool calls in OpenAI's shapes: the whole message with its `tool_calls`, and the stream's deltas
(per call a first delta with index, id and name, then argument pieces). The server's OpenAI routes and the
browser's JavaScript API both speak them."""

from __future__ import annotations

import uuid
from typing import Any

from .parse import ToolStream, collect
from .plan import ToolPlan


def call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def finish_of(calls: list[dict[str, Any]], finish: str | None) -> str | None:
    """ "tool_calls" when the reply ended (not cut by max_tokens) with every call it began complete."""
    if calls and finish == "stop" and all(c["complete"] for c in calls):
        return "tool_calls"
    return finish


def openai_message(plan: ToolPlan, text: str, finish: str | None) -> tuple[dict[str, Any], str | None]:
    """The assistant message of a whole reply, and its finish_reason; a call cut short (max_tokens, a stop
    string) is left out: its arguments are no JSON."""
    stream = ToolStream(plan.syntax)
    content, calls = collect(stream.feed(text) + stream.end())
    out = [{"id": call_id(), "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
           for c in calls if c["complete"]]  # fmt: skip
    if not out:
        return {"role": "assistant", "content": content or ""}, finish
    return {"role": "assistant", "content": content, "tool_calls": out}, finish_of(calls, finish)


class OpenAIDeltas:
    """One choice's stream as OpenAI streams tool calls: content deltas, then per call a first delta with its
    index, id and name (arguments ""), then deltas of argument pieces."""

    def __init__(self, plan: ToolPlan) -> None:
        self.stream = ToolStream(plan.syntax)
        self.calls: list[dict[str, Any]] = []

    def feed(self, text: str, last: bool = False) -> dict[str, Any] | None:
        events = self.stream.feed(text) if text else []
        if last:
            events += self.stream.end()
        content: list[str] = []
        deltas: list[dict[str, Any]] = []
        for e in events:
            if e[0] == "content":
                content.append(e[1])
            elif e[0] == "name":
                self.calls.append({"name": e[2], "complete": False})
                deltas.append({"index": e[1], "id": call_id(), "type": "function",
                               "function": {"name": e[2], "arguments": ""}})  # fmt: skip
            elif e[0] == "args":
                if deltas and deltas[-1]["index"] == e[1]:
                    deltas[-1]["function"]["arguments"] += e[2]
                else:
                    deltas.append({"index": e[1], "function": {"arguments": e[2]}})
            elif e[0] == "end":
                self.calls[e[1]]["complete"] = True
        delta: dict[str, Any] = {}
        if content:
            delta["content"] = "".join(content)
        if deltas:
            delta["tool_calls"] = deltas
        return delta or None
