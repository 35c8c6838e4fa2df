"""The members of a JSON object, in any order, each listed property at most once: exact, and built lazily.

    object  ::= "{" space M({},0) "}" space
    M(S,k)  ::= "," space KEYS(S,k) | ""             (the "" only when S holds every required property,
                                                      their dependencies, and enough members)
    KEYS(S,k) ::= "\\"" T(S,k,"")  |  "\\"" O("") "\\"" space ":" space additional M(S,k+1)
               |  pattern-kv M(S,k+1)
    T(S,k,w)  ::= c..c T(S,k,wc..c) ...               (a branching node below w in the trie of the offered
                                                      names: a run of nodes with one way on is one literal)
               |  c..c "\\"" space ":" space value-p M(S+p,k)   (p the one offered name below: written whole)
               |  "\\"" space ":" space value-p M(S+p,k)        (w is the offered name p)
    O(w)      ::= c O(wc) | [^children "\\\\ controls] other-key-rest | ""   (another key: no name; the "" only
                                                      where no name ends; one rule per trie node, whatever S)

S is the set of listed properties written so far (a bit set), k the other members (capped where counts stop
mattering); the first member has no comma (M at the start is FIRST). Every rule above is a `LazyRule`: built
the first time the automaton reaches it, so an object of 40 properties costs the sets a document visits, not
2^40 rules; the other keys' rules O are the same for every S (and for every object of the same names), so a set
of members adds only the branching nodes of its names' trie that a walk reaches (T(S,k,"") written into M(S,k)
when the names are short: a walk that reaches a set goes down its keys, and one rule costs the kernel one
NEED_RULE, not two). The key trie is that of the
listed names as JSON text (escapes written as JSON writes them); other keys are written without escapes (a
subset of the keys), so none decodes to a listed name. `required`,
`dependentRequired` (made listed properties when absent), `minProperties` and `maxProperties` are exact on
the listed properties; other members count at most once towards `minProperties` (two may share a key) and
each towards `maxProperties` (a bound on the distinct ones). With `patternProperties` the other members are
`pattern-kv` (json_objects.py), never the trie's other keys.

`ordered` (llama.cpp's listed order, for an object of many listed properties: json_objects.py): the listed
properties offered are those after the last one written, up to the first required one, and none after another
member; the same rules, so a key is a walk down the trie of the names that may come next, not one parse per
property.
"""

from __future__ import annotations

import json
from typing import Any

from .grammar import EMPTY, Alt, Chars, Lit, Node, Ref, Repeat, Seq, alt, seq
from .json_keys import KEY_OUT

SPACE = Ref("space")
COLON = seq(SPACE, Lit(":"), SPACE)
QUOTE = Lit('"')
KEY_CHAR = Chars(KEY_OUT, negated=True)  # a key character written as it is
# key-trie subtrees of at most _INLINE nodes, down to _DEPTH characters, are written into their parent's rule
# (each character nests an alternative in a sequence: within the grammar's max_nesting)
_INLINE, _DEPTH = 32, 12
_ROOT_INLINE = 256  # (`trie_root`) a names trie of at most this many characters is written into a set's rule


_WIDE = "\x80"  # the first character UTF-8 writes in more than one byte
_WIDE_RANGE = (0x80, 0x10FFFF)
_WIDE_KEY_CHAR = Chars((_WIDE_RANGE,))  # a key character past ASCII (all are raw)


_KEY_OUT_POINTS = frozenset(c for lo, hi in KEY_OUT for c in range(lo, hi + 1))


def _is_raw(ch: str) -> bool:
    """Whether a key may hold `ch` as it is (json_keys.KEY_OUT: no escape needed)."""
    return ord(ch) not in _KEY_OUT_POINTS


