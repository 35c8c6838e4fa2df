"""`uniqueItems` of objects, a subset: items told apart by one property `P` written first.

Two equal objects may be written differently (key order, `1` and `1.0`, escapes), so no grammar tells objects
apart by their whole text. Here every item starts with the same key P (made required: a subset), and two items
differ in P's value, so they are different objects whatever follows:

- P an enum / const of strings: exact on P's values, each at most once (a walk over the trie of the values
  not written yet, so a state holds a stack per branch, not per value: 2,461 values pass `max_stacks`);
- P a plain string (`type: string`, lengths): its first `_PREFIX` characters and, for a longer one, its last
  character, told apart, all written without escapes (S: the signatures written); names differing in their
  first or last character are generated, two names sharing both are not (`[{"name": "John Doe"}, {"name":
  "Jane Doe"}]`), nor a name starting with an escape or a character beyond ASCII. Why one character: a mask
  inside P's value walks every token's prefix through T(S, p), one rule each naming its ~94 successors, and
  24 characters went past max_rules on a 49k vocabulary at the first mask of an item.

The rest of each item is the object's other members in their listed order (json_objects.object_rule with
`tail`), P kept off its other keys. P is the first required property that qualifies (else the first listed);
items of other objects (combinators, property counts, patterns) get no rule here (at most one item).
"""

from __future__ import annotations

import json
from bisect import bisect_left
from json.encoder import encode_basestring  # (json.dumps' text of a string, without an encoder made)
from typing import Any

from .errors import ConstraintError
from .grammar import EMPTY, Alt, Chars, Lit, Node, Ref, Repeat, Seq, alt, seq
from .json_keywords import ANNOTATIONS, VOCABULARY
from .json_unique import COMMA, QUOTE, SPACE, UniqueSets, shared
from .limits import ConstraintLimitError

_PREFIX = 1  # characters of P's value told apart before its last (each more multiplies a mask's rules by ~94)
_MAX_ITEMS = 32  # plain-string keys: items written at most
_MAX_VALUES = 256  # enum keys: items written at most
_NESTED = 4  # unique object arrays built inside one another at most (a $ref with siblings is a new schema each time)
_PLAIN = [chr(b) for b in range(0x20, 0x7F) if chr(b) not in '"\\']
_OBJECT_KEYS = {"type", "properties", "required", "additionalProperties"}


def unique_objects(c: Any, item_schema: Any, item: dict, lo: int, hi: int | None, path: str) -> Node | None:
    """The array node, or None when the items are not objects handled here (`item`: `item_schema` dereferenced).
    An item schema met again while its rule is built (a recursive `children` array) gets none: its members are
    compiled inline here, not through a reference."""
    building = c.__dict__.setdefault("unique_objects_building", set())
    if id(item) in building or len(building) >= _NESTED:
        return None
    building.add(id(item))
    try:
        return _unique_objects(c, item_schema, item, lo, hi, path)
    finally:
        building.discard(id(item))


def _unique_objects(c: Any, item_schema: Any, item: dict, lo: int, hi: int | None, path: str) -> Node | None:
    keys = set(item) & VOCABULARY
    if (
        item.get("type", "object") != "object"
        or not keys <= _OBJECT_KEYS
        or not isinstance(item.get("properties"), dict)
    ):
        return None
    props, required = item["properties"], [r for r in item.get("required", []) if isinstance(r, str)]
    c.budget.charge(len(props) + len(required), path)
    chosen = None
    for name in [*(r for r in required if r in props), *props]:
        kind = _key_kind(c, props[name], path)
        if kind is not None:
            chosen = name, kind
            break
    if chosen is None:
        return None
    name, (kind, schema) = chosen
    rest_schema = {**item, "properties": {**props, name: False}, "required": [r for r in required if r != name]}
    mark = c.checkpoint()
    try:
        rest = c.named(_tail(c, rest_schema, path), "unique-rest")
    except ConstraintLimitError:
        raise
    except ConstraintError:  # (the members after P not compiled: at most one item, as before)
        c.rollback(mark)
        return None
    c.use("space")
    opening = seq(Lit("{"), SPACE, Lit(encode_basestring(name)), SPACE, Lit(":"), SPACE)
    closing = seq(SPACE, rest)  # (after P's value)
    keyed = _keyed(c, kind, schema, opening, closing, lo, hi, path)
    if keyed is None or lo > 1:
        return keyed
    # (or one item at most, its members in any order, as without this rule: the union of two subsets)
    one = c.named(c.visit(item_schema, "unique-item", path), "unique-item")  # (a $ref stays one: recursion)
    return alt(keyed, seq(Lit("["), SPACE, one if lo else Repeat(one, 0, 1), Lit("]"), SPACE))


