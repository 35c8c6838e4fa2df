"""What a request's `tools`, `tool_choice` and `parallel_tool_calls` make of a chat: the messages and tools the
template renders, the constraint sampling follows, and the parser of the reply.

    plan = plan_tools(template_source, tools, "required", parallel=True)     # None for no tools / "none"
    text = tokenizer.apply_chat_template(plan.messages(msgs), tools=plan.template_tools)
    sampler = Sampler(cfg, constraint=plan.constraint(tokenizer))
    content, calls = parse_reply(plan.syntax, reply)

`tool_choice`: "auto" lets the model answer in text or call; a call, once begun, follows the schemas (a grammar
from the syntax's trigger on, see lazy.py). "required" and a named tool constrain the whole reply to calls (of
that tool). The generic format is always constrained: the reply is JSON from its first byte (llama-server's way).
A tool's JSON Schema the constraint engine cannot compile is an error naming the tool (never a silently loose
call).
"""

from __future__ import annotations

import json
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from ..constraints import ConstraintVocab, grammar_constraint
from ..errors import LlamayError
from ..tokenizer.stream import StreamDecoder
from .grammar import ROOT, tool_gbnf
from .lazy import LazyConstraint
from .syntax import ToolSyntax, detect_syntax

CHOICES = ("none", "auto", "required")
GENERIC_INSTRUCTION = (
    "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` (a reply to "
    "the user's request)"
)


class ToolRequestError(LlamayError):
    """A request's tools or tool_choice that cannot be honoured; `field` names the request field."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ToolPlan:
    syntax: ToolSyntax
    tools: tuple[dict[str, Any], ...]  # OpenAI's shape, those the reply may call (a named choice: that one)
    offered: tuple[dict[str, Any], ...]  # every tool of the request (what the prompt describes)
    required: bool
    parallel: bool

    @property
    def names(self) -> frozenset[str]:
        return frozenset(t["function"]["name"] for t in self.tools)

    @property
    def template_tools(self) -> list[dict[str, Any]] | None:
        """The `tools` the chat template renders (None for the generic format: the prompt describes them)."""
        return list(self.offered) if self.syntax.native else None

    @property
    def prompt_chars(self) -> int:
        """Characters the tools add to the prompt (at least their JSON), for the length precheck."""
        return len(json.dumps(list(self.offered), ensure_ascii=False)) + len(GENERIC_INSTRUCTION)

    # -- the prompt --------------------------------------------------------------------------------------------

    def messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The messages as the template gets them: as given for native syntaxes; for the generic format, the
        tools and the reply's format in the system message, earlier calls and results written as that format."""
        if self.syntax.native:
            return messages
        out: list[dict[str, Any]] = []
        for m in messages:
            turn = _generic_turn(m, messages)
            if m.get("role") == "tool" and out and out[-1].get("tool_results"):
                # results of one turn's calls in one user turn (templates that want roles to alternate)
                out[-1] = {**out[-1], "content": f"{out[-1]['content']}\n{turn['content']}"}
                continue
            out.append({**turn, "tool_results": True} if m.get("role") == "tool" else turn)
        out = [{k: v for k, v in m.items() if k != "tool_results"} for m in out]
        note = self._instruction()
        if out and out[0]["role"] == "system":
            out[0] = {**out[0], "content": f"{out[0].get('content') or ''}\n\n{note}".lstrip()}
        else:
            out.insert(0, {"role": "system", "content": note})
        return out

    def _instruction(self) -> str:
        described = json.dumps([t["function"] for t in self.offered], ensure_ascii=False)  # compact: fewer tokens
        one = '{"tool_call": {"name": "NAME", "arguments": {...}}}'
        many = '{"tool_calls": [{"name": "NAME", "arguments": {...}}, ...]}'
        shape = many if self.parallel else one
        how = (f"Respond in JSON format with `tool_calls`: {shape}" if self.required and self.parallel
               else f"Respond in JSON format with `tool_call`: {shape}" if self.required
               else f"{GENERIC_INSTRUCTION}: {shape} or {{\"response\": \"...\"}}")  # fmt: skip
        return f"You can call these tools:\n{described}\n\n{how}"

    # -- the constraint ----------------------------------------------------------------------------------------

    def gbnf(self) -> str:
        return tool_gbnf(self.syntax, list(self.tools), required=self.required, parallel=self.parallel)

    def shown_tokens(self, tokenizer: Any) -> frozenset[int]:
        """Control tokens that are this syntax's markers (`[TOOL_CALLS]` of Mistral's vocabularies): the reply's
        text shows them, the grammar may write them."""
        return _marker_tokens(tokenizer, self.syntax)

    def decoder(self, tokenizer: Any) -> StreamDecoder:
        """The streaming decoder of a reply: this syntax's control-token markers show as their text (the parser
        reads `[TOOL_CALLS]`), other control tokens as nothing. The server and the library decode with it, so
        their parsers read the same text."""
        shown = self.shown_tokens(tokenizer)
        if not shown:
            return tokenizer.detokenizer()
        return StreamDecoder(lambda i: tokenizer.token_bytes(i, i in shown))

    def constraint(self, tokenizer: Any) -> Any:
        """The grammar of the reply over the tokenizer's vocabulary: whole for required/named calls and the
        generic format, from the trigger on for "auto"."""
        try:
            inner = grammar_constraint(self.gbnf(), tool_vocab(tokenizer, self.syntax), root=ROOT)
        except LlamayError as e:
            names = ", ".join(sorted(self.names))
            raise ToolRequestError(f"the tools' parameters ({names}) cannot be enforced: {e}", "tools") from e
        except RecursionError:  # a compiler without a nesting limit
            raise ToolRequestError("the tools' parameters are nested too deeply to compile", "tools") from None
        if self.required or not self.syntax.native:
            return inner
        if self.syntax.opener is None:  # Llama 3.x: a call is a reply that begins with "{"
            return LazyConstraint(inner, (b"{",), anchored=True)
        return LazyConstraint(inner, (self.syntax.opener.encode(),))