class Members:
    """Builds the lazy member rules of one object. `items`: (name, value rule) of the listed properties that
    may be written; `excluded`: names never written (neither listed nor other keys); `extra`: ("additional",
    value), ("patterns", json_keys.PatternKeys), ("pattern", key-value node), ("string", None: json_values.py's
    strings other than the names) or None; `deps`: name -> names required with it."""

    def __init__(
        self,
        c: Any,
        base: str,
        items: list[tuple[str, Node]],
        excluded: list[str],
        required: set[str],
        deps: dict[str, list[str]],
        extra: tuple[str, Node] | None,
        min_props: int,
        max_props: int | None,
        max_extra: int | None,
        standalone: bool = False,
        ordered: bool = False,
    ) -> None:
        self.c = c
        self.ordered = ordered  # listed properties in the order listed, other members after them (module doc)
        self.standalone = standalone  # one member, what follows it the caller's (other_keys)
        self.base = base
        self.names = [n for n, _ in items]
        self.values = [v for _, v in items]
        self.tails: list[Node | None] = [None] * len(items)  # per listed property: `tail`
        index = {n: i for i, n in enumerate(self.names)}
        self.required = sum(1 << index[r] for r in required)
        # (a name listed twice is one bit: a sum of the bits would require another property)
        self.deps = {index[p]: sum(1 << index[d] for d in set(ds)) for p, ds in deps.items() if p in index}
        self.excluded = excluded
        self.extra = extra
        self.min_props, self.max_props, self.max_extra = min_props, max_props, max_extra
        # k beyond this many changes nothing (maxProperties, the cap on other members, or "one more" for min)
        # (ordered: k > 0 also says another member was written, so no listed one follows)
        self.k_cap = max(max_props or 0, max_extra or 0, 1 if min_props or ordered else 0)
        self.trie: list[dict[str, int]] | None = None  # built on first use: children by character, per node
        self.ends: dict[int, int] = {}  # trie node -> the listed property (index) whose name ends there
        self.plain: list[bool] = []  # per trie node: its prefix holds no character another key cannot hold
        self.runs: dict[int, tuple[str, int]] = {}  # trie node -> `run_from` it
        self.rules: dict[tuple, str] = {}
        self.viable_memo: dict[tuple[int, int], bool] = {}
        # no names to tell apart: another key is any string, escapes too (exact)
        self.any_key = extra is not None and extra[0] == "additional" and not self.names and not excluded
        if self.any_key:
            c.use("string")
        self.offered_memo: dict[tuple[int, int], int] = {}
        self.pattern_memo: dict[tuple, bool] = {}  # (json_keys.py) whether a key can end from a state
        self.steps_memo: dict[tuple, list] = {}  # `_pattern_steps`, by (trie node, states, other keys offered)

    # -- the object ---------------------------------------------------------------------------------------------

    def entry(self) -> Node:
        """What follows "{" space: the members (lazily) then nothing (the caller writes "}")."""
        needed = [self.values[i] for i in range(len(self.names)) if self.required >> i & 1]
        witness = seq(*needed) if needed else EMPTY
        return Ref(self.rule(("first", 0, 0), lambda: self.first(), witness))

    def rule(self, key: tuple, build, witness: Node = EMPTY, label: str | None = None) -> str:
        """The lazy rule of `key`, made on first call (named by `label`, else by the key)."""
        name = self.rules.get(key)
        if name is None:
            name = self.rules[key] = self.c.add_lazy(label or f"{self.base}-{'-'.join(map(str, key))}", build, witness)
        return name

    def members(self, done: int, k: int) -> Node:
        if self.standalone:
            return EMPTY
        name = self.rules.get(("m", done, k))  # (a set's trie names every set one member on: looked up often)
        if name is None:
            name = self.rule(("m", done, k), lambda: self.after(done, k), EMPTY, f"{self.base}-m-{done:x}-{k}")
        return Ref(name)

    def first(self) -> Node:
        return _alt([*[EMPTY] * self.closable(0, 0), *self.keys(0, 0, False)])

    def after(self, done: int, k: int) -> Node:
        keys = self.keys(done, k)
        more = [seq(Lit(","), SPACE, alt(*keys))] if keys else []
        return _alt([*[EMPTY] * self.closable(done, k), *more])

    # -- counts: a member is offered only when the object can still be completed after it ----------------------

    def count(self, done: int, k: int) -> int:
        return done.bit_count() + k

    def closable(self, done: int, k: int) -> bool:
        return self.needed(done) == done and done.bit_count() + min(k, 1) >= self.min_props

    def needed(self, done: int) -> int:
        """`done` with the required properties and the dependencies of all of them (transitively)."""
        if not self.deps:
            return done | self.required
        out, grown = done | self.required, True
        while grown:
            grown = False
            for p, need in self.deps.items():
                if out >> p & 1 and need & ~out:
                    out |= need
                    grown = True
        return out

    def viable(self, done: int, k: int) -> bool:
        """Whether some completion of (done, k) closes the object: the needed members, then (for minProperties)
        one other member while none is written, then optional listed ones, fewest dependencies first, all within
        maxProperties (a greedy test: a member it cannot place is not offered, a subset)."""
        key = (done, k)
        known = self.viable_memo.get(key)
        if known is not None:
            return known
        full = self.needed(done)
        if self.ordered and full & ~done & ~self._after(done, k):
            self.viable_memo[key] = False  # (a needed property before the last one written: never now)
            return False
        distinct = full.bit_count() + min(k, 1)
        total = full.bit_count() + k
        if distinct < self.min_props and k == 0 and self.extra is not None and self.max_extra != 0:
            distinct, total = distinct + 1, total + 1
        if distinct < self.min_props:
            after = self._after(done, k)
            for p in sorted(range(len(self.names)), key=lambda p: self.needed(1 << p).bit_count()):
                if not full >> p & 1 and after >> p & 1:
                    more = self.needed(full | 1 << p)
                    distinct += (more & ~full).bit_count()
                    total += (more & ~full).bit_count()
                    full = more
                    if distinct >= self.min_props:
                        break
        ok = distinct >= self.min_props and (self.max_props is None or total <= self.max_props)
        self.viable_memo[key] = ok
        return ok

    def _after(self, done: int, k: int) -> int:
        """The listed properties the order still allows after `done` and k others (all but `done` in any
        order; `ordered`: those after the last one written, none after another member)."""
        every = (1 << len(self.names)) - 1
        if not self.ordered:
            return every & ~done
        return 0 if k else every & ~((1 << done.bit_length()) - 1)

    def offered(self, done: int, k: int) -> int:
        """The listed properties that may be written next (as a bit set)."""
        out = self.offered_memo.get((done, k))
        if out is None:
            out = 0
            after = self._after(done, k)
            if self.ordered and (first := self.needed(done) & ~done & after):
                after &= (first & -first) * 2 - 1  # (none past the first needed one not written)
            if self.max_props is None and not self.min_props:  # (every completion closes: `viable` holds)
                out = after
            elif self.max_props is None or self.count(done, k) < self.max_props:
                for p in range(len(self.names)):
                    if after >> p & 1 and self.viable(done | 1 << p, k):
                        out |= 1 << p
            self.offered_memo[done, k] = out
        return out

    def extra_offered(self, done: int, k: int) -> bool:
        if self.extra is None or (self.max_extra is not None and k >= self.max_extra):
            return False
        if self.max_props is not None and self.count(done, k) >= self.max_props:
            return False
        return self.viable(done, self.next_k(k))

    def next_k(self, k: int) -> int:
        return min(k + 1, self.k_cap)

    # -- keys ---------------------------------------------------------------------------------------------------

    def keys(self, done: int, k: int, root_here: bool = True) -> list[Node]:
        """The ways a next member begins (its key), after `done` listed ones and k others; `root_here`: the names'
        trie's root may be written here (`trie_root`)."""
        out: list[Node] = []
        extra = self.extra_offered(done, k)
        if self.extra is not None and self.extra[0] == "patterns":
            start = self.extra[1].start()
            if self.trie is None:
                self.build_trie()
            if _pattern_viable(self, done, k, 0, start, self.offered(done, k)):
                out.append(seq(QUOTE, Ref(self.pattern_rule(done, k, 0, start))))
            return out
        if self.any_key and extra:
            out.append(seq(Ref("string"), Lit(":"), SPACE, self.extra[1], self.members(done, self.next_k(k))))
        else:
            if self.offered(done, k):
                out.append(seq(QUOTE, self.trie_root(done, k) if root_here else Ref(self.trie_rule(done, k, 0))))
            if extra and self.extra[0] != "pattern":  # (another key: its characters alike for every set)
                out.append(seq(QUOTE, Ref(self.other_key(0)), QUOTE, self.other_end(done, k)))
        if extra and self.extra[0] == "pattern":
            out.append(seq(self.extra[1], self.members(done, self.next_k(k))))
        return out

    def build_trie(self) -> None:
        """The trie of the listed and excluded names, as JSON writes them (inside the quotes)."""
        self.trie, self.plain = [{}], [True]
        for i, name in enumerate([*self.names, *self.excluded]):
            at = 0
            for ch in json.dumps(name, ensure_ascii=False)[1:-1]:
                nxt = self.trie[at].get(ch)
                if nxt is None:
                    nxt = self.trie[at][ch] = len(self.trie)
                    self.trie.append({})
                    self.plain.append(self.plain[at] and _is_raw(ch))
                at = nxt
            if i < len(self.names):
                self.ends[at] = i
            else:
                self.ends.setdefault(at, -1)  # (excluded: never written; a listed name of the same text wins)
        self.c.budget.charge(len(self.trie), f"{self.base} (property names)")
        self.live = [0] * len(self.trie)  # per node: the listed properties whose name is at or below it
        self.size = [1] * len(self.trie)  # per node: the nodes of its subtree
        for at in range(len(self.trie) - 1, -1, -1):  # (children are numbered after their parent)
            mask = 1 << self.ends[at] if self.ends.get(at, -1) >= 0 else 0
            for child in self.trie[at].values():
                mask |= self.live[child]
                self.size[at] += self.size[child]
            self.live[at] = mask

    def inlined(self, at: int, depth: int) -> bool:
        """Whether trie node `at`'s subtree, `depth` characters below a rule, is written into that rule."""
        return self.size[at] <= _INLINE and depth < _DEPTH

    def pattern_rule(self, done: int, k: int, at: int, states: tuple[int, ...]) -> str:
        key = ("p", f"{done:x}", k, at, *states)
        return self.rule(key, lambda: _pattern_node(self, done, k, at, states))

    def trie_root(self, done: int, k: int) -> Node:
        """The names offered from the trie's root: written into the set's rule when the names are short (a walk
        that reaches a set's members goes down its keys at once: one rule compiled, not two), else its rule (the
        set's rule is also reached where no key follows: a search for a way to close, a value that ends the
        object; each set's copy of a large trie would fill the program)."""
        if self.trie is None:
            self.build_trie()
        if self.size[0] <= _ROOT_INLINE:
            return self.trie_node(done, k, 0)
        return Ref(self.trie_rule(done, k, 0))

    def trie_rule(self, done: int, k: int, at: int) -> str:
        return self.rule(("t", f"{done:x}", k, at), lambda: self.trie_node(done, k, at))

    def trie_node(self, done: int, k: int, at: int, depth: int = 0) -> Node:
        """The listed names still offered below trie node `at` (never another key: `other_key`). A run of
        nodes with one way on is one literal, and a name alone below a node is written whole with its member,
        so a set of members has a rule per branching node it reaches, not per character."""
        if self.trie is None:
            self.build_trie()
        offered = self.offered(done, k)
        options: list[Node] = []
        # (the order changes no language: the names still needed first, so a search for a short way to close
        # the object, like the tests' sentence generator, finds one)
        end = self.ends.get(at)
        if end is not None and end >= 0 and offered >> end & 1:
            options.append(Seq((self.tail(end), self.members(done | 1 << end, k))))
        needed = self.needed(done) & ~done
        children = self.trie[at]
        ways = children.items()
        if needed & self.live[at]:
            ways = sorted(ways, key=lambda c: not self.live[c[1]] & needed)
        for ch, child in ways:
            if self.live[child] & offered:
                options.append(self.names_from(done, k, ch, child, offered, depth))
        self.c.budget.charge(len(options) + len(children), f"{self.base} (members)")
        # (each option begins with another character, a name's end with the quote: none to merge, as `alt` would)
        return Alt(tuple(options)) if len(options) > 1 else _alt(options)

    def tail(self, p: int) -> Node:
        """Listed property `p`'s closing quote, colon and value: one node for every set of members (hashed once;
        a set's rules hold it whole, not its items again)."""
        got = self.tails[p]
        if got is None:
            got = self.tails[p] = Seq((QUOTE, COLON, self.values[p]))
        return got

    def names_from(self, done: int, k: int, text: str, at: int, offered: int, depth: int = 0) -> Node:
        """`text` (the way to trie node `at`), on along the nodes with one offered way on, then their member (a
        name alone) or the node where the ways part: written here when its subtree is small (as `other_node`),
        else its rule."""
        while True:
            run = self.runs.get(at)
            if run is None:
                run = self.runs[at] = self.run_from(at)
            if run[1] != at:  # (a run of nodes with one child and no name: the same whatever is offered)
                self.c.budget.charge(len(run[0]), f"{self.base} (members)")
                text += run[0]
                at = run[1]
            end = self.ends.get(at)
            here = end is not None and end >= 0 and offered >> end & 1
            on = [(ch, child) for ch, child in self.trie[at].items() if self.live[child] & offered]
            if here and not on:
                return Seq((Lit(text), self.tail(end), self.members(done | 1 << end, k)))
            if here or len(on) != 1:
                if self.inlined(at, depth):
                    return Seq((Lit(text), self.trie_node(done, k, at, depth + 1)))
                return Seq((Lit(text), Ref(self.trie_rule(done, k, at))))
            self.c.budget.charge(1, f"{self.base} (members)")
            text += on[0][0]
            at = on[0][1]

    def run_from(self, at: int) -> tuple[str, int]:
        """The characters from trie node `at` down its nodes that have one child and end no listed name (their
        listed names are those below, whatever the set offered), and the node where they stop."""
        text = []
        while len(self.trie[at]) == 1 and self.ends.get(at, -1) < 0:
            ((ch, at),) = self.trie[at].items()
            text.append(ch)
        return "".join(text), at

    def other_key(self, at: int) -> str:
        """Another key's characters from trie node `at` on (the same rule for every set of members, and for
        every object of the same names): any key written without escapes that is no listed or excluded name
        (the caller writes the closing quote)."""
        owner = self.c.key_tries.setdefault(frozenset([*self.names, *self.excluded]), self)
        if owner is not self:
            return owner.other_key(at)
        name = self.rules.get(("o", at))
        if name is not None and not self.c.has_rule(name):
            del self.rules["o", at]  # (rolled back with a part left out: made again)
        return self.rule(("o", at), lambda: self.other_node(at))

    def other_node(self, at: int, depth: int = 0) -> Node:
        """Another key's characters from trie node `at`; a child's subtree of at most _INLINE nodes, _DEPTH
        characters below this rule, is written into it rather than referred to (a walk that reaches the rule
        compiles that part at once, not one rule per character it goes down)."""
        if self.trie is None:
            self.build_trie()
        children = self.trie[at]
        options = [seq(Lit(ch), self.other_node(child, depth + 1) if self.inlined(child, depth)
                       else Ref(self.other_key(child)))
                   for ch, child in children.items() if self.plain[child]]  # fmt: skip
        # another character, then any: the rest one rule for every node (a repetition lowered once, not per node)
        more = Ref(self.rule(("o-rest",), lambda: Repeat(KEY_CHAR, 0, self.c.max_string_length)))
        others = tuple(sorted((ord(ch), ord(ch)) for ch in children))
        if all(ch < _WIDE for ch in children):  # (ASCII names: the wide characters one class for every node, and
            # this node's class ASCII only, one BYTES element: a class with both is a rule of its own per node)
            options.append(seq(Chars((*KEY_OUT, *others, _WIDE_RANGE), negated=True), more))
            options.append(seq(_WIDE_KEY_CHAR, more))
        else:
            options.append(seq(Chars((*KEY_OUT, *others), negated=True), more))
        if self.ends.get(at) is None:
            options.append(EMPTY)
        self.c.budget.charge(len(options) + len(children), f"{self.base} (other keys)")
        # (each option begins with another character: none to merge, as `alt` would)
        return Alt(tuple(options)) if len(options) > 1 else options[0]

    def other_end(self, done: int, k: int) -> Node:
        """What follows another key's closing quote."""
        return SPACE if self.extra[0] == "string" else seq(COLON, self.extra[1], self.members(done, self.next_k(k)))


