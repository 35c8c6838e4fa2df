"""A parser for GBNF, llama.cpp's grammar format (see llama.cpp's grammars/README.md).

    root   ::= object                      # rules: name ::= alternatives
    object ::= "{" ws ( pair ("," ws pair)* )? "}"
    pair   ::= [a-z]+ ":" [^\\n\\x00-\\x1F]{1,8} | "\\u00e9" .

Literals "...", classes [...] / [^...] with ranges and escapes (\\xHH \\uHHHH \\UHHHHHHHH \\t \\r \\n \\\\ \\" \\[ \\]),
`.` (any code point), rule references, groups, `*` `+` `?` `{m}` `{m,}` `{m,n}`, comments `#`. Names are
letters, digits and '-'. A rule ends at a newline, except inside parentheses and after `|`. As in llama.cpp,
a rule defined twice keeps its last definition. Errors name the line and column, limits too (limits.py): the
text is charged to the compilation's budget, groups nest at most `max_nesting` deep and counts are at most
`max_repeat`.
"""

from __future__ import annotations

import bisect
import re

from .errors import ConstraintError
from .grammar import ANY_CHAR, Alt, Chars, Grammar, Lit, Node, Ref, Repeat, Seq, children, seq
from .limits import Budget, ConstraintLimits, budget_of, count_of

