"""Lower a `Grammar` to a flat byte-level program: the pushdown automaton (`automaton.py`) runs on it.

    position:  0      1      2     3      4     5    ...
    kind:      BYTES  REF    END   BYTES  BYTES END
    arg:       {'['}  rule2  -     {'a'}  {0-9} -

Each rule is a list of alternatives; each alternative is a run of elements ending in END, starting at one of
`rule_alts[rule]`. An element is BYTES (a 256-bit set: the next byte must be in it), REF (run that rule, then
come back) or REP (run a rule min..max times, counting: `reps[arg]` is (rule, min, max)). Literals become one
BYTES per UTF-8 byte; a character class becomes one BYTES when it is ASCII-only,
else a small generated rule of UTF-8 byte-range alternatives. Repetition is rewritten like llama.cpp's:
`x{2,4}` -> `x x R2` with `R2 ::= x R1 | ""`, `R1 ::= x | ""`; `x*` -> `S` with `S ::= x S | ""`.

A repetition of more than `_COUNT_FROM` copies of a unit that always consumes a byte is one REP element: the
automaton keeps the count in the stack frame (a counter, not copies), so compile work and program size do not
grow with the bound (`maxLength: 131072` is one element). Other repetitions are copies, which cost in proportion
to the count, so large counts of a unit that may be empty are written with powers of two for the exact part and
blocks for the optional part: about sqrt(count) small rules, at most two parses alive at a time, a stack depth of
about log2(count):

    P0 ::= x      Pk ::= P(k-1) P(k-1)          x{100} -> P6 P5 P2              (exactly 2^k x)
    x{0,r}, b = isqrt(r), r = q b + s:  U(i) ::= x{0,b-1} | x{b} U(i-1),  U(0) ::= x{0,s}    (U(q) is x{0,r})

Left recursion (a rule reaching itself without consuming a byte) is refused, as llama.cpp does, and so is a
grammar whose start rule derives no finite string (it could never complete). All the work is charged to the
compilation's `Budget` (limits.py) as it is done. All arrays are flat lists of ints, so a numba or C walker can
take them as they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .errors import ConstraintError
from .gc_pause import gc_paused
from .grammar import Alt, Chars, Grammar, Lit, Node, Ref, Repeat, Seq, tree_shape
from .limits import Budget, ConstraintLimits, budget_of
from .utf8 import byte_mask, byte_sequences, normalize

BYTES, REF, END, REP = 0, 1, 2, 3
# repetitions of more copies than this (of a unit that always consumes a byte) are counted, not copied
_COUNT_FROM = 16
_ASCII_END = 0x7F  # the last code point UTF-8 writes as one byte
# repetitions are written out as copies while they stay this small (count, elements); beyond, in powers of two
_UNROLL, _UNROLL_SIZE = 1024, 4096


def _unrolled(count: int, unit: list) -> bool:
    return count <= _UNROLL and count * len(unit) <= _UNROLL_SIZE


Elem = tuple[int, int]  # (kind, arg)


@dataclass
class Program:
    kind: list[int]  # per position: BYTES, REF, END or REP
    arg: list[int]  # BYTES: 256-bit byte set; REF: rule id; END: 0; REP: index into `reps`
    rule_alts: list[tuple[int, ...]] | dict[int, tuple[int, ...]]  # per rule: start positions of its alternatives
    # (a dict filled as rules are compiled when the program is lazy: `compile_grammar`)
    rule_names: list[str]
    root: int
    nullable: list[bool] | None  # per rule: derives the empty string (None: lazy)
    reps: list[tuple[int, int, int]] = field(default_factory=list)  # per REP: (rule, min, max) copies

    def rule_at(self, pos: int) -> str:
        """The name of the rule position `pos` is in (for error messages)."""
        best, name = -1, self.rule_names[self.root]
        alts = self.rule_alts
        for r, starts in alts.items() if isinstance(alts, dict) else enumerate(alts):
            for s in starts:
                if best < s <= pos:
                    best, name = s, self.rule_names[r]
        return name

    @property
    def lazy(self) -> bool:
        return isinstance(self.rule_alts, dict)

    def describe(self) -> str:
        """A readable listing (for debugging): one line per alternative (of a lazy program: per rule compiled so
        far)."""
        lines = []
        alts = self.rule_alts
        for r, starts in sorted(alts.items()) if isinstance(alts, dict) else enumerate(alts):
            for s in starts:
                elems, p = [], s
                while self.kind[p] != END:
                    k, a = self.kind[p], self.arg[p]
                    if k == REP:
                        rule, lo, hi = self.reps[a]
                        elems.append(f"{self.rule_names[rule]}{{{lo},{hi}}}")
                    else:
                        elems.append(self.rule_names[a] if k == REF else _mask_text(a))
                    p += 1
                lines.append(f"{self.rule_names[r]} ::= {' '.join(elems) or '(empty)'}")
        return "\n".join(lines)


def _mask_text(mask: int) -> str:
    out, b = [], 0
    while b < 256:
        if mask >> b & 1:
            e = b
            while e + 1 < 256 and mask >> (e + 1) & 1:
                e += 1
            out.append(f"{b:02X}" if b == e else f"{b:02X}-{e:02X}")
            b = e + 1
        else:
            b += 1
    return "[" + " ".join(out) + "]"


class _LazyRules(dict):
    """`rule_alts` of a lazy program: rule id -> its alternatives' start positions, the rule compiled the first
    time the automaton asks for it."""

    __slots__ = ("compiler",)

    def __missing__(self, rid: int) -> tuple[int, ...]:
        return self.compiler.compile_rule(rid)


class _Compiler:
    def __init__(self, grammar: Grammar, budget: Budget, lazy: bool = False) -> None:
        self.budget = budget
        self.grammar = grammar
        self.lazy = lazy
        self.names: list[str] = []
        self.ids: dict[str, int] = {}
        self.bodies: list[list[list[Elem]] | None] = []  # (eager: the checks below read them)
        self.kind: list[int] = []
        self.arg: list[int] = []
        self.rule_alts: list | _LazyRules = _LazyRules() if lazy else []
        self.generated: dict[object, int] = {}
        self.counter: dict[str, int] = {}
        self.chars: dict[Chars, list[Elem]] = {}  # the elements of each class compiled so far
        self.lits: dict[str, list[Elem]] = {}  # the elements of each literal compiled so far
        self.reps: list[tuple[int, int, int]] = []
        self.rep_ids: dict[tuple[int, int, int], int] = {}
        self._consumes: dict[str, bool] = {}
        self.positions = 0
        self.started = False  # (lazy) past the start rule: rules compiled from now on are generation's work
        if lazy:
            self.rule_alts.compiler = self
            return
        budget.check("max_rules", len(grammar.rules), "the grammar", "rule count")
        for name in grammar.rules:
            self.rule_id(name)
        limit = budget.limits.max_nesting
        for name, node in grammar.rules.items():
            size, depth = tree_shape(node, limit)
            budget.charge(size, f"rule {name!r}")
            budget.check("max_nesting", depth, f"rule {name!r}", "nesting depth")
        for name, node in list(grammar.rules.items()):
            self.set_body(self.ids[name], self.alternatives(node, name), name)

    def rule_id(self, name: str) -> int:
        """The id of the grammar rule `name` (numbered as first met)."""
        rid = self.ids.get(name)
        if rid is None:
            rid = self.ids[name] = self.new_id(name)
        return rid

    def new_id(self, name: str) -> int:
        rid = len(self.names)
        self.budget.check("max_rules", rid + 1, f"rule {name!r}", "rule count")
        self.names.append(name)
        self.bodies.append(None)
        if not self.lazy:
            self.rule_alts.append(())
        return rid

    def compile_rule(self, rid: int) -> tuple[int, ...]:
        """(Lazy) the alternatives of grammar rule `rid`, compiled now (built first when it is a lazy rule). All
        or nothing: when it raises (a limit), the program is as before, so the rule raises again when reached
        again and the rules compiled with it are not left without bodies (a cached program serves on)."""
        name = self.names[rid]
        if self.started:  # (after the start: each rule's work is bounded on its own, not the generation's)
            self.budget.work = 0
        mark = self._mark()
        try:
            with gc_paused:
                node = self.grammar.body(name)
                size, depth = tree_shape(node, self.budget.limits.max_nesting)
                self.budget.charge(size, f"rule {name!r}")
                self.budget.check("max_nesting", depth, f"rule {name!r}", "nesting depth")
                self.set_body(rid, self.alternatives(node, name), name)
        except BaseException:  # (a limit, or the bench's timeout signal: either may come mid-rule)
            self._undo(mark)
            raise
        return self.rule_alts[rid]

    def _mark(self) -> tuple[int, int, int, int, int]:
        return len(self.names), len(self.kind), self.positions, len(self.reps), len(self.chars)

    def _undo(self, mark: tuple[int, int, int, int, int]) -> None:
        """Back to `mark`: the rules numbered since forgotten, and whatever refers to them (the classes' element
        cache among it); the program's lists cut back in place (the Program shares them). (`counter` keeps its
        counts: a generated name is not used twice.)"""
        n_names, n_kind, self.positions, n_reps, n_chars = mark
        for name in self.names[n_names:]:
            self.ids.pop(name, None)
        for r in range(n_names, len(self.names)):
            self.rule_alts.pop(r, None)
        self.generated = {k: r for k, r in self.generated.items() if r < n_names}
        self.rep_ids = {k: r for k, r in self.rep_ids.items() if r < n_reps}
        self.chars = dict(list(self.chars.items())[:n_chars])  # (in insertion order: the older ones stay)
        del self.names[n_names:], self.bodies[n_names:], self.kind[n_kind:], self.arg[n_kind:], self.reps[n_reps:]

    def set_body(self, rid: int, alts: list[list[Elem]], base: str) -> None:
        """Lay the rule's alternatives out at the end of the program (each a run of elements, then END)."""
        self.positions += sum(len(elems) + 1 for elems in alts)
        self.budget.check("max_positions", self.positions, f"rule {base!r}", "program size (elements)")
        kind, arg, starts = self.kind, self.arg, []
        for elems in alts:
            starts.append(len(kind))
            for k, a in elems:
                kind.append(k)
                arg.append(a)
            kind.append(END)
            arg.append(0)
        self.rule_alts[rid] = tuple(starts)
        if not self.lazy:
            self.bodies[rid] = alts

    def extend(self, out: list[Elem], elems: list[Elem], base: str) -> None:
        budget = self.budget  # (the checks' calls only when one may refuse or record a peak: extend runs often)
        budget.work += len(elems)
        if budget.work > budget.limits.max_work:
            budget.charge(0, f"rule {base!r}")
        out.extend(elems)
        n = len(out)
        if n > budget.peak.get("max_positions", -1) or n > budget.limits.max_positions:
            budget.check("max_positions", n, f"rule {base!r}", "program size (elements)")

    def new_rule(self, key: object, base: str) -> tuple[int, bool]:
        rid = self.generated.get(key)
        if rid is not None:
            return rid, False
        n = self.counter.get(base, 0) + 1
        self.counter[base] = n
        rid = self.generated[key] = self.new_id(f"{base}-{n}")
        return rid, True

    def alternatives(self, node: Node, base: str) -> list[list[Elem]]:
        if isinstance(node, Alt):
            return [self.sequence(o, base) for o in node.options]
        return [self.sequence(node, base)]

    def sequence(self, node: Node, base: str) -> list[Elem]:
        out: list[Elem] = []
        self.emit(node, base, out)
        return out

    def emit(self, node: Node, base: str, out: list[Elem]) -> None:
        kind = type(node)  # (the common kinds by identity first: emit runs once per node of every rule body)
        if kind is Seq:
            for item in node.items:
                self.emit(item, base, out)
        elif kind is Lit:
            elems = self.lits.get(node.text)  # (literals recur: keys, quotes, colons)
            if elems is None:
                elems = self.lits[node.text] = [(BYTES, 1 << b) for b in node.text.encode("utf-8", "surrogatepass")]
            self.extend(out, elems, base)
        elif kind is Ref and (rid := self.ids.get(node.name)) is not None:
            out.append((REF, rid))
        else:
            self.emit_other(node, base, out)

    def emit_other(self, node: Node, base: str, out: list[Elem]) -> None:
        """The node kinds `emit` leaves (Lit and Seq never reach here; a Ref only when not numbered yet)."""
        if isinstance(node, Chars):
            self.emit_chars(node, base, out)
        elif isinstance(node, Ref):
            if not self.grammar.has(node.name):
                raise ConstraintError(f"rule {base!r} refers to undefined rule {node.name!r}")
            out.append((REF, self.rule_id(node.name)))
        elif isinstance(node, Alt):
            if len(node.options) == 1:
                self.emit(node.options[0], base, out)
            else:
                rid, fresh = self.new_rule(node, base)
                if fresh:
                    self.set_body(rid, self.alternatives(node, base), base)
                out.append((REF, rid))
        elif isinstance(node, Repeat):
            self.emit_repeat(node, base, out)
        else:
            raise ConstraintError(f"not a grammar node: {node!r}")

    def emit_chars(self, node: Chars, base: str, out: list[Elem]) -> None:
        elems = self.chars.get(node)  # a class met again (schemas repeat theirs) is not split into UTF-8 again
        if elems is None:
            elems = self.chars[node] = self.chars_elements(node, base)
        self.extend(out, elems, base)

    def chars_elements(self, node: Chars, base: str) -> list[Elem]:
        """A class's elements: one BYTES for its ASCII part; its wider code points a rule of UTF-8 byte-range
        sequences shared by every class with the same ones (other keys' classes each leave out a few ASCII
        characters of all of Unicode: the wide part was split into UTF-8 again for each)."""
        self.budget.charge(len(node.ranges), f"rule {base!r}")
        ranges = normalize(node.ranges, node.negated)
        single = 0
        for lo, hi in ranges:
            if lo <= _ASCII_END:
                single |= byte_mask(lo, min(hi, _ASCII_END))
        wide = tuple((max(lo, _ASCII_END + 1), hi) for lo, hi in ranges if hi > _ASCII_END)
        if not wide:
            return [(BYTES, single)]
        elems = self.wide_elements(wide, base)
        if not single:
            return elems
        rid, fresh = self.new_rule(("chars", tuple(ranges)), base)
        if fresh:
            self.set_body(rid, [[(BYTES, single)], elems], base)
        return [(REF, rid)]

    def wide_elements(self, wide: tuple[tuple[int, int], ...], base: str) -> list[Elem]:
        """Code points past ASCII (normalized ranges): one run of byte sets when they are one product of byte
        ranges, else a reference to their rule (one per program and set of code points)."""
        rid = self.generated.get(("wide", wide))
        if rid is not None:
            return [(REF, rid)]
        seqs = byte_sequences(list(wide))
        if len(seqs) == 1:
            return [(BYTES, byte_mask(lo, hi)) for lo, hi in seqs[0]]
        rid, _ = self.new_rule(("wide", wide), base)
        self.set_body(rid, [[(BYTES, byte_mask(lo, hi)) for lo, hi in s] for s in seqs], base)
        return [(REF, rid)]

    def emit_repeat(self, node: Repeat, base: str, out: list[Elem]) -> None:
        lo, hi = node.min, node.max
        where = f"rule {base!r}"
        self.budget.check("max_repeat", lo if hi is None else hi, where, "repetition count")
        unit = self.sequence(node.item, base)
        count = lo if hi is None else hi
        if count > _COUNT_FROM and self.consumes(node.item):
            rid, fresh = self.new_rule(("unit", node.item), base)
            if fresh:
                self.set_body(rid, [list(unit)], base)
            out.append((REP, self.counted(rid, lo, count)))
            if hi is None:
                out.append((REF, self.star(node.item, unit, base)))
            return
        self.extend(out, self.exactly(node.item, unit, lo, base), base)
        if hi is None:
            out.append((REF, self.star(node.item, unit, base)))
        elif hi > lo:
            out.append((REF, self.upto(node.item, unit, hi - lo, base)))

    def star(self, item: Node, unit: list[Elem], base: str) -> int:
        rid, fresh = self.new_rule(("star", item), base)
        if fresh:
            self.set_body(rid, [[*unit, (REF, rid)], []], base)
        return rid

    def counted(self, rule: int, lo: int, hi: int) -> int:
        key = (rule, lo, hi)
        rep = self.rep_ids.get(key)
        if rep is None:
            rep = self.rep_ids[key] = len(self.reps)
            self.reps.append(key)
        return rep

    def consumes(self, node: Node, depth: int = 0) -> bool:
        """Whether every string `node` matches is non-empty (False when unsure): a counted repetition needs it
        (the automaton's counter advances once per copy, so an empty copy would count for free)."""
        if depth > 64:
            return False
        if isinstance(node, Lit):
            return bool(node.text)
        if isinstance(node, Chars):
            return True
        if isinstance(node, Seq):
            return any(self.consumes(i, depth + 1) for i in node.items)
        if isinstance(node, Alt):
            return all(self.consumes(o, depth + 1) for o in node.options)
        if isinstance(node, Repeat):
            return node.min > 0 and self.consumes(node.item, depth + 1)
        if isinstance(node, Ref):
            done = self._consumes.get(node.name)
            if done is None:
                self._consumes[node.name] = False  # while in progress (a cycle): unsure
                body = self.grammar.rules.get(node.name)
                done = self._consumes[node.name] = body is not None and self.consumes(body, depth + 1)
            return done
        return False

    def exactly(self, item: Node, unit: list[Elem], count: int, base: str) -> list[Elem]:
        """Elements for exactly `count` copies: the copies, or one power of two per bit of the count."""
        if _unrolled(count, unit):
            return unit * count
        return [(REF, self.power(item, unit, k, base)) for k in range(count.bit_length() - 1, -1, -1) if count >> k & 1]

    def power(self, item: Node, unit: list[Elem], k: int, base: str) -> int:
        """The rule for exactly 2^k copies of `item`: P(k) ::= P(k-1) P(k-1)."""
        rid, fresh = self.new_rule(("pow", item, k), base)
        if fresh:
            if k == 0:
                self.set_body(rid, [list(unit)], base)
            else:
                half = self.power(item, unit, k - 1, base)
                self.set_body(rid, [[(REF, half), (REF, half)]], base)
        return rid

    def upto(self, item: Node, unit: list[Elem], r: int, base: str) -> int:
        """The rule for 0 .. r copies of `item` (r >= 1): a chain of r rules while small (one parse alive at a
        time), else blocks of b = isqrt(r) copies: U(i) ::= (0 .. b-1 copies) | (b copies) U(i-1)."""
        if _unrolled(r, unit):
            prev = None
            for k in range(1, r + 1):
                rid, fresh = self.new_rule(("upto", item, k), base)
                if fresh:
                    self.set_body(rid, [[*unit, (REF, prev)] if prev is not None else list(unit), []], base)
                prev = rid
            return prev
        b = math.isqrt(r)
        fewer = self.upto(item, unit, b - 1, base)
        rid, fresh = self.new_rule(("block", item, b), base)  # exactly b copies, one rule shared by the U(i)
        if fresh:
            self.set_body(rid, [self.exactly(item, unit, b, base)], base)
        block = [(REF, rid)]
        q, rest = divmod(r, b)
        prev = self.upto(item, unit, rest, base) if rest else None
        for i in range(1, q + 1):  # U(i): 0 .. rest + i * b copies
            rid, fresh = self.new_rule(("upto-blocks", item, b, rest + i * b), base)
            if fresh:
                self.set_body(rid, [[(REF, fewer)], block + ([(REF, prev)] if prev is not None else [])], base)
            prev = rid
        return prev

    def program(self, root: str) -> Program:
        if not self.grammar.has(root):
            raise ConstraintError(f"the grammar has no rule named {root!r} (its start rule)")
        rid = self.rule_id(root)
        if self.lazy:
            self.rule_alts[rid]  # (the start rule is compiled now: the automaton's start state needs it)
            self.budget = Budget(self.budget.limits)  # (the compilation's own budget is the caller's)
            self.started = True
            return Program(self.kind, self.arg, self.rule_alts, self.names, rid, None, self.reps)
        self.budget.charge(self.positions, "the program")
        nullable = _derives(self.bodies, self.reps, nullable=True)
        _check_left_recursion(self.bodies, self.reps, nullable, self.names)
        if not _derives(self.bodies, self.reps, nullable=False)[rid]:
            raise ConstraintError(
                f"the start rule {root!r} derives no finite string (every way through it recurses forever)"
            )
        return Program(self.kind, self.arg, self.rule_alts, self.names, rid, nullable, self.reps)


