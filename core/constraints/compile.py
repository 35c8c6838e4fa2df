"""Lower a `Grammar` to a flat byte-level program: the pushdown automaton (`automaton.py`) runs on it.

    position:  0      1      2     3      4     5    ...
    kind:      BYTES  REF    END   BYTES  BYTES END
    arg:       {'['}  rule2  -     {'a'}  {0-9} -

Each rule is a list of alternatives; each alternative is a run of elements ending in END, starting at one of
`rule_alts[rule]`. An element is BYTES (a 256-bit set: the next byte must be in it) or REF (run that rule, then
come back). Literals become one BYTES per UTF-8 byte; a character class becomes one BYTES when it is ASCII-only,
else a small generated rule of UTF-8 byte-range alternatives. Repetition is rewritten like llama.cpp's:
`x{2,4}` -> `x x R2` with `R2 ::= x R1 | ""`, `R1 ::= x | ""`; `x*` -> `S` with `S ::= x S | ""`.

Left recursion (a rule reaching itself without consuming a byte) is refused, as llama.cpp does.
All arrays are flat lists of ints, so a numba or C walker can take them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConstraintError
from .grammar import Alt, Chars, Grammar, Lit, Node, Ref, Repeat, Seq
from .utf8 import byte_mask, byte_sequences, normalize

BYTES, REF, END = 0, 1, 2

Elem = tuple[int, int]  # (kind, arg)


@dataclass
class Program:
    kind: list[int]  # per position: BYTES, REF or END
    arg: list[int]  # BYTES: 256-bit byte set; REF: rule id; END: 0
    rule_alts: list[tuple[int, ...]]  # per rule: start positions of its alternatives
    rule_names: list[str]
    root: int
    nullable: list[bool]  # per rule: derives the empty string

    def describe(self) -> str:
        """A readable listing (for debugging): one line per alternative."""
        lines = []
        for r, starts in enumerate(self.rule_alts):
            for s in starts:
                elems, p = [], s
                while self.kind[p] != END:
                    elems.append(self.rule_names[self.arg[p]] if self.kind[p] == REF else _mask_text(self.arg[p]))
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


class _Compiler:
    def __init__(self, grammar: Grammar) -> None:
        self.names = list(grammar.rules)
        self.ids = {name: i for i, name in enumerate(self.names)}
        self.bodies: list[list[list[Elem]] | None] = [None] * len(self.names)
        self.generated: dict[object, int] = {}
        self.counter: dict[str, int] = {}
        for name, node in grammar.rules.items():
            self.bodies[self.ids[name]] = self.alternatives(node, name)

    def new_rule(self, key: object, base: str) -> tuple[int, bool]:
        rid = self.generated.get(key)
        if rid is not None:
            return rid, False
        n = self.counter.get(base, 0) + 1
        self.counter[base] = n
        rid = len(self.names)
        self.names.append(f"{base}-{n}")
        self.bodies.append(None)
        self.generated[key] = rid
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
        if isinstance(node, Lit):
            out.extend((BYTES, 1 << b) for b in node.text.encode("utf-8", "surrogatepass"))
        elif isinstance(node, Chars):
            self.emit_chars(node, base, out)
        elif isinstance(node, Ref):
            rid = self.ids.get(node.name)
            if rid is None:
                raise ConstraintError(f"rule {base!r} refers to undefined rule {node.name!r}")
            out.append((REF, rid))
        elif isinstance(node, Seq):
            for item in node.items:
                self.emit(item, base, out)
        elif isinstance(node, Alt):
            if len(node.options) == 1:
                self.emit(node.options[0], base, out)
            else:
                rid, fresh = self.new_rule(node, base)
                if fresh:
                    self.bodies[rid] = self.alternatives(node, base)
                out.append((REF, rid))
        elif isinstance(node, Repeat):
            self.emit_repeat(node, base, out)
        else:
            raise ConstraintError(f"not a grammar node: {node!r}")

    def emit_chars(self, node: Chars, base: str, out: list[Elem]) -> None:
        ranges = normalize(node.ranges, node.negated)
        seqs = byte_sequences(ranges)
        single = 0
        multi = []
        for s in seqs:
            if len(s) == 1:
                single |= byte_mask(*s[0])
            else:
                multi.append(s)
        if not multi:
            out.append((BYTES, single))
            return
        if not single and len(multi) == 1:
            out.extend((BYTES, byte_mask(lo, hi)) for lo, hi in multi[0])
            return
        key = ("chars", tuple(ranges))
        rid, fresh = self.new_rule(key, base)
        if fresh:
            alts = [[(BYTES, single)]] if single else []
            alts += [[(BYTES, byte_mask(lo, hi)) for lo, hi in s] for s in multi]
            self.bodies[rid] = alts
        out.append((REF, rid))

    def emit_repeat(self, node: Repeat, base: str, out: list[Elem]) -> None:
        unit = self.sequence(node.item, base)
        for _ in range(node.min):
            out.extend(unit)
        if node.max is None:
            rid, fresh = self.new_rule(("star", node.item), base)
            if fresh:
                self.bodies[rid] = [[*unit, (REF, rid)], []]
            out.append((REF, rid))
        elif node.max > node.min:
            prev = None
            for k in range(1, node.max - node.min + 1):
                rid, fresh = self.new_rule(("upto", node.item, k), base)
                if fresh:
                    self.bodies[rid] = [[*unit, (REF, prev)] if prev is not None else list(unit), []]
                prev = rid
            out.append((REF, prev))

    def program(self, root: str) -> Program:
        if root not in self.ids:
            raise ConstraintError(f"the grammar has no rule named {root!r} (its start rule)")
        kind: list[int] = []
        arg: list[int] = []
        rule_alts = []
        for alts in self.bodies:
            starts = []
            for elems in alts:
                starts.append(len(kind))
                for k, a in elems:
                    kind.append(k)
                    arg.append(a)
                kind.append(END)
                arg.append(0)
            rule_alts.append(tuple(starts))
        nullable = _nullable(self.bodies)
        _check_left_recursion(self.bodies, nullable, self.names)
        return Program(kind, arg, rule_alts, self.names, self.ids[root], nullable)


def _nullable(bodies: list) -> list[bool]:
    nullable = [False] * len(bodies)
    changed = True
    while changed:
        changed = False
        for r, alts in enumerate(bodies):
            if nullable[r]:
                continue
            if any(all(k == REF and nullable[a] for k, a in elems) for elems in alts):
                nullable[r] = changed = True
    return nullable


def _check_left_recursion(bodies: list, nullable: list[bool], names: list[str]) -> None:
    """Refuse a rule that can reach itself through leftmost references without consuming a byte."""
    left: list[list[int]] = []
    for alts in bodies:
        edges = []
        for elems in alts:
            for k, a in elems:
                if k != REF:
                    break
                edges.append(a)
                if not nullable[a]:
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


def compile_grammar(grammar: Grammar) -> Program:
    return _Compiler(grammar).program(grammar.root)
