"""Strings that a `pattern` and a `format` both allow, with minLength..maxLength characters: exact, as lazy rules
over the product of their automata and a character count.

    R(q, n) ::= '"' space                         (q accepting in every automaton, lo <= n)
              | class-c R(q after c, n + 1)        (for each class of characters, when a string goes on to an end)

`pattern` (its search form, as json_values.py writes it alone) and `format` (json_formats.py's grammar) each
become a small automaton over code points; characters are taken by classes, the intervals between the places
where their character sets start or stop (every character of one leads every automaton to the same state, as
in json_keys.py), so a rule has a handful of alternatives whatever the alphabet. The product's states are
explored once, at compile time (at most `_STATES` of them, charged to the Budget), and each one's shortest way
to an end is known, so a character is offered only when the string can still end within maxLength: generation
never walks into a dead end. A format's strings are written as they are (no escapes: a subset); a pattern alone
also takes the escaped characters. Beyond `_STATES` (or a minLength above `_MAX_LOW`) the caller keeps its
approximation (a subset) or its refusal.
"""

from __future__ import annotations

from typing import Any

from .errors import ConstraintError
from .grammar import Chars, Grammar, Lit, Node, Ref, alt, seq
from .json_keys import KEY_OUT, boundaries, intervals
from .json_strings import json_encoded
from .utf8 import normalize

QUOTE, SPACE = Lit('"'), Ref("space")
_STATES = 2000  # product states explored at most (when all are needed at once: json_unique.py)
_STEPS = 40_000  # automaton steps of the exploration at most (states times classes times automata)
_SEARCH = 512  # states one search for the nearest end visits at most (beyond: no end, a subset)
_MAX_LOW = 200  # minLength handled exactly at most (a layer of states per character below it)
_SURROGATES = ((0xD800, 0xDFFF),)


def string_product(c: Any, pattern: Node | None, fmt: str | None, lo: int, hi: int | None, path: str) -> Node | None:
    """The string (quotes and the space after included) matching `pattern` and `fmt` with lo..hi characters, or
    None when the product is too large to explore (the caller then approximates or refuses)."""
    if lo > _MAX_LOW:
        return None
    product = explored(c, pattern, fmt, path)
    if product is None:
        return None
    rules = _Rules(c, product, lo, hi)
    if not rules.viable(0, 0):
        if product.cut:  # (not known to match nothing: the caller's approximation)
            return None
        # llama.cpp's choice on the API routes: a pattern matches the whole string (say so: "^2026-" alone is "2026-")
        whole = " (matched as a whole string)" if getattr(c, "anchored_patterns", False) else ""
        what = " and ".join(x for x, v in ((f"pattern{whole}", pattern), (f"format {fmt!r}", fmt)) if v is not None)
        raise ConstraintError(
            f"{path}: no string matches the {what} with {lo} to {hi} characters"
            if hi is not None
            else f"{path}: no string matches the {what} with {lo} or more characters"
        )
    return seq(QUOTE, Ref(rules.rule(0, 0)))


def explored(c: Any, pattern: Node | None, fmt: str | None, path: str, points: tuple = (),
             whole: bool = False) -> _Product | None:  # fmt: skip
    """The product automaton of `pattern` and `fmt` (None: a regex format), its classes cut at `points` too
    (characters that must be told apart); `whole`: every state reached now (None: too many)."""
    from .json_formats import format_nodes
    from .json_objects import pattern_automaton

    if fmt == "regex":  # (a regex nests groups: no finite automaton; written with escapes)
        return None
    key = ("product", pattern, fmt, points)  # (one per compilation: properties often share a pattern)
    known = c.patterns.get(key)
    if known is not None:
        return known if not whole or known.explore() else None
    automata, bounds = [], {0x80, 0x800, 0x10000, *points}
    if pattern is not None:
        automata.append(pattern_automaton(c, pattern))
        bounds |= boundaries([pattern], rules=True)
    if fmt is not None:
        rules = format_nodes(fmt)
        automata.append(_format_automaton(c, fmt, rules))
        bounds |= boundaries(rules.values(), rules=True)
    allowed = normalize((*KEY_OUT, *_SURROGATES), True) if fmt is not None else normalize(_SURROGATES, True)
    product = c.patterns[key] = _Product(c, automata, intervals(bounds, allowed), path)
    return product if not whole or product.explore() else None