def _keyed(c: Any, kind: str, schema: dict, opening: Node, closing: Node, lo: int, hi: int | None, path: str):
    values = None
    if kind == "enum":
        raw = [schema["const"]] if "const" in schema else schema["enum"]
        c.budget.charge(sum(len(v) for v in raw), path)
        values = sorted({encode_basestring(v)[1:-1] for v in raw})  # (as written, between the quotes)
        hi = len(values) if hi is None else min(hi, len(values))
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    key = ("unique-keyed", opening, closing, low, high, lo, hi, None if values is None else tuple(values))
    array = shared(c, key, lambda: UniqueKeyed(c, c.prefix("unique"), seq(opening, QUOTE), closing, low, high, lo,
                                               hi, values))  # fmt: skip
    return array.entry() if array.hi >= lo else None


def large_string_enum(c: Any, item: dict, values: list, lo: int, hi: int | None, path: str, most: int,
                      text: int) -> Node | None:  # fmt: skip
    """Unique items of an enum of strings too long for UniqueArray (more than `most` values, or a rule per set
    written listing more than `text` characters: it caps the items) as a trie walk; None otherwise."""
    from .json_values import literal_texts

    if len(values) <= most:
        groups = literal_texts(c, values, item, path)
        size = sum(len(t) for g in groups for t in g) + len(groups)
        if text // size >= len(groups):
            return None
        values = [json.loads(g[0]) for g in groups]
    elif set(item) & VOCABULARY - {"type", "enum", "const"} or item.get("type", "string") != "string":
        return None
    c.use("space")
    return _keyed(c, "enum", {"enum": values}, EMPTY, SPACE, lo, hi, path)


def _key_kind(c: Any, schema: Any, path: str) -> tuple[str, dict] | None:
    """("enum", schema) for an enum / const of strings, ("string", schema) for a plain string, else None."""
    schema = c.deref(schema, path)
    if not isinstance(schema, dict):
        return None
    keys = {k for k in schema if k not in ANNOTATIONS} & VOCABULARY
    values = [schema["const"]] if "const" in schema else schema.get("enum")
    if isinstance(values, list) and values and keys <= {"type", "enum", "const"}:
        if all(isinstance(v, str) for v in values) and schema.get("type", "string") == "string":
            return "enum", schema
        return None
    if schema.get("type") == "string" and keys <= {"type", "minLength", "maxLength"}:
        return "string", schema
    return None


def _tail(c: Any, schema: dict, path: str) -> Node:
    from .json_objects import object_rule

    return object_rule(c, schema, "unique-item", path, tail=True)


