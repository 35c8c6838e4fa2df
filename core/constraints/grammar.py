"""The grammar tree every front end produces (GBNF, JSON Schema, regex patterns, lexicons) and the compiler
lowers to a byte-level program (`compile.py`).

Terminals are Unicode code points, as in llama.cpp's GBNF: `Lit` is a string, `Chars` a set of code-point
ranges (negated or not). Nodes are immutable and hashable, so equal sub-grammars compile once.
`to_gbnf` prints a grammar back as GBNF text that llama.cpp (and `gbnf.parse`) accept.

A rule may be *lazy*: its body is built by a function the first time it is needed (`Grammar.lazy`), so a
grammar with many rules that few outputs visit (a JSON object's members written so far, in any order: one rule
per set of them) costs only what is visited. A lazy rule's builder may add more lazy rules. Its `witness` is a
node that derives some finite string exactly when the rule does (what the compile-time checks read instead of
building it); a lazy rule is never referenced before a byte is consumed in its rule (so it is never part of a
left recursion).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

MAX_CODE_POINT = 0x10FFFF


@dataclass(frozen=True)
class Lit:
    """A literal string (matched code point by code point; UTF-8 encoded by the compiler)."""

    text: str


@dataclass(frozen=True)
class Chars:
    """One code point in `ranges` (inclusive pairs), or, when `negated`, one code point outside them."""

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False


@dataclass(frozen=True)
class Ref:
    """A reference to a rule by name; `where` (line, column) points at it in the source, for errors."""

    name: str
    where: tuple[int, int] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Seq:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class Alt:
    options: tuple[Node, ...]


@dataclass(frozen=True)
class Repeat:
    """`item` repeated min..max times (max None: unbounded)."""

    item: Node
    min: int
    max: int | None


Node = Lit | Chars | Ref | Seq | Alt | Repeat


def _cached_hash(*fields: str) -> Callable[[Node], int]:
    """A class's __hash__ that computes a node's hash once, from its `fields` (nodes are keys of dicts that
    dedupe rules: a large one was hashed again at every lookup, recursively). Stored in the instance's dict
    directly, as the frozen dataclass's own __setattr__ would refuse."""

    def cached(node: Node) -> int:
        d = node.__dict__
        h = d.get("_hash")
        if h is None:
            h = d["_hash"] = hash((type(node), *[d[f] for f in fields]))
        return h

    return cached


for _cls in (Chars, Seq, Alt, Repeat):
    _cls.__hash__ = _cached_hash(*_cls.__dataclass_fields__)

ANY_CHAR = Chars((), negated=True)  # GBNF's `.`: any code point
EMPTY = Seq(())


@dataclass(frozen=True)
class LazyRule:
    """A rule built on first use: `build()` returns its body; `witness` derives a finite string exactly when the
    body does (see the module docstring)."""

    build: Callable[[], Node]
    witness: Node


@dataclass
class Grammar:
    """Rules by name, in definition order; `root` names the start rule; `lazy`: rules built on first use (see
    the module docstring), moved into `rules` once built."""

    rules: dict[str, Node]
    root: str = "root"
    lazy: dict[str, LazyRule] = field(default_factory=dict)
    # checks still owed (a recursive schema's, grammar_checks.check_grammar, when deferred): run by `check`, as a
    # lazy compile and `to_gbnf` do; an eager compile makes them on the program instead
    owed: Callable[[], None] | None = None

    def check(self) -> None:
        """The checks still owed, run now (ConstraintError), once."""
        if self.owed is not None:
            self.owed()
            self.owed = None

    def body(self, name: str) -> Node | None:
        """The rule's body, built now when it is lazy (None: no such rule)."""
        node = self.rules.get(name)
        if node is None:
            lazy = self.lazy.get(name)
            if lazy is None:
                return None
            # (taken out of `lazy` only once built: a build that raises, a limit, leaves it there to raise again)
            node = self.rules[name] = lazy.build()
            del self.lazy[name]
        return node

    def has(self, name: str) -> bool:
        return name in self.rules or name in self.lazy

    def to_gbnf(self, charge: Callable[[int], None] | None = None) -> str:
        """GBNF text of every rule, the lazy ones reachable from the others built first (all of them: an object
        whose members may come in any order has a rule per set of members, so `charge(steps)` may refuse)."""
        self.check()
        if self.lazy:
            self.build_reachable(charge)
        return "".join(f"{name} ::= {node_to_gbnf(node)}\n" for name, node in self.rules.items())

    def build_reachable(self, charge: Callable[[int], None] | None = None) -> None:
        """Build every lazy rule reachable from the rules (iteratively: builders add more)."""
        todo = list(self.rules.values())
        while todo:
            node = todo.pop()
            if charge is not None:
                charge(1)
            if isinstance(node, Ref):
                if node.name in self.lazy:
                    todo.append(self.body(node.name))
            else:
                todo.extend(children(node))