_NAME = re.compile(r"[A-Za-z0-9-]+")
_DIGITS = re.compile(r"[0-9]+")
_PLAIN = re.compile(r'[^"\\]+')
_SPACE = re.compile(r"(?:[ \t]|#[^\r\n]*)*")
_SPACE_NL = re.compile(r"(?:[ \t\r\n]|#[^\r\n]*)*")
_SIMPLE_ESCAPES = {"t": "\t", "r": "\r", "n": "\n", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


def _is_word(c: str) -> bool:
    return c.isascii() and (c.isalnum() or c == "-")


class _Parser:
    def __init__(self, src: str, budget: Budget) -> None:
        self.src = src
        self.i = 0
        self.budget = budget
        self.depth = 0  # groups open at the current position
        self._lines: list[int] | None = None  # offsets of the newlines, once a position is asked for

    # -- errors and positions ---------------------------------------------------------------------------------

    def where(self, i: int | None = None) -> tuple[int, int]:
        i = self.i if i is None else i
        if self._lines is None:
            self._lines, k = [], self.src.find("\n")
            while k >= 0:
                self._lines.append(k)
                k = self.src.find("\n", k + 1)
        line = bisect.bisect_left(self._lines, i)
        return line + 1, i - (self._lines[line - 1] + 1 if line else 0) + 1

    def at(self, i: int | None = None) -> str:
        line, col = self.where(i)
        return f"GBNF line {line}, column {col}"

    def error(self, msg: str, i: int | None = None) -> ConstraintError:
        line, col = self.where(i)
        j = self.i if i is None else i
        near = self.src[j : j + 20].split("\n")[0]
        return ConstraintError(f"GBNF line {line}, column {col}: {msg}" + (f" at {near!r}" if near else " at end"))

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.src[j] if j < len(self.src) else ""

    # -- lexical pieces ---------------------------------------------------------------------------------------

    def space(self, newline_ok: bool) -> None:
        self.i = (_SPACE_NL if newline_ok else _SPACE).match(self.src, self.i).end()

    def name(self) -> str:
        m = _NAME.match(self.src, self.i)
        if m is None:
            raise self.error("expecting a rule name")
        self.i = m.end()
        return m.group()

    def integer(self) -> int:
        start = self.i
        m = _DIGITS.match(self.src, start)
        if m is None:
            raise self.error("expecting an integer")
        self.i = m.end()
        value = count_of(m.group())
        self.budget.check("max_repeat", value, lambda: self.at(start), "repetition count")
        return value

    def char(self) -> int:
        """One code point of a literal or class, escapes decoded."""
        c = self.peek()
        if not c:
            raise self.error("unexpected end of input")
        if c != "\\":
            self.i += 1
            return ord(c)
        e = self.peek(1)
        if e in _SIMPLE_ESCAPES:
            self.i += 2
            return ord(_SIMPLE_ESCAPES[e])
        if e in _HEX_ESCAPES:
            k = _HEX_ESCAPES[e]
            digits = self.src[self.i + 2 : self.i + 2 + k]
            if len(digits) != k or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"expecting {k} hex digits after \\{e}")
            self.i += 2 + k
            value = int(digits, 16)
            if value > 0x10FFFF:
                raise self.error(f"code point {value:#x} is beyond U+10FFFF", self.i - 2 - k)
            return value
        raise self.error("unknown escape")

    # -- grammar structure ------------------------------------------------------------------------------------

    def literal(self) -> Node:
        self.i += 1  # opening quote
        out = []
        src = self.src
        while True:
            m = _PLAIN.match(src, self.i)  # a run of characters that stand for themselves
            if m is not None:
                out.append(m.group())
                self.i = m.end()
            c = self.peek()
            if c == '"':
                break
            if not c:
                raise self.error("unterminated string literal")
            out.append(chr(self.char()))
        self.i += 1
        return Lit("".join(out))

    def char_class(self) -> Node:
        self.i += 1  # [
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        ranges = []
        while self.peek() != "]":
            if not self.peek():
                raise self.error("unterminated character class")
            lo = self.char()
            hi = lo
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.char()
            ranges.append((lo, hi))
        self.i += 1
        return Chars(tuple(ranges), negated)

    def repetition(self) -> tuple[int, int | None]:
        start = self.i
        c = self.peek()
        self.i += 1
        if c == "*":
            return 0, None
        if c == "+":
            return 1, None
        if c == "?":
            return 0, 1
        self.space(True)
        if not self.peek().isdigit():
            raise self.error("expecting an int")
        lo = self.integer()
        self.space(True)
        if self.peek() == "}":
            self.i += 1
            return lo, lo
        if self.peek() != ",":
            raise self.error("expecting ',' or '}'")
        self.i += 1
        self.space(True)
        hi = self.integer() if self.peek().isdigit() else None
        self.space(True)
        if self.peek() != "}":
            raise self.error("expecting '}'")
        self.i += 1
        if hi is not None and hi < lo:
            raise self.error(f"repetition {{{lo},{hi}}} has its maximum below its minimum", start)
        return lo, hi

    def sequence(self, nested: bool) -> Node:
        items: list[Node] = []
        stacked = 0
        while True:
            c = self.peek()
            if c == '"':
                items.append(self.literal())
            elif c == "[":
                items.append(self.char_class())
            elif c and _is_word(c):
                at = self.where()
                items.append(Ref(self.name(), at))
            elif c == "(":
                self.depth += 1
                self.budget.check("max_nesting", self.depth, self.at, "group nesting")
                self.i += 1
                self.space(True)
                inner = self.alternates(nested=True)
                if self.peek() != ")":
                    raise self.error("expecting ')'")
                self.i += 1
                self.depth -= 1
                items.append(inner if isinstance(inner, (Alt, Seq)) else Seq((inner,)))
            elif c == ".":
                self.i += 1
                items.append(ANY_CHAR)
            elif c in ("*", "+", "?", "{"):
                if not items:
                    raise self.error(f"expecting an item before {c!r}")
                lo, hi = self.repetition()
                stacked = stacked + 1 if isinstance(items[-1], Repeat) else 1
                self.budget.check("max_nesting", self.depth + stacked, self.at, "group nesting (stacked repetitions)")
                items[-1] = Repeat(items[-1], lo, hi)
            else:
                break
            self.space(nested)
        return seq(*items) if items else Seq(())

    def alternates(self, nested: bool) -> Node:
        options = [self.sequence(nested)]
        while self.peek() == "|":
            self.i += 1
            self.space(True)
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else Alt(tuple(options))

    def rule(self, rules: dict[str, Node]) -> None:
        name = self.name()
        self.space(False)
        if not self.src.startswith("::=", self.i):
            raise self.error("expecting ::=")
        self.i += 3
        self.space(True)
        rules[name] = self.alternates(nested=False)
        c = self.peek()
        if c == "\r":
            self.i += 2 if self.peek(1) == "\n" else 1
        elif c == "\n":
            self.i += 1
        elif c:
            raise self.error("expecting newline or end")
        self.space(True)


def parse(src: str, root: str = "root", limits: ConstraintLimits | Budget | None = None) -> Grammar:
    """Parse GBNF text; every referenced rule must be defined (the root is checked when compiling). `limits`
    (or a compilation's Budget) bounds the work (limits.py)."""
    budget = budget_of(limits)
    budget.charge(len(src), "GBNF text")
    p = _Parser(src, budget)
    rules: dict[str, Node] = {}
    p.space(True)
    while p.i < len(src):
        p.rule(rules)
    for name, node in rules.items():
        for ref in _refs(node):
            if ref.name not in rules:
                where = f"line {ref.where[0]}, column {ref.where[1]}: " if ref.where else ""
                raise ConstraintError(f"GBNF {where}rule {name!r} refers to undefined rule {ref.name!r}")
    return Grammar(rules, root)


def _refs(node: Node):
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, Ref):
            yield n
        todo.extend(reversed(children(n)))


__all__ = ["parse"]