def _refs(elems: list[Elem], reps: list[tuple[int, int, int]]) -> list[int]:
    """The rules an alternative needs to derive (a REP of at least one copy needs its unit)."""
    return [a if k == REF else reps[a][0] for k, a in elems if k == REF or (k == REP and reps[a][1] > 0)]


def _derives(bodies: list, reps: list[tuple[int, int, int]], nullable: bool) -> list[bool]:
    """Per rule: whether it derives the empty string (nullable=True) or any finite string (False). A worklist
    over the references, so linear in the program's size whatever the order of its rules."""
    done = [False] * len(bodies)
    waiting: dict[tuple[int, int], int] = {}  # (rule, alternative) -> references not yet known to derive
    users: list[list[tuple[int, int]]] = [[] for _ in bodies]
    ready = []
    for r, alts in enumerate(bodies):
        for i, elems in enumerate(alts):
            if nullable and any(k == BYTES for k, _ in elems):
                continue  # consumes a byte: never empty
            refs = _refs(elems, reps)
            if not refs:
                ready.append(r)
                continue
            waiting[r, i] = len(refs)
            for a in refs:
                users[a].append((r, i))
    while ready:
        r = ready.pop()
        if done[r]:
            continue
        done[r] = True
        for user in users[r]:
            waiting[user] -= 1
            if waiting[user] == 0:
                ready.append(user[0])
    return done