def _pattern_node(m: Members, done: int, k: int, at: int, states: tuple[int, ...], depth: int = 0) -> Node:
    """A key's next character or its end, at trie node `at` with the patterns' automata in `states`
    (json_keys.py); a next character only toward an end (`_pattern_viable`); a child's small subtree written
    here (as `Members.other_node`)."""
    offered = m.offered(done, k)
    options: list[Node] = []
    end = _pattern_end(m, done, k, at, states)
    if end is not None:
        options.append(end)
    groups: dict[tuple, list[tuple[int, int]]] = {}
    for ranges, child, nxt in _pattern_steps(m, done, k, at, states):
        if _pattern_viable(m, done, k, child, nxt, offered):
            groups.setdefault((child, nxt), []).extend(ranges)
    m.c.budget.charge(len(options) + len(groups), f"{m.base} (members)")
    for (child, nxt), ranges in groups.items():
        if child >= 0:
            if m.inlined(child, depth):
                options.append(seq(_first(ranges), _pattern_node(m, done, k, child, nxt, depth + 1)))
            else:
                options.append(seq(_first(ranges), Ref(m.pattern_rule(done, k, child, nxt))))
            continue
        after = seq(QUOTE, COLON)  # (off the trie: the key's rest is a rule per value, shared by every set)
        for value in _key_values(m, nxt):
            rest = Ref(_key_rest(m, value, nxt))
            options.append(seq(_first(ranges), rest, after, value, m.members(done, m.next_k(k))))
    return _alt(options)