# --- small constructors used by the front ends ---------------------------------------------------------------


def seq(*items: Node) -> Node:
    flat: list[Node] = []
    for it in items:
        if isinstance(it, Seq):
            flat.extend(it.items)
        else:
            flat.append(it)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*options: Node) -> Node:
    flat: dict[Node, None] = {}  # insertion-ordered, each option once
    for o in options:
        for x in o.options if isinstance(o, Alt) else (o,):
            flat[x] = None
    out = tuple(flat)
    return out[0] if len(out) == 1 else Alt(out)


def opt(item: Node) -> Node:
    return Repeat(item, 0, 1)


def chars(spec: str, negated: bool = False) -> Chars:
    """Chars from a compact spec: "a-z0-9_" (a '-' between two characters makes a range)."""
    ranges = []
    i = 0
    while i < len(spec):
        if i + 2 < len(spec) and spec[i + 1] == "-":
            ranges.append((ord(spec[i]), ord(spec[i + 2])))
            i += 3
        else:
            ranges.append((ord(spec[i]), ord(spec[i])))
            i += 1
    return Chars(tuple(ranges), negated)


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Seq):
        return node.items
    if isinstance(node, Alt):
        return node.options
    if isinstance(node, Repeat):
        return (node.item,)
    return ()


def tree_shape(node: Node, depth_limit: int) -> tuple[int, int]:
    """(nodes in the tree, its depth), iteratively, a level at a time, so any tree is safe to measure; the walk
    stops at the first level deeper than `depth_limit` (the depth returned is then that level's)."""
    count, depth, level = 0, 0, [node]
    while level:
        depth += 1
        count += len(level)
        if depth > depth_limit:
            break
        below: list[Node] = []
        for n in level:
            kind = type(n)
            if kind is Seq:
                below.extend(n.items)
            elif kind is Alt:
                below.extend(n.options)
            elif kind is Repeat:
                below.append(n.item)
        level = below
    return count, depth


# --- printing ------------------------------------------------------------------------------------------------

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", '"': '\\"', "[": "\\[", "]": "\\]"}


def _char(c: int, in_class: bool) -> str:
    ch = chr(c)
    if ch in _ESCAPES and (in_class or ch not in "[]"):
        return _ESCAPES[ch]
    if in_class and ch in "^-":
        return f"\\x{c:02X}"
    if c < 0x20 or c == 0x7F:
        return f"\\x{c:02X}"
    if 0xD800 <= c <= 0xDFFF or 0x80 <= c < 0xA0:
        return f"\\u{c:04X}" if c <= 0xFFFF else f"\\U{c:08X}"
    return ch


# characters a literal cannot hold as they are (see _char): most literals have none and are written at once
_LITERAL_ESCAPED = re.compile('[\x00-\x1f\x7f-\x9f"\\\\\ud800-\udfff]')


def node_to_gbnf(node: Node) -> str:
    if isinstance(node, Lit):
        if _LITERAL_ESCAPED.search(node.text) is None:
            return f'"{node.text}"'
        return '"' + "".join(_char(ord(c), False) for c in node.text) + '"'
    if isinstance(node, Chars):
        body = "".join(
            _char(lo, True) if lo == hi else f"{_char(lo, True)}-{_char(hi, True)}" for lo, hi in node.ranges
        )
        if node.negated and not node.ranges:
            return "."
        return f"[{'^' if node.negated else ''}{body}]"
    if isinstance(node, Ref):
        return node.name
    if isinstance(node, Seq):
        if not node.items:
            return '""'
        return " ".join(_atom(i) if isinstance(i, Alt) else node_to_gbnf(i) for i in node.items)
    if isinstance(node, Alt):
        return " | ".join(node_to_gbnf(o) for o in node.options)
    if isinstance(node, Repeat):
        inner = _atom(node.item)
        lo, hi = node.min, node.max
        if (lo, hi) == (0, None):
            return inner + "*"
        if (lo, hi) == (1, None):
            return inner + "+"
        if (lo, hi) == (0, 1):
            return inner + "?"
        if hi is None:
            return f"{inner}{{{lo},}}"
        return f"{inner}{{{lo}}}" if lo == hi else f"{inner}{{{lo},{hi}}}"
    raise TypeError(f"not a grammar node: {node!r}")


def _atom(node: Node) -> str:
    text = node_to_gbnf(node)
    if isinstance(node, (Seq, Alt, Repeat)) and not (isinstance(node, Seq) and not node.items):
        return f"({text})"
    return text