def _generic_turn(m: dict[str, Any], history: list[dict[str, Any]]) -> dict[str, Any]:
    """A history message in the generic format: an assistant's calls as its JSON, a tool's result as a user
    turn naming the tool (templates without tools know no `tool` role)."""
    if m.get("tool_calls"):
        calls = [{"name": c["function"]["name"], "arguments": c["function"].get("arguments", {})}
                 for c in m["tool_calls"]]  # fmt: skip
        body = {"tool_calls": calls} if len(calls) > 1 else {"tool_call": calls[0]}
        return {"role": "assistant", "content": json.dumps(body, ensure_ascii=False)}
    if m.get("role") == "tool":
        name = _called(m.get("tool_call_id"), history) or m.get("name") or "tool"
        body = {"tool_response": {"tool": name, "content": m.get("content") or ""}}
        return {"role": "user", "content": json.dumps(body, ensure_ascii=False)}
    return m


def _called(call_id: str | None, history: list[dict[str, Any]]) -> str | None:
    for m in history:
        for c in m.get("tool_calls") or ():
            if call_id is not None and c.get("id") == call_id:
                return c["function"]["name"]
    return None


# -- the vocabulary: control tokens that are markers become text ---------------------------------------------

_VOCABS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def _marker_tokens(tokenizer: Any, syntax: ToolSyntax) -> frozenset[int]:
    out = set()
    for marker in (syntax.opener, syntax.closer):
        if not marker:
            continue
        ids = tokenizer.encode(marker, add_special=False, parse_special=True)
        if len(ids) == 1 and not tokenizer.token_bytes(ids[0], special=False):
            out.add(ids[0])
    return frozenset(out)


def tool_vocab(tokenizer: Any, syntax: ToolSyntax) -> Any:
    """The constraint vocabulary of `tokenizer`, with the syntax's control-token markers as their text."""
    shown = _marker_tokens(tokenizer, syntax)
    if not shown:
        return ConstraintVocab.for_tokenizer(tokenizer)
    with _LOCK:
        per = _VOCABS.setdefault(tokenizer, {})
        vocab = per.get(shown)
        if vocab is None:
            pieces = [tokenizer.token_bytes(i, special=i in shown) for i in range(tokenizer.n_vocab)]
            vocab = per[shown] = ConstraintVocab(pieces, tokenizer.eos_ids)
        return vocab


# -- the request ---------------------------------------------------------------------------------------------


def plan_tools(template: str | None, tools: list[dict[str, Any]] | None, tool_choice: Any = None,
               parallel: bool | None = None, syntax: ToolSyntax | None = None) -> ToolPlan | None:  # fmt: skip
    """The plan of a request (OpenAI's fields; Ollama's requests are "auto"), None when no tool may be called.
    `syntax`: the template's (detected) unless given."""
    choice = "auto" if tool_choice is None else tool_choice
    named = None
    if isinstance(choice, dict):
        fn = choice.get("function") if choice.get("type", "function") == "function" else None
        named = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(named, str):
            raise ToolRequestError('tool_choice names a tool as {"type": "function", "function": {"name": ...}}',
                                   "tool_choice")  # fmt: skip
    elif choice not in CHOICES:
        raise ToolRequestError(f"tool_choice is one of {', '.join(CHOICES)} or a named function, got {choice!r}",
                               "tool_choice")  # fmt: skip
    if not tools:
        if named or choice == "required":
            raise ToolRequestError("tool_choice asks for a call but the request has no tools", "tool_choice")
        return None
    if choice == "none":
        return None
    names = [t["function"]["name"] for t in tools]
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise ToolRequestError(f"two tools are named {dup!r}", "tools")
    chosen = tools
    if named is not None:
        chosen = [t for t in tools if t["function"]["name"] == named]
        if not chosen:
            raise ToolRequestError(f"tool_choice names {named!r}, which is not among the tools ({', '.join(names)})",
                                   "tool_choice")  # fmt: skip
    syntax = syntax or detect_syntax(template)
    allow_many = parallel is not False and named is None and syntax.parallel
    return ToolPlan(syntax, tuple(chosen), tuple(tools), named is not None or choice == "required", allow_many)
