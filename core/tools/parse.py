"""Tool calls out of a reply, as it streams: text in, events out, in one pass over the text.

    ("content", text)        text for the reply's `content`
    ("name", i, name)        call i begins: its function's name (before any of its arguments)
    ("args", i, piece)       the next piece of call i's arguments (JSON text; the pieces concatenate to it)
    ("end", i)               call i's arguments are complete

A call is `{"name": ..., "arguments"|"parameters": {...}}` (name first: the grammar writes it so), placed as the
syntax says (syntax.py). What cannot be read as calls stays content: a reply the grammar did not constrain, a
call cut short by max_tokens. The work per piece is bounded by the piece (plus a head of bounded length).
"""

from __future__ import annotations

import json
import re
from typing import Any

from .syntax import ToolSyntax

HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"(?:arguments|parameters)"\s*:\s*')
HEAD_LIMIT = 4096  # a call's head longer than this is no call (names are short; blanks are bounded)
TAILS = {  # what closes a call object, per syntax: group 1 "," (another call follows) or nothing (the last)
    "hermes": re.compile(r"\s*\}\s*</tool_call>()"),
    "llama3": re.compile(r"\s*\}()"),
    "mistral": re.compile(r"\s*\}\s*(?:(,)|\])"),
    "generic": re.compile(r"\s*\}\s*\}()"),
    "generic-list": re.compile(r"\s*\}\s*(?:(,)|\]\s*\})"),
    "response": re.compile(r"\s*\}()"),
}
GENERIC_HEAD = re.compile(r'\s*\{\s*"(tool_calls?|response)"\s*:\s*(\[\s*)?')
TAIL_LIMIT = 256

Event = tuple[Any, ...]