def _first(ranges: list[tuple[int, int]]) -> Node:
    return Lit(chr(ranges[0][0])) if ranges == [(ranges[0][0],) * 2] else Chars(tuple(ranges))


def _key_values(m: Members, states: tuple[int, ...]) -> tuple[Node, ...]:
    """The values of the keys that go on from `states` off the trie of names (no name begins so) to their end,
    found within _SEARCH states, nearest first (a state on the way to one finds it again)."""
    keys = m.extra[1]
    known = keys.reach.get(states)
    if known is None:
        seen, level, found = {states}, [states], {}
        while level and len(seen) <= _SEARCH:
            below = []
            for st in level:
                value = keys.value(st)
                if value is not None:
                    found[value] = None
                for nxt in keys.successors(st):
                    if nxt not in seen:
                        seen.add(nxt)
                        below.append(nxt)
            level = below
        m.c.budget.charge(len(seen), f"{m.base} (members)")
        known = keys.reach[states] = tuple(found)
    return known


def _key_rest(m: Members, value: Node, states: tuple[int, ...]) -> str:
    """The rule of a key's characters from `states` off the trie to an end whose value is `value`, the closing
    quote the caller's: the same for every set of members (what follows the key is written after it)."""
    keys, c = m.extra[1], m.c
    name = keys.rules.get((value, states))
    if name is None or not c.has_rule(name):  # (rolled back with a part left out: made again)
        build = lambda: _key_rest_node(m, value, states)  # noqa: E731
        name = keys.rules[value, states] = c.add_lazy(f"{m.base}-key-{len(keys.rules)}", build)
    return name