def _check_left_recursion(bodies: list, reps: list, nullable: list[bool], names: list[str]) -> None:
    """Refuse a rule that can reach itself through leftmost references without consuming a byte."""
    left: list[list[int]] = []
    for alts in bodies:
        edges = []
        for elems in alts:
            for k, a in elems:
                if k == BYTES:
                    break
                rule = a if k == REF else reps[a][0]
                edges.append(rule)
                if not nullable[rule] and not (k == REP and reps[a][1] == 0):
                    break
        left.append(edges)
    WHITE, GREY, BLACK = 0, 1, 2
    color = [WHITE] * len(bodies)
    for start in range(len(bodies)):
        if color[start] != WHITE:
            continue
        stack = [(start, iter(left[start]))]
        color[start] = GREY
        while stack:
            r, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[r] = BLACK
                stack.pop()
            elif color[nxt] == GREY:
                raise ConstraintError(
                    f"left recursion: rule {names[nxt]!r} can reach itself without consuming input "
                    "(rewrite it as right recursion or repetition)"
                )
            elif color[nxt] == WHITE:
                color[nxt] = GREY
                stack.append((nxt, iter(left[nxt])))


def compile_grammar(grammar: Grammar, limits: ConstraintLimits | Budget | None = None, lazy: bool = False) -> Program:
    """The program of `grammar`; `limits` (or a compilation's Budget) bounds the work (limits.py). `lazy`: only
    the start rule is compiled now, every other one the first time the automaton needs it (the grammar's
    checks, left recursion and a finite derivation, are then the caller's: `grammar_checks.check_grammar`), and
    a limit passed then is an error of that step. A grammar with lazy rules is compiled lazily. The checks the
    grammar still owes (`Grammar.owed`) are run first when lazily; an eager compile makes them on the program."""
    lazy = lazy or bool(grammar.lazy)
    if lazy:
        grammar.check()
    program = _Compiler(grammar, budget_of(limits), lazy).program(grammar.root)
    grammar.owed = None  # (lazy: run above; eager: made on the program)
    return program