class ToolStream:
    def __init__(self, syntax: ToolSyntax) -> None:
        self.syntax = syntax
        self.mode = "start" if syntax.opener is None else "text"
        self.buf = ""
        self.calls = 0  # calls begun
        self.tail = TAILS[syntax.name]
        self._depth = 0  # inside the arguments: nesting, and string state
        self._in_str = False
        self._esc = False
        self._said = 0  # the response string's raw characters already given out
        self._closed = False  # the JSON of the reply is over (after it, blanks are no content)

    def feed(self, text: str) -> list[Event]:
        self.buf += text
        out: list[Event] = []
        while self.buf and self._step(out):
            pass
        return out

    def end(self) -> list[Event]:
        """The reply is over: held-back text comes out; the unfinished head of a call (cut by max_tokens) is
        structure, not content: it is dropped."""
        out: list[Event] = []
        if self.mode in ("text", "generic", "start", "plain") and self.buf:
            self._content(out, self.buf)
        elif self.mode == "response" and self.buf:
            self._content(out, self.buf[1 + self._said :])
        self.buf = ""
        self.mode = "after"
        return out

    # -- one step: True when it consumed something and more may follow -------------------------------------

    def _content(self, out: list[Event], text: str) -> None:
        if text and (not (self.calls or self._closed) or text.strip()):
            out.append(("content", text))

    def _step(self, out: list[Event]) -> bool:
        mode = self.mode
        if mode == "plain" or mode == "after":
            self._content(out, self.buf)
            self.buf = ""
            return False
        if mode == "start":  # the reply itself is JSON when it begins with "{"
            body = self.buf.lstrip()
            if not body:
                return False
            self.mode = ("head" if self.syntax.native else "generic") if body[0] == "{" else "plain"
            return True
        return _STEPS[mode](self, out)

    def _text(self, out: list[Event]) -> bool:
        opener = self.syntax.opener
        assert opener is not None
        at = self.buf.find(opener)
        if at < 0:  # hold back what may be the opener's beginning
            keep = next((k for k in range(min(len(opener) - 1, len(self.buf)), 0, -1)
                         if opener.startswith(self.buf[-k:])), 0)  # fmt: skip
            self._content(out, self.buf[: len(self.buf) - keep])
            self.buf = self.buf[len(self.buf) - keep :]
            return False
        self._content(out, self.buf[:at])
        self.buf = self.buf[at + len(opener) :]
        self.mode = "array" if self.syntax.array else "head"
        return True

    def _array(self, out: list[Event]) -> bool:
        m = re.match(r"\s*\[", self.buf)
        if m is None:
            if self.buf.strip():
                self.mode = "plain"
                return True
            return False
        self.buf = self.buf[m.end() :]
        self.mode = "head"
        return True

    def _generic(self, out: list[Event]) -> bool:
        m = GENERIC_HEAD.match(self.buf)
        if m is None:
            if len(self.buf) > HEAD_LIMIT:
                self.mode = "plain"
                return True
            return False
        key, bracket = m.group(1), m.group(2)
        if key == "tool_calls" and not bracket:
            return False  # the bracket follows
        self.buf = self.buf[m.end() :]
        if key == "response":
            self.mode = "response"
            self._said = 0
        else:
            self.tail = TAILS["generic-list" if key == "tool_calls" else "generic"]
            self.mode = "head"
        return True

    def _head(self, out: list[Event]) -> bool:
        m = HEAD.match(self.buf)
        if m is None:
            if len(self.buf) > HEAD_LIMIT:
                self.mode = "plain"
                return True
            return False
        try:
            name = json.loads(f'"{m.group(1)}"')
        except ValueError:
            self.mode = "plain"
            return True
        out.append(("name", self.calls, name))
        self.calls += 1
        self.buf = self.buf[m.end() :]
        self.mode = "args"
        self._depth, self._in_str, self._esc = 0, False, False
        return True

    def _args(self, out: list[Event]) -> bool:
        if self._depth == 0:  # blanks before the value are not part of it
            self.buf = self.buf.lstrip()
        i, n = 0, len(self.buf)
        buf = self.buf
        while i < n:
            c = buf[i]
            i += 1
            if self._in_str:
                if self._esc:
                    self._esc = False
                elif c == "\\":
                    self._esc = True
                elif c == '"':
                    self._in_str = False
                continue
            if c == '"':
                self._in_str = True
            elif c in "{[":
                self._depth += 1
            elif c in "}]":
                self._depth -= 1
                if self._depth == 0:
                    out.append(("args", self.calls - 1, buf[:i]))
                    out.append(("end", self.calls - 1))
                    self.buf = buf[i:]
                    self.mode = "tail"
                    return True
        if buf:
            out.append(("args", self.calls - 1, buf))
        self.buf = ""
        return False

    def _tail(self, out: list[Event]) -> bool:
        m = self.tail.match(self.buf)
        if m is None:
            if len(self.buf) > TAIL_LIMIT:
                self.mode = "after"
                return True
            return False
        self.buf = self.buf[m.end() :]
        if m.group(1):
            self.mode = "head"  # another call in the array
        elif self.syntax.opener is not None and not self.syntax.array:
            self.mode = "text"  # tagged calls: another may open
        else:
            self.mode = "after"
        return True

    def _response(self, out: list[Event]) -> bool:
        """The generic format's `response` string, decoded as far as it is complete."""
        if not self._said:
            self.buf = self.buf.lstrip()
        buf = self.buf
        if not buf.startswith('"'):
            if buf.strip():
                self.mode = "plain"
                return True
            return False
        i, esc, safe, closed = 1 + self._said, False, 1 + self._said, -1
        while i < len(buf):
            c = buf[i]
            if esc:
                esc = False
                safe = i + 1
            elif c == "\\":
                esc = True
            elif c == '"':
                closed = i
                break
            else:
                safe = i + 1
            i += 1
        end = closed if closed >= 0 else safe
        if closed < 0 and end > 1 + self._said:  # a \\u escape may be cut: wait for its 4 digits
            cut = buf.rfind("\\u", max(1 + self._said, end - 6), end)
            if cut >= 0 and end - cut < 6:
                end = cut
        raw = buf[1 + self._said : end]
        if raw:
            try:
                self._content(out, json.loads(f'"{raw}"'))
            except ValueError:
                self.mode = "plain"
                return True
            self._said += len(raw)
        if closed >= 0:
            self.buf = buf[closed + 1 :]
            self.mode, self.tail = "tail", TAILS["response"]  # the closing `}`
            self._closed = True
            return True
        return False


_STEPS = {
    "text": ToolStream._text,  # before a call: content, until the opener
    "array": ToolStream._array,  # after Mistral's opener: the array's bracket
    "generic": ToolStream._generic,  # the generic format's key: tool_call, tool_calls or response
    "head": ToolStream._head,  # a call's name
    "args": ToolStream._args,  # its arguments, to the end of their JSON value
    "tail": ToolStream._tail,  # what closes the call, and whether another follows
    "response": ToolStream._response,  # the generic format's text
}


def parse_reply(syntax: ToolSyntax, text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """(content, calls) of a whole reply; each call {"name", "arguments": JSON text, "complete": bool}."""
    stream = ToolStream(syntax)
    events = stream.feed(text) + stream.end()
    return collect(events)


def collect(events: list[Event]) -> tuple[str | None, list[dict[str, Any]]]:
    content, calls = [], []
    for e in events:
        if e[0] == "content":
            content.append(e[1])
        elif e[0] == "name":
            calls.append({"name": e[2], "arguments": "", "complete": False})
        elif e[0] == "args":
            calls[e[1]]["arguments"] += e[2]
        elif e[0] == "end":
            calls[e[1]]["complete"] = True
    text = "".join(content)
    return (text if text.strip() or not calls else None), calls