def patterns_disjoint(c: Any, a: Node, b: Node, path: str) -> bool:
    """Whether no string matches both patterns (their search forms): their product explored whole reaches no
    state both accept (False too when it is too large to explore)."""
    from .json_objects import pattern_automaton

    key = ("disjoint", frozenset((a, b)))  # (a oneOf checks each pair of branches both ways)
    known = c.patterns.get(key)
    if known is None:
        bounds = {0x80, 0x800, 0x10000, *boundaries([a, b], rules=True)}
        automata = [pattern_automaton(c, a), pattern_automaton(c, b)]
        product = _Product(c, automata, intervals(bounds, normalize(_SURROGATES, True)), path)
        known = c.patterns[key] = product.explore() and not any(product.final)
    return known


def _format_automaton(c: Any, fmt: str, rules: dict[str, Node]) -> Any:
    from .automaton import Automaton
    from .compile import compile_grammar

    key = ("format", fmt)
    automaton = c.patterns.get(key)
    if automaton is None:
        automaton = c.patterns[key] = Automaton(compile_grammar(Grammar(dict(rules), root=fmt), c.budget, lazy=True))
    return automaton


class _Product:
    """The product automaton's states (tuples of automaton state ids, numbered from 0, the start) as they are
    reached: each one's edges by class (`out(i)`, stepped once), whether it accepts (`final`) and its fewest
    characters to an end (`dist(i)`, a search forwards). `explore()` reaches them all at once (json_unique.py)."""

    def __init__(self, c: Any, automata: list, classes: list[tuple[int, int]], path: str) -> None:
        self.c, self.automata, self.classes, self.path = c, automata, classes, path
        self.states: list[tuple[int, ...]] = []
        self.index: dict[tuple[int, ...], int] = {}
        self.edges: dict[int, dict[int, list[tuple[int, int]]]] = {}  # state -> next state -> its classes
        self.final: list[bool] = []
        self.dists: dict[int, int | None] = {}
        self.moved: dict[tuple[int, int], list[int]] = {}  # (automaton, its state) -> its state after each class
        self.cut = False  # whether a search stopped at _SEARCH states (an end it did not find may exist)
        self.add(tuple(a.initial.id for a in automata))

    def add(self, states: tuple[int, ...]) -> int:
        i = self.index.get(states)
        if i is None:
            i = self.index[states] = len(self.states)
            self.states.append(states)
            self.final.append(all(a.by_id[s].complete for a, s in zip(self.automata, states, strict=True)))
        return i

    def out(self, i: int) -> dict[int, list[tuple[int, int]]]:
        """The states after each class from state i (stepped the first time asked)."""
        edges = self.edges.get(i)
        if edges is None:
            self.c.budget.charge(len(self.classes) * len(self.automata), self.path)
            moves = [self.moves(k, s) for k, s in enumerate(self.states[i])]
            targets: dict[tuple[int, ...], list[tuple[int, int]]] = {}
            if len(moves) == 1:
                for cls, j in zip(self.classes, moves[0], strict=True):
                    if j >= 0:
                        targets.setdefault((j,), []).append(cls)
            else:
                for cls, nxt in zip(self.classes, zip(*moves, strict=True), strict=True):
                    if -1 not in nxt:
                        targets.setdefault(nxt, []).append(cls)
            edges = self.edges[i] = {self.add(nxt): ranges for nxt, ranges in targets.items()}
        return edges

    def moves(self, k: int, sid: int) -> list[int]:
        """Automaton k's state after each class from its state `sid` (-1: none), once per state: an ASCII class
        whose character every stack treats as an earlier class's (`advance_of`) goes where that one went."""
        key = (k, sid)
        known = self.moved.get(key)
        if known is not None:
            return known
        a = self.automata[k]
        st, ascii, out = a.by_id[sid], [None] * 0x80, []
        for lo, _ in self.classes:
            if lo < 0x80:
                nxt = ascii[lo]
                if nxt is None:
                    bits, after = a.advance_of(st, lo)
                    nxt = after.id if after is not None else -1
                    for b in range(lo, 0x80):  # (the classes are in order: the bytes below are done)
                        if bits >> b & 1:
                            ascii[b] = nxt
            else:
                after = a.push_bytes(st, chr(lo).encode("utf-8"))
                nxt = after.id if after is not None else -1
            out.append(nxt)
        self.moved[key] = out
        return out

    def explore(self) -> bool:
        """Every reachable state's edges now (False: more than _STATES states or _STEPS steps)."""
        i, steps = 0, len(self.classes) * len(self.automata)
        while i < len(self.states):
            if len(self.states) > _STATES or (i + 1) * steps > _STEPS:
                return False
            self.out(i)
            i += 1
        return True

    def dist(self, i: int) -> int | None:
        """Fewest characters from state i to an accepting one: a search forwards over at most _SEARCH states
        (None: none found; the states on the way found know theirs, so a string begun goes on to its end)."""
        if i in self.dists:
            return self.dists[i]
        parent: dict[int, int] = {i: -1}
        layer, found = [i], None
        while layer and found is None and len(parent) <= _SEARCH:
            nxt = []
            for j in layer:
                if self.final[j] or self.dists.get(j) is not None:
                    found = j
                    break
                for k in self.out(j):
                    if k not in parent:
                        parent[k] = j
                        nxt.append(k)
            layer = nxt
        if found is None:
            self.cut = self.cut or len(parent) > _SEARCH
            self.dists[i] = None
            return None
        path = [found]
        while parent[path[-1]] != -1:
            path.append(parent[path[-1]])
        base = 0 if self.final[found] else self.dists[found]
        for steps, j in enumerate(path):  # (found first: its own distance, then one more per state back)
            self.dists.setdefault(j, base + steps)
        return self.dists[i]