def _key_rest_node(m: Members, value: Node, states: tuple[int, ...]) -> Node:
    keys = m.extra[1]
    options: list[Node] = [EMPTY] if keys.value(states) == value else []
    groups: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    if keys.alive(states):
        for lo, hi in keys.free_classes:
            nxt = keys.step(states, chr(lo))
            if value in _key_values(m, nxt):
                groups.setdefault(nxt, []).append((lo, hi))
    m.c.budget.charge(len(keys.free_classes) + len(groups), f"{m.base} (members)")
    for nxt, ranges in groups.items():
        options.append(seq(_first(ranges), Ref(_key_rest(m, value, nxt))))
    return _alt(options)


def _pattern_end(m: Members, done: int, k: int, at: int, states: tuple[int, ...]) -> Node | None:
    """The closing quote here, and what follows: a listed name's property, or another key's value."""
    if m.trie is None:
        m.build_trie()
    end = m.ends.get(at) if at >= 0 else None
    if end is not None:
        if end >= 0 and m.offered(done, k) >> end & 1:
            return seq(QUOTE, COLON, m.values[end], m.members(done | 1 << end, k))
        return None
    if (at < 0 or m.plain[at]) and m.extra_offered(done, k):
        value = m.extra[1].value(states)
        if value is not None:
            return seq(QUOTE, COLON, value, m.members(done, m.next_k(k)))
    return None


