"""Keys of the other members of an object with `patternProperties`: exact, as lazy rules. A key is followed,
character by character, through each pattern's automaton (patterns are searches: a key matches when it
contains a match) and the trie of the listed names; at its closing quote the patterns it matched decide its
value: all of their schemas (a listed name is never such a key: it is its listed property); a key no pattern
matches takes `additionalProperties` (when allowed); with a propertyNames pattern, every key must match it.
Characters are taken by classes: the intervals between the patterns' and the trie's boundaries, in which
every character leads every automaton to the same state, so a rule has a handful of alternatives whatever the
alphabet. Keys are written without escapes (a subset).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .grammar import Alt, Chars, Lit, Node, Repeat, Seq
from .utf8 import normalize

KEY_OUT = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C), (0x7F, 0x7F))  # not in a key written as is
_KEY_IN = normalize(KEY_OUT, True)  # what a key may hold as it is (no surrogates)
DEAD = -1


class PatternKeys:
    """The patterns' automata and the value of each set of patterns a key may match. `values(set of pattern
    indexes)`: the value node (None: no value fits); `additional`: the value of a key no pattern matches (None:
    not allowed); `names`: a pattern every key must match (propertyNames), or None. A key's states: one per
    pattern, then (with `names`) that of `names`."""

    def __init__(self, c: Any, nodes: list[Node], values, additional: Node | None, names: Node | None = None) -> None:
        from .json_objects import pattern_automaton

        self.n = len(nodes)
        every = [*nodes, names] if names is not None else nodes
        self.automata = [pattern_automaton(c, n) for n in every]
        self.values, self.additional, self.names = values, additional, names is not None
        # (json_members.py) the rules of a key's rest off the trie, by (value, states); the values each reaches
        self.rules: dict[tuple, str] = {}
        self.reach: dict[tuple[int, ...], tuple[Node, ...]] = {}
        self.ends: dict[tuple[int, ...], Node | None] = {}  # states -> `value` (searches ask again and again)
        # what depends on the patterns alone, shared by every object of the compilation with these patterns
        # (a oneOf's branches merged with an object's patternProperties each have members of their own): the
        # character classes, (states, character) -> next states, and states -> `successors`
        kind = (tuple(map(id, self.automata)), self.names, additional is None)
        shared = c.memo.get(("pattern keys", kind))
        if shared is None:
            # (and where UTF-8 lengths change: a class's characters then take as many bytes each)
            bounds = sorted({0x80, 0x800, 0x10000, *boundaries(every)})
            # (the automata kept with it: their ids in the key are theirs while the memo lives)
            shared = c.memo["pattern keys", kind] = (self.automata, bounds, {}, {}, {})
        _, self.bounds, self.class_memo, self.steps, self.nexts = shared
        self.free_classes = self.classes([])  # (a key's characters once it is off the names' trie)

    def start(self) -> tuple[int, ...]:
        return tuple(a.initial.id for a in self.automata)

    def step(self, states: tuple[int, ...], ch: str) -> tuple[int, ...]:
        got = self.steps.get((states, ch))
        if got is None:
            got = self.steps[states, ch] = self._step(states, ch)
        return got

    def successors(self, states: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
        """The states a key's next character off the names' trie leads to, each once, in the order of the free
        classes (searches over keys' states follow every state's edges again and again: once each here)."""
        got = self.nexts.get(states)
        if got is None:
            nexts = (self.step(states, chr(lo)) for lo, _ in self.free_classes) if self.alive(states) else ()
            got = self.nexts[states] = tuple(dict.fromkeys(nexts))
        return got

    def _step(self, states: tuple[int, ...], ch: str) -> tuple[int, ...]:
        data = ch.encode("utf-8", "surrogatepass")
        out = []
        for a, s in zip(self.automata, states, strict=True):
            st = a.push_bytes(a.by_id[s], data) if s != DEAD else None
            out.append(st.id if st is not None else DEAD)
        return tuple(out)

    def value(self, states: tuple[int, ...]) -> Node | None:
        """The value of a key that ends here (None: no key may end here)."""
        if states in self.ends:
            return self.ends[states]
        got = self.ends[states] = self._value(states)
        return got

    def _value(self, states: tuple[int, ...]) -> Node | None:
        if self.names and (states[-1] == DEAD or not self.automata[-1].by_id[states[-1]].complete):
            return None
        matched = frozenset(i for i, (a, s) in enumerate(zip(self.automata[: self.n], states, strict=False))
                            if s != DEAD and a.by_id[s].complete)  # fmt: skip
        return self.values(matched) if matched else self.additional

    def alive(self, states: tuple[int, ...]) -> bool:
        if self.names and states[-1] == DEAD:
            return False
        return self.additional is not None or any(s != DEAD for s in states[: self.n])

    def classes(self, points: list[int]) -> list[tuple[int, int]]:
        """The key-character intervals between the patterns' boundaries and `points` (single characters: a trie
        node's children, met again for every set of members)."""
        key = tuple(points)
        got = self.class_memo.get(key)
        if got is None:
            cuts = {*self.bounds, *(p for q in points for p in (q, q + 1))}
            got = self.class_memo[key] = intervals(cuts, _KEY_IN)
        return got


def intervals(cuts: Iterable[int], allowed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The code-point intervals between `cuts` (each where an interval starts), within the `allowed` ranges."""
    out, lo = [], 0
    for cut in [*sorted(cuts), 0x110000]:
        if cut > lo:
            out.append((lo, cut - 1))
            lo = cut
    return [(max(a, x), min(b, y)) for a, b in out for x, y in allowed if max(a, x) <= min(b, y)]


def boundaries(nodes: Iterable[Node], rules: bool = False) -> set[int]:
    """Code points where the nodes' character sets start or stop (the characters between two are alike to them);
    `rules`: references to other rules may occur (skipped: their sets are theirs), else a node is a pattern's."""
    out: set[int] = set()
    todo = list(nodes)
    while todo:
        n = todo.pop()
        if isinstance(n, Lit):
            for ch in n.text:
                out |= {ord(ch), ord(ch) + 1}
        elif isinstance(n, Chars):
            for lo, hi in normalize(n.ranges, False):
                out |= {lo, hi + 1}
        elif isinstance(n, (Seq, Alt)):
            todo.extend(n.items if isinstance(n, Seq) else n.options)
        elif isinstance(n, Repeat):
            todo.append(n.item)
        elif not rules:  # (a pattern is characters, sequences, alternatives and repetitions only)
            raise TypeError(f"unexpected node in a pattern: {n!r}")
    return out