class _Rules:
    """The lazy rules R(state, n) of one string; n counts characters up to maxLength (without one: up to
    minLength, past which the count no longer matters)."""

    def __init__(self, c: Any, product: _Product, lo: int, hi: int | None) -> None:
        self.c, self.p, self.lo, self.hi = c, product, lo, hi
        self.names: dict[tuple[int, int], str] = {}
        self.memo: dict[tuple[int, int], bool] = {}
        self.base = c.prefix("string")
        self.encoded: dict[tuple, Node] = {}

    def rule(self, state: int, n: int) -> str:
        key = (state, n if self.hi is not None else min(n, self.lo))
        name = self.names.get(key)
        if name is None:
            name = self.names[key] = self.c.add_lazy(f"{self.base}-{key[0]}-{key[1]}", lambda: self.body(*key),
                                                     seq(QUOTE, SPACE))  # fmt: skip
        return name

    def viable(self, state: int, n: int) -> bool:
        """Whether a string goes on from `state`, n characters written, to an end within lo..hi characters: past
        lo, its shortest way fits; below, some state reached at exactly lo characters has one that fits."""
        dist = self.p.dist(state)
        if dist is None or (self.hi is not None and n + dist > self.hi):
            return False
        if n >= self.lo:
            return True
        key = (state, n)
        known = self.memo.get(key)
        if known is None:  # (n < lo <= _MAX_LOW: the recursion is that deep at most)
            edges = self.p.out(state)
            self.c.budget.charge(len(edges), self.p.path)
            known = self.memo[key] = any(self.viable(j, n + 1) for j in edges)
        return known

    def body(self, state: int, n: int) -> Node:
        options: list[Node] = []
        if self.p.final[state] and n >= self.lo:
            options.append(seq(QUOTE, SPACE))
        if self.hi is None or n < self.hi:
            for j, ranges in self.p.out(state).items():
                if self.viable(j, n + 1):
                    options.append(seq(self.chars(ranges), Ref(self.rule(j, n + 1))))
        self.c.budget.charge(len(options), self.p.path)
        return alt(*options) if options else Chars(())

    def chars(self, ranges: list[tuple[int, int]]) -> Node:
        key = tuple(ranges)
        node = self.encoded.get(key)
        if node is None:
            node = self.encoded[key] = json_encoded(Chars(key))
        return node