def _pattern_steps(m: Members, done: int, k: int, at: int, states: tuple[int, ...]) -> list:
    """(character ranges, next trie node, next automata states) for the characters a key may go on with (the
    same for every set of members that offers other keys, or none: kept)."""
    keys = m.extra[1]
    if m.trie is None:
        m.build_trie()
    children = m.trie[at] if at >= 0 else {}
    plain = at < 0 or m.plain[at]
    others = plain and m.extra_offered(done, k)
    got = m.steps_memo.get((at, states, others))
    if got is not None:
        return got
    out = []
    for ch, child in children.items():
        nxt = keys.step(states, ch) if plain and _is_raw(ch) else (-1,) * len(states)
        out.append(([(ord(ch), ord(ch))], child, nxt))
    if others:
        for lo, hi in keys.classes([ord(ch) for ch in children]):
            if not (lo == hi and chr(lo) in children):
                out.append(([(lo, hi)], -1, keys.step(states, chr(lo))))
    m.steps_memo[at, states, others] = out
    return out


_SEARCH = 256  # product states a viability search visits at most (beyond: not viable, a subset)


def _pattern_viable(m: Members, done: int, k: int, at: int, states: tuple[int, ...], offered: int) -> bool:
    """Whether some key goes on from here to an end: a listed name still offered below, or another key a
    pattern (or additionalProperties) values, found within _SEARCH states (a key that ends nowhere is never
    begun)."""
    key = (done, k, at, states)
    known = m.pattern_memo.get(key)
    if known is not None:
        return known
    seen, todo, found = {(at, states)}, [(at, states)], False
    while todo and not found and len(seen) <= _SEARCH:
        a, st = todo.pop()
        if (a >= 0 and m.live[a] & offered) or _pattern_end(m, done, k, a, st) is not None:
            found = True
            break
        if a < 0 and not m.extra[1].alive(st):
            continue
        for _, child, nxt in _pattern_steps(m, done, k, a, st):
            if (child, nxt) not in seen:
                seen.add((child, nxt))
                todo.append((child, nxt))
    m.c.budget.charge(len(seen), f"{m.base} (members)")
    m.pattern_memo[key] = found
    return found


def _alt(options: list[Node]) -> Node:
    return alt(*options) if options else Chars(())  # (no option: matches nothing)


def other_keys(c: Any, base: str, names: list[str], value: Node | None, keys: Any = None) -> Node:
    """One member whose key is none of `names` (written without escapes): `"key" space ":" space value`, the
    key trie built lazily (the listed-order layout's other members); value None: the string alone, then space
    (a string other than the names: json_values.py); `keys`: the patterns' (json_keys.PatternKeys) instead."""
    extra = ("patterns", keys) if keys is not None else ("additional", value) if value is not None else ("string", None)
    m = Members(c, f"{base}-other", [], names, set(), {}, extra, 0, None, None, standalone=True)
    return alt(*m.keys(0, 0))
