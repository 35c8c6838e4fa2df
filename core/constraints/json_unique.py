"""`uniqueItems`: arrays whose items are pairwise different, as lazy rules (one per set of what the items written
so far used up: only the sets a document visits are built).

    A(S) ::= "" (when |S| >= minItems) | "," space ITEM-not-in-S A(S + it)      (no comma before the first item)

- items of an enum / const (and booleans): exact, each value at most once (S: the values written);
- plain strings (lengths only): a subset, items that differ in their first character, as written (S: the
  first characters used; the empty string is one, a character beyond ASCII one more; no escape first). Two
  strings with different first characters are different, so the array is unique; ["tag1", "tag2"] is not
  generated;
- any other items: no rule here (json_values.py writes at most one item, a subset).
"""

from __future__ import annotations

from typing import Any

from .grammar import EMPTY, Chars, LazyRule, Lit, Node, Ref, Repeat, alt, seq
from .json_keywords import VOCABULARY

SPACE = Ref("space")
QUOTE = Lit('"')
COMMA = seq(Lit(","), SPACE)
_FIRST = [chr(b) for b in range(0x20, 0x7F) if chr(b) not in '"\\']  # first characters told apart
_EMPTY_STRING, _BEYOND_ASCII = "", "\x80"  # the other two "first characters"
_MAX_VALUES = 64  # enums of more values: at most one item (a rule per set of values is 2^n)


class UniqueArray:
    """The lazy rules of one unique array; `options`: per thing an item may use up, the item's node (what
    follows it is A(S + thing))."""

    def __init__(self, c: Any, base: str, options: dict[str, tuple[Node, Node]], lo: int, hi: int | None) -> None:
        self.c, self.base, self.options = c, base, options  # thing -> (the item's start, its rest)
        self.keys = list(options)
        self.lo, self.hi = lo, min(hi, len(options)) if hi is not None else len(options)
        self.names: dict[tuple, str] = {}

    def entry(self) -> Node:
        return seq(Lit("["), SPACE, Ref(self.rule(0, True)), Lit("]"), SPACE)

    def rule(self, used: int, first: bool) -> str:
        return self.lazy((used, first), lambda: self.body(used, first))

    def tail(self, used: int, i: int) -> str:
        """The rest of item i, then the items after it (its own rule: the sets after each possible item are
        built only when one is written)."""
        return self.lazy((used, i, "tail"), lambda: seq(self.options[self.keys[i]][1], Ref(self.rule(used, False))))

    def lazy(self, key: tuple, build) -> str:
        name = self.names.get(key)
        if name is None:
            tag = "-".join(f"{k:x}" if isinstance(k, int) else str(k) for k in key)
            name = self.names[key] = self.c.fresh_lazy(f"{self.base}-{tag}")
            self.c.lazy[name] = LazyRule(lambda: self.c.build_lazy(build), EMPTY)
        return name

    def body(self, used: int, first: bool) -> Node:
        count = used.bit_count()
        options: list[Node] = [EMPTY] if count >= self.lo else []
        if count < self.hi:
            items = [seq(self.options[k][0], Ref(self.tail(used | 1 << i, i)))
                     for i, k in enumerate(self.keys) if not used >> i & 1]  # fmt: skip
            self.c.budget.charge(len(items), self.base)
            if items:
                options.append(alt(*items) if first else seq(COMMA, alt(*items)))
        return alt(*options) if options else Chars(())


def unique_array(c: Any, item_schema: Any, lo: int, hi: int | None, path: str) -> Node | None:
    """The array node, or None when its items are of no kind handled here."""
    from .json_values import capped, literal_texts

    item = c.deref(item_schema, path)
    if not isinstance(item, dict):
        return None
    keys = set(item) & VOCABULARY
    if "enum" in item or "const" in item:
        values = [item["const"]] if "const" in item else item["enum"]
        if not isinstance(values, list) or len(values) > _MAX_VALUES:
            return None
        groups = literal_texts(c, values, item, path)
        options = {g[0]: (alt(*map(Lit, g)), SPACE) for g in groups}
    elif item.get("type") == "boolean" and keys <= {"type"}:
        options = {"true": (Lit("true"), SPACE), "false": (Lit("false"), SPACE)}
    elif item.get("type") == "string" and keys <= {"type", "minLength", "maxLength"}:
        low, high = int(item.get("minLength", 0)), item.get("maxLength")
        high = capped(None if high is None else int(high), c.max_string_length, low)
        unit = c.use("length-char" if low > 0 else "char")
        rest = seq(Repeat(unit, max(low - 1, 0), None if high is None else high - 1), QUOTE, SPACE)
        if high == 0:
            options = {}
        else:
            options = {ch: (seq(QUOTE, Lit(ch)), rest) for ch in _FIRST}
            options[_BEYOND_ASCII] = (seq(QUOTE, Chars(((0, 0x7F),), negated=True)), rest)
        if low == 0:
            options[_EMPTY_STRING] = (seq(QUOTE, QUOTE), SPACE)
    else:
        return None
    c.use("space")
    if len(options) < lo:
        return None
    return UniqueArray(c, c.prefix("unique"), options, lo, hi).entry()
