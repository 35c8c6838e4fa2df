"""`uniqueItems`: arrays whose items are pairwise different, as lazy rules (one per set of what the items written
so far used up: only the sets a document visits are built).

    A(S) ::= "" (when |S| >= minItems) | "," space ITEM-not-in-S A(S + it)      (no comma before the first item)

- items of an enum / const (and booleans): exact, each value at most once (S: the values written);
- plain strings (lengths only): a subset, items that differ in their first or their last character, as
  written (`UniqueStrings`; S: the (first, last) pairs used; the empty string is one more; every character
  beyond ASCII counts as one; no escape first or last, so the written characters are the string's). Two
  strings with different first or last characters are different, so the array is unique; ["tag1", "tag2"]
  and ["size", "mode"] are generated, ["a1b", "a2b"] is not;
- any other items: no rule here (json_values.py writes at most one item, a subset).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from .grammar import EMPTY, Alt, Chars, LazyRule, Lit, Node, Ref, Repeat, Seq, alt, seq
from .json_keywords import VOCABULARY

SPACE = Ref("space")
QUOTE = Lit('"')
COMMA = seq(Lit(","), SPACE)
_FIRST = [chr(b) for b in range(0x20, 0x7F) if chr(b) not in '"\\']  # first characters told apart
_SYMBOLS: list[Node] = [*map(Lit, _FIRST), Chars(((0, 0x7F),), negated=True)]  # a first / last character
_MAX_STRINGS = 256  # unique strings written at most (each adds about 190 lazy rules to the program)
_MAX_VALUES = 2048  # enums of more values: at most one item (the rules of the sets written list the rest)
_VALUE_TEXT = 200_000  # enum text the rules of one array list at most (an item's rule lists the values left)


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
            name = self.names[key] = self.c.add_lazy(f"{self.base}-{tag}", build)
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
    from .json_formats import FORMATS
    from .json_values import capped, literal_texts

    item = c.deref(item_schema, path)
    if not isinstance(item, dict):
        return None
    keys = set(item) & VOCABULARY
    if "format" in keys and item["format"] not in FORMATS:  # (an unknown format is an annotation)
        keys.discard("format")
    if "enum" in item or "const" in item:
        values = [item["const"]] if "const" in item else item["enum"]
        if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
            from .json_unique_objects import large_string_enum  # (a trie walk where listing every value is long)

            node = large_string_enum(c, item, values, lo, hi, path, _MAX_VALUES, _VALUE_TEXT)
            if node is not None:
                return node
        if not isinstance(values, list) or len(values) > _MAX_VALUES:
            return None
        groups = literal_texts(c, values, item, path)
        options = {g[0]: (alt(*map(Lit, g)), SPACE) for g in groups}
        size = sum(len(t) for g in groups for t in g) + len(groups)  # (each item's rule lists every value left)
        c.budget.charge(size, path)
        most = max(1, _VALUE_TEXT // size)
        hi = most if hi is None else min(hi, most)
    elif item.get("type") == "boolean" and keys <= {"type"}:
        options = {"true": (Lit("true"), SPACE), "false": (Lit("false"), SPACE)}
    elif item.get("type") == "string" and keys <= {"type", "minLength", "maxLength"}:
        low, high = int(item.get("minLength", 0)), item.get("maxLength")
        high = capped(None if high is None else int(high), c.max_string_length, low)
        c.use("space")
        # (not also told apart by longer prefixes: a mask inside an item walks every token's prefix, one rule
        # each with its ~94 successors, past max_rules on a 49k vocabulary: the first mask of an item failed)
        key = ("unique-strings", low, high, lo, hi)
        strings = shared(c, key, lambda: UniqueStrings(c, c.prefix("unique"), low, high, lo, hi))
        return strings.entry() if strings.hi >= lo else None
    elif item.get("type") == "string" and keys <= {"type", "format", "pattern"} and lo <= 1:
        return _matches_array(c, item, lo, hi, path)
    else:
        from .json_unique_objects import unique_objects  # (objects told apart by a property written first)

        return unique_objects(c, item_schema, item, lo, hi, path)
    c.use("space")
    if len(options) < lo or (hi is not None and hi < lo):
        return None
    return UniqueArray(c, c.prefix("unique"), options, lo, hi).entry()


def shared(c: Any, key: tuple, make) -> Any:
    """The rules of arrays alike, one set per compilation (`make()` the first time): an array's rules are its
    items' only, between the brackets, so ten arrays of `type: string` in one schema share the sets their
    documents visit, and a mask at the start of a first item names its ~8,800 successors once, not ten times
    (a document of ten such arrays went past max_rules)."""
    array = c.patterns.get(key)
    if array is None:
        array = c.patterns[key] = make()
        c.undo.append((c.patterns, key))  # (a part rolled back forgets it)
    return array


class UniqueSets(UniqueArray):
    """The lazy rules of unique items told apart by pairs of characters, the sets written (`used`, bit sets of
    up to `pairs` bits) numbered as first met (`sets`): a rule's name and key are small numbers, not `used`.

    An item's rule names the rule after its closing quote once per pair it may end with, for every first
    character a token may start it with: about 94 * 94 names in a mask at an item's start, most never reached.
    So such a successor, `after(sid, bit)` ::= closing A(S + bit), is named by one number (sid * pairs + bit)
    and its set is worked out only when it is built (reached)."""

    def __init__(self, c: Any, base: str, lo: int, hi: int | None, pairs: int) -> None:
        super().__init__(c, base, {}, lo, hi)
        self.pairs = pairs
        self.sets: list[int] = []  # set id -> its bits
        self.set_ids: dict[int, int] = {}  # bits -> set id
        self.afters: dict[int, str] = {}  # sid * pairs + bit -> the name of after(sid, bit)
        self.closing: Node = SPACE  # what follows an item's closing quote
        self.intern(0)

    def entry(self) -> Node:
        return seq(Lit("["), SPACE, Ref(self.lazy(("first",), lambda: self.body(0, True))), Lit("]"), SPACE)

    def intern(self, used: int) -> int:
        sid = self.set_ids.get(used)
        if sid is None:
            sid = self.set_ids[used] = len(self.sets)
            self.sets.append(used)
        return sid

    def lazy(self, key: tuple, build) -> str:
        """(Named by number: a key holds a set id.)"""
        name = self.names.get(key)
        if name is None:
            name = self.names[key] = self.c.add_lazy(f"{self.base}-{len(self.names)}", build)
        return name

    def after(self, sid: int, bit: int) -> str:
        """The name of closing A(sets[sid] + bit), the rule after an item's closing quote (cheap: one is named per
        pair an item may end with; see the class)."""
        key = sid * self.pairs + bit
        name = self.afters.get(key)
        if name is None:
            name = self.afters[key] = self.c.fresh_lazy(f"{self.base}-x{key:x}")
            self.c.lazy[name] = _After(self, key)
        return name

    def successor(self, key: int) -> Node:
        sid, bit = divmod(key, self.pairs)
        return seq(self.closing, self.body(self.intern(self.sets[sid] | 1 << bit), False))


class _After(LazyRule):
    """The lazy rule after(sid, bit) of `array`: one small object (a LazyRule's build and witness, a closure
    and two partials, were three more per name, and most of a mask's garbage-collector time in the masks at an
    item's start, which name some 8,800 of them)."""

    __slots__ = ("array", "key")
    witness = EMPTY
    __setattr__ = object.__setattr__  # (its own slots, set once: not the frozen dataclass's check per field)

    def __init__(self, array: UniqueSets, key: int) -> None:  # (no dataclass fields: build is the method)
        self.array, self.key = array, key

    def build(self) -> Node:
        return self.array.c.build_lazy(partial(self.array.successor, self.key))


class UniqueStrings(UniqueSets):
    """Unique strings told apart by their (first, last) characters: bit f * len(_SYMBOLS) + l of `used` is the
    pair (f, l) written (a one-character string is (f, f)), the last bit the empty string.

        A(S) ::= "" | "," space '"' I(S)      I(S) ::= F-f B(S, f)   for a symbol f with a pair left
        B(S, f) ::= '"' space A(S + (f, f)) | middle-char{..} L-l '"' space A(S + (f, l))   for (f, l) not in S
    """

    def __init__(self, c: Any, base: str, low: int, high: int | None, lo: int, hi: int | None) -> None:
        n = len(_SYMBOLS)
        self.single, self.longer = low <= 1 and high != 0, high is None or high >= 2
        self.empty = n * n  # (the bit of the empty string)
        self.possible = n * n if self.longer else n if self.single else 0  # pairs an item may use
        total = min(self.possible + (low == 0), _MAX_STRINGS)
        super().__init__(c, base, lo, hi, n * n + 1)
        self.hi = min(hi, total) if hi is not None else total
        unit = c.use("length-char" if low > 0 else "char")  # (no surrogate pair in a minLength: json_any.py)
        self.middle = Repeat(unit, max(low - 2, 0), None if high is None else high - 2) if self.longer else None
        self.low = low
        self.closes = [(Lit(ch + '"'),) for ch in _FIRST] + [(_SYMBOLS[-1], QUOTE)]  # a last character, '"'

    def row(self, used: int, f: int) -> int:
        """The last characters l whose pair (f, l) is still free, as a bit set."""
        if not self.longer:
            return ~(used >> (f * len(_SYMBOLS))) & self.single << f
        return ~(used >> (f * len(_SYMBOLS))) & ((1 << len(_SYMBOLS)) - 1)

    def body(self, sid: int, first: bool) -> Node:
        """A(S); past the first item the items' characters are their own rule, after the comma and the quote (a
        walk that closes a string, `x",`, reaches A(S) for each last character x: these stay small)."""
        used = self.sets[sid]
        count = used.bit_count()
        options: list[Node] = [EMPTY] if count >= self.lo else []
        empty = used >> self.empty & 1
        self.c.budget.charge(len(_SYMBOLS), self.base)
        if count < self.hi and ((self.low == 0 and not empty) or count - empty < self.possible):
            if first:
                options.append(seq(QUOTE, self.items(sid)))
            else:
                options.append(seq(COMMA, QUOTE, Ref(self.lazy(("items", sid), lambda: self.items(sid)))))
        return alt(*options) if options else Chars(())

    def items(self, sid: int) -> Node:
        """An item after its opening quote: the empty string or a first character with a pair left."""
        used, items = self.sets[sid], []
        if self.low == 0 and not used >> self.empty & 1:
            items.append(seq(QUOTE, Ref(self.after(sid, self.empty))))
        for f, sym in enumerate(_SYMBOLS):
            if self.row(used, f):
                items.append(seq(sym, Ref(self.lazy(("last", sid, f), lambda f=f: self.last(sid, f)))))
        self.c.budget.charge(len(items), self.base)
        return alt(*items)

    def last(self, sid: int, f: int) -> Node:
        """After the first character f: the closing quote (a one-character string) or more, then the last one
        (each alternative a few elements: the successors are most of the rule, and of the mask's work)."""
        free, options = self.row(self.sets[sid], f), []
        if self.single and free >> f & 1:
            options.append(seq(QUOTE, Ref(self.after(sid, f * len(_SYMBOLS) + f))))
        if self.middle is not None and free:
            # (E its own rule, its alternatives read in order: in a larger rule the compiler hashes every one)
            options.append(seq(self.middle, Ref(self.lazy(("ends", sid, f), lambda: self.close(sid, f)))))
        self.c.budget.charge(len(options), self.base)
        return alt(*options) if options else Chars(())

    def close(self, sid: int, f: int) -> Node:
        """E(S, f) ::= L-l '"' space A(S + (f, l)) for each (f, l) not in S. (The quote before the successor's
        reference: a rule is built when the kernel's closure reaches it, and a walk passes many a last character
        without closing the string; `l` then a successor starting at the quote built ~9,000 rules in 15 masks.)"""
        free, ends, start = self.row(self.sets[sid], f), [], f * len(_SYMBOLS)
        while free:
            low = free & -free
            l = low.bit_length() - 1
            ends.append(Seq((*self.closes[l], Ref(self.after(sid, start + l)))))
            free ^= low
        self.c.budget.charge(len(ends), self.base)
        return Alt(tuple(ends)) if len(ends) > 1 else ends[0]


def _matches_array(c: Any, item: dict, lo: int, hi: int | None, path: str) -> Node | None:
    """Unique strings of a pattern and / or a format (UniqueMatches), or None when their automaton is too large."""
    from .json_formats import FORMATS
    from .json_string_product import explored
    from .regex import parse_pattern

    fmt = item.get("format") if item.get("format") in FORMATS else None
    pattern = item.get("pattern")
    key = ("unique-matches", pattern if isinstance(pattern, str) else None, fmt, lo, hi)
    array = c.patterns.get(key)
    if array is not None:
        return array.entry() if array.possible() or not lo else None
    node = None
    if isinstance(pattern, str):
        node = parse_pattern(pattern, f"{path}/pattern", c.budget, search=not c.anchored_patterns)
    if node is None and fmt is None:
        return None
    points = tuple(p for ch in _FIRST for p in (ord(ch), ord(ch) + 1))  # (each first / last character apart)
    product = explored(c, node, fmt, path, points, whole=True)
    if product is None:
        return None
    c.use("space")
    array = shared(c, key, lambda: UniqueMatches(c, c.prefix("unique"), product, lo, hi))
    return array.entry() if array.possible() or not lo else None


class UniqueMatches(UniqueSets):
    """Unique strings of a pattern and / or a format (json_string_product.py's automaton, `product`), told apart
    like UniqueStrings by their (first, last) characters, both printable ASCII as written. An item goes on only
    toward an end whose last character still makes a free pair with its first (`ends`: per state, the last
    characters of the ends it reaches), so generation never walks into a dead end.

        A(S) ::= "" | "," space '"' f R(S, q after f, f)
        R(S, q, f) ::= l '"' space A(S + (f, l))  (l ends a match, (f, l) free) | class R(S, q after class, f)
    """

    def __init__(self, c: Any, base: str, product: Any, lo: int, hi: int | None) -> None:
        n = len(_FIRST)
        super().__init__(c, base, lo, hi, n * n)
        self.hi = min(hi if hi is not None else _MAX_STRINGS, n * n, _MAX_STRINGS)
        self.p = product
        edges = [product.out(i) for i in range(len(product.states))]  # (all of them: explored)
        index = {ord(ch): i for i, ch in enumerate(_FIRST)}
        self.singles = [{index[lo]: j for j, ranges in out.items() for lo, hi in ranges if lo == hi and lo in index}
                        for out in edges]  # fmt: skip
        last = [sum(1 << i for i, j in s.items() if product.final[j]) for s in self.singles]
        self.ends = _reaching(c, edges, last, base)
        self.closes = [Lit(ch + '"') for ch in _FIRST]  # a last character, '"'

    def free(self, used: int, f: int) -> int:
        """The last characters l whose pair (f, l) is not written yet, as a bit set."""
        n = len(_FIRST)
        return ~(used >> (f * n)) & ((1 << n) - 1)

    def body(self, sid: int, first: bool) -> Node:
        used = self.sets[sid]
        options: list[Node] = [EMPTY] if used or not self.lo else []  # (minItems at most 1)
        if used.bit_count() < self.hi:
            items: list[Node] = []
            for f, q in self.singles[0].items():
                free = self.free(used, f)
                if self.p.final[q] and free >> f & 1:
                    items.append(seq(QUOTE, self.closes[f], Ref(self.pair(sid, f, f))))  # (one character)
                if self.ends[q] & free:
                    items.append(seq(QUOTE, Lit(_FIRST[f]), Ref(self.lazy((sid, q, f), lambda q=q, f=f:
                                                                           self.rest(sid, q, f)))))  # fmt: skip
            self.c.budget.charge(len(items), self.base)
            if items:
                options.append(alt(*items) if first else seq(COMMA, alt(*items)))
        return alt(*options) if options else Chars(())

    def possible(self) -> bool:
        """Whether some string is an item (the first has every pair free)."""
        return any(self.p.final[q] or self.ends[q] for q in self.singles[0].values())

    def pair(self, sid: int, f: int, last: int) -> str:
        return self.after(sid, f * len(_FIRST) + last)

    def rest(self, sid: int, q: int, f: int) -> Node:
        """The item's characters after its first, from product state q."""
        from .json_strings import json_encoded

        free, options = self.free(self.sets[sid], f), []
        for l, j in self.singles[q].items():
            if self.p.final[j] and free >> l & 1:
                options.append(Seq((self.closes[l], Ref(self.pair(sid, f, l)))))
        for j, ranges in self.p.out(q).items():
            if self.ends[j] & free:
                nxt = self.lazy((sid, j, f), lambda j=j: self.rest(sid, j, f))
                options.append(seq(json_encoded(Chars(tuple(ranges))), Ref(nxt)))
        self.c.budget.charge(len(options), self.base)
        return alt(*options) if options else Chars(())


def _reaching(c: Any, edges: list[dict], last: list[int], where: str) -> list[int]:
    """Per state, the union of `last` over the states it reaches (itself included): a fixpoint."""
    out = list(last)
    changed = True
    while changed:
        changed = False
        c.budget.charge(sum(map(len, edges)), where)
        for i in range(len(edges) - 1, -1, -1):
            bits = out[i]
            for j in edges[i]:
                bits |= out[j]
            if bits != out[i]:
                out[i], changed = bits, True
    return out