class UniqueKeyed(UniqueSets):
    """Items `opening` P's string `closing`, told apart by their signatures (S: those written): (p, True) for a
    string p of at most _PREFIX characters, (p, l) for a longer one starting with p and ending with l; of an
    enum (`values`, as written), (v, True) for its value v. A signature is a bit of `used` (UniqueSets): of an
    enum, its value's index; else "" first, then (c, True) per character c, then (c, l) per pair.

        A(S) ::= "" | "," space opening T(S, "")
        T(S, p) ::= '"' closing A(S + (p, True)) | c T(S, p + c)                (len(p) < _PREFIX)
                  | char* E(S, p)                                              (len(p) = _PREFIX)
        E(S, p) ::= l '"' closing A(S + (p, l))     for each (p, l) not in S
    """

    def __init__(self, c: Any, base: str, opening: Node, closing: Node, low: int, high: int | None, lo: int,
                 hi: int | None, values: list[str] | None = None) -> None:  # fmt: skip
        n = len(_PLAIN)
        super().__init__(c, base, lo, hi, len(values) if values is not None else 1 + n + n * n)
        most = _MAX_ITEMS if values is None else _MAX_VALUES  # (an enum's walk: a few branches per rule)
        self.hi = min(hi if hi is not None else most, most)
        self.opening, self.closing, self.low, self.high = opening, closing, low, high
        self.unit = c.use("length-char" if low > 0 else "char")
        self.values = values
        self.index = {ch: i for i, ch in enumerate(_PLAIN)}
        self.closes = [Lit(ch + '"') for ch in _PLAIN]  # a last character, '"'

    def bit(self, p: str, last: str | None = None) -> int:
        """The signature (p, True), or (p, last), as a bit (values None; p of at most _PREFIX = 1 character)."""
        if not p:
            return 0
        i = self.index[p]
        return 1 + i if last is None else 1 + len(_PLAIN) * (1 + i) + self.index[last]

    def body(self, sid: int, first: bool) -> Node:
        count = self.sets[sid].bit_count()
        options: list[Node] = [EMPTY] if count >= self.lo else []
        if count < self.hi and self.alive(sid, ""):
            item = seq(self.opening, Ref(self.lazy((sid, ""), lambda: self.walk(sid, ""))))
            options.append(item if first else seq(COMMA, item))
        return alt(*options) if options else Chars(())

    def fits(self, n: int, longer: bool) -> bool:
        """Whether a string of n characters (longer: n + 1 or more) fits the lengths."""
        if longer:
            return self.high is None or self.high > n
        return self.low <= n and (self.high is None or n <= self.high)

    def live(self, sid: int, p: str) -> list[int]:
        """The indices of the enum's values starting with p not written yet."""
        lo = bisect_left(self.values, p)
        hi = bisect_left(self.values, p + "\U0010ffff")
        self.c.budget.charge(1 + hi - lo, self.base)
        used = self.sets[sid]
        return [i for i in range(lo, hi) if not used >> i & 1]

    def row(self, sid: int, p: str) -> int:
        """The last characters l whose signature (p, l) is not written yet, as a bit set (len(p) = 1)."""
        n = len(_PLAIN)
        return ~(self.sets[sid] >> (1 + n * (1 + self.index[p]))) & ((1 << n) - 1)

    def alive(self, sid: int, p: str) -> bool:
        """Whether some string starting with p has a signature not written yet."""
        if self.values is not None:
            return bool(self.live(sid, p))
        self.c.budget.charge(1, self.base)
        if self.fits(len(p), False) and not self.sets[sid] >> self.bit(p) & 1:
            return True
        if len(p) == _PREFIX:
            return self.fits(len(p), True) and self.row(sid, p) != 0
        return self.fits(len(p), True) and any(self.alive(sid, p + ch) for ch in _PLAIN)

    def walk(self, sid: int, p: str) -> Node:
        """P's characters after p (the opening quote written)."""
        options: list[Node] = []
        if self.values is not None:
            live = self.live(sid, p)
            if live and self.values[live[0]] == p:
                options.append(seq(QUOTE, Ref(self.after(sid, live[0]))))
            for ch in sorted({self.values[i][len(p)] for i in live if len(self.values[i]) > len(p)}):
                options.append(seq(Lit(ch), Ref(self.lazy((sid, p + ch), lambda q=p + ch: self.walk(sid, q)))))
        else:
            if self.fits(len(p), False) and not self.sets[sid] >> self.bit(p) & 1:
                options.append(seq(QUOTE, Ref(self.after(sid, self.bit(p)))))
            if len(p) < _PREFIX:
                for ch in _PLAIN:
                    if self.alive(sid, p + ch):
                        nxt = self.lazy((sid, p + ch), lambda q=p + ch: self.walk(sid, q))
                        options.append(seq(Lit(ch), Ref(nxt)))
            elif self.fits(len(p), True) and self.row(sid, p):
                low, high = max(self.low - len(p) - 1, 0), None if self.high is None else self.high - len(p) - 1
                ends = self.lazy(("ends", sid, p), lambda: self.close(sid, p))
                options.append(seq(Repeat(self.unit, low, high), Ref(ends)))
        self.c.budget.charge(len(options), self.base)
        return alt(*options) if options else Chars(())

    def close(self, sid: int, p: str) -> Node:
        """E(S, p): the last character l of a pair (p, l) not written yet, the closing quote, what follows."""
        free, ends, start = self.row(sid, p), [], self.bit(p, _PLAIN[0])
        while free:
            low = free & -free
            l = low.bit_length() - 1
            ends.append(Seq((self.closes[l], Ref(self.after(sid, start + l)))))
            free ^= low
        self.c.budget.charge(len(ends), self.base)
        return Alt(tuple(ends)) if len(ends) > 1 else ends[0]
