"""The checks a lazily compiled grammar needs before its first step, read from its nodes (compile.py makes them
on the program when it compiles a grammar whole): no rule reaches itself without consuming a byte (left
recursion), and the start rule derives some finite string. A lazy rule is read through its `witness`.

The nodes are flattened into the program's shape (alternatives of elements: a byte, a rule, a counted rule),
one element per literal or class rather than per byte, and handed to the program's own checks.
"""

from __future__ import annotations

from .compile import BYTES, REF, REP, _check_left_recursion, _derives
from .errors import ConstraintError
from .grammar import Alt, Chars, Grammar, Lit, Node, Ref, Repeat, Seq
from .limits import Budget
from .utf8 import normalize


class _Flat:
    def __init__(self, grammar: Grammar, budget: Budget) -> None:
        self.grammar = grammar
        self.budget = budget
        self.ids: dict[str, int] = {}
        self.names: list[str] = []
        self.bodies: list[list] = []
        self.reps: list[tuple[int, int, int]] = []
        self.nothing: int | None = None  # a rule with no alternative (what an empty class stands for)

    def rule(self, name: str) -> int:
        rid = self.ids.get(name)
        if rid is None:
            rid = self.ids[name] = self.new(name)
            node = self.grammar.rules.get(name)
            if node is None:
                lazy = self.grammar.lazy.get(name)
                if lazy is None:
                    raise ConstraintError(f"the grammar refers to undefined rule {name!r}")
                node = lazy.witness
            self.todo.append((rid, node))
        return rid

    def new(self, name: str) -> int:
        self.names.append(name)
        self.bodies.append([])
        return len(self.names) - 1

    def run(self, root: str) -> None:
        self.todo: list[tuple[int, Node]] = []
        start = self.rule(root)
        while self.todo:
            rid, node = self.todo.pop()
            options = node.options if isinstance(node, Alt) else (node,)
            self.bodies[rid] = [self.elements(o, self.names[rid]) for o in options]
        nullable = _derives(self.bodies, self.reps, nullable=True)
        _check_left_recursion(self.bodies, self.reps, nullable, self.names)
        if not _derives(self.bodies, self.reps, nullable=False)[start]:
            raise ConstraintError(
                f"the start rule {root!r} derives no finite string (every way through it recurses forever)"
            )

    def elements(self, node: Node, base: str) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        todo = [node]
        seen = 0  # (charged once: the nodes of one alternative, built already)
        while todo:
            n = todo.pop()
            seen += 1
            kind = type(n)  # (the node kinds by identity: this runs once per node of every rule the check reads)
            if kind is Seq:
                todo.extend(reversed(n.items))
            elif kind is Ref:
                out.append((REF, self.rule(n.name)))
            elif kind is Lit:
                if n.text:
                    out.append((BYTES, 1))
            elif kind is Chars:
                if n.negated or normalize(n.ranges, False):
                    out.append((BYTES, 1))
                else:
                    out.append((REF, self.empty()))
            elif kind is Alt:
                rid = self.new(base)
                self.todo.append((rid, n))
                out.append((REF, rid))
            elif kind is Repeat:
                if n.max == 0:
                    continue
                rid = self.new(base)
                self.todo.append((rid, n.item))
                self.reps.append((rid, n.min, n.max if n.max is not None else n.min + 1))
                out.append((REP, len(self.reps) - 1))
            else:
                raise ConstraintError(f"rule {base!r}: not a grammar node: {n!r}")
        self.budget.charge(seen, f"rule {base!r}")
        return out

    def empty(self) -> int:
        if self.nothing is None:
            self.nothing = self.new("(an empty character class)")
        return self.nothing


def check_grammar(grammar: Grammar, budget: Budget) -> None:
    """Refuse left recursion and a start rule that derives no finite string (ConstraintError)."""
    _Flat(grammar, budget).run(grammar.root)


def has_cycle(edges: dict[str, set[str]]) -> bool:
    """Whether the graph has a cycle (iteratively: three colours): the rules of $refs and composites
    (json_schema.py) need the checks above only when they refer to each other in one."""
    color: dict[str, int] = {}
    for start in edges:
        if color.get(start):
            continue
        color[start] = 1
        stack = [(start, iter(edges.get(start, ())))]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                color[node] = 2
                stack.pop()
            elif color.get(nxt) == 1:
                return True
            elif not color.get(nxt):
                color[nxt] = 1
                stack.append((nxt, iter(edges.get(nxt, ()))))
    return False
