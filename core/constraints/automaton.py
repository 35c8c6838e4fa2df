"""The byte-level pushdown automaton that runs a compiled grammar (`compile.Program`).

A *stack* is a chain of program positions, like llama.cpp's grammar stacks: its top is a BYTES element (the set
the next byte must be in); below it are return positions (where to continue once the rule above is done).
Stacks are interned as nodes `(pos, parent)` in two flat int arrays, so a stack is one int and shared tails are
stored once:

    node:    0      1      2          3           4
    pos:     -      -      17 (BYTES) 9 (return)  4 (BYTES)
    parent:  -      -      3          0           3        stacks 2 and 4 share the tail 3 -> EMPTY

Node 0 is EMPTY (the grammar is complete); node 1 is EXIT, the floor of a *truncated* stack: reaching it means
control returned below the frames being analysed (the mask engine uses that to cache work per top of stack).
A frame of a counted repetition (REP, `x{0,4096}`) is a node with a count: `(pos, parent, count)`, the copies
begun so far; when a copy returns into it, another begins (count < max) or control goes on after the REP
(count >= min).

A *state* is the set of stacks the grammar could be in after the bytes so far (the grammar may be ambiguous).
States are interned too, and each caches its transitions: `step(state, byte)` computes a transition once, after
which it is a list lookup. Over a generation the states and transitions form a lazily built DFA.

The small interface the token trie uses: `push_byte(state, b) -> state | None` and, for a whole token,
`push_bytes(state, data)`. (Going back is free: states are immutable, so "pop" is keeping the previous one.)

Per-token work is bounded (limits.py): a state holds at most `max_stacks` stacks and a closure explores at most
that many items, a stack has at most `max_stack_depth` frames; past either, the step raises
ConstraintLimitError. The tables grow with what generation visits, so `reset` starts them afresh (a new epoch)
once they pass `max_states`; a state of an older epoch is re-interned on its next use (`adopt`).
"""

from __future__ import annotations

from array import array

from .compile import BYTES, END, REP, Program
from .limits import DEFAULT_LIMITS, ConstraintLimitError, ConstraintLimits

EMPTY = 0
EXIT = 1
UNSET, DEAD = -2, -1  # State.trans entries besides state ids
_UNSET_ROW = array("i", [UNSET]) * 256


class Interned:
    """A generation state interned in its engine's tables (shared by every sequence of the compiled constraint):
    a copy is the state itself, so a forked sampler's deep copy of its generation does not copy the tables."""

    __slots__ = ()

    def __copy__(self) -> Interned:
        return self

    def __deepcopy__(self, memo: dict) -> Interned:
        return self


class State(Interned):
    """An interned set of stacks, with its transitions filled in as they are taken."""

    __slots__ = ("advance", "complete", "exit", "first", "id", "loop", "mask", "only_exit", "stacks", "tables", "trans")

    def __init__(self, sid: int, stacks: tuple[int, ...], first: int = 0, tables: object = None) -> None:
        self.id = sid
        self.stacks = stacks
        self.tables = tables  # the node tables its stacks are in (one per epoch of the automaton)
        self.complete = EMPTY in stacks  # the grammar may end here
        self.exit = EXIT in stacks  # (truncated stacks) control may have left the analysed frames
        self.only_exit = all(s <= EXIT for s in stacks)  # no byte can follow
        # the next state's id per byte (UNSET: not computed; DEAD): ints, not references, so the garbage
        # collector has 256 fewer pointers per state to trace and no chain of states to free recursively
        self.trans: array = array("i", _UNSET_ROW)
        self.mask = None  # the token mask, once computed (masks.py)
        self.loop = -1  # bytes that lead back to this very state (a 256-bit int; -1: not computed yet)
        self.first = first  # bytes some stack can take next (a 256-bit int)
        self.advance: tuple[int, int] | None = None  # (bytes, the id of the state they all lead to): `advance_of`

    def __repr__(self) -> str:
        return f"State({self.id}, stacks={self.stacks})"


class Automaton:
    def __init__(self, program: Program, limits: ConstraintLimits | None = None) -> None:
        self.program = program
        self.kind = program.kind
        self.arg = program.arg
        self.rule_alts = program.rule_alts
        self.reps = program.reps
        self.end_pos = program.kind.index(END)  # an END: closing a frame from outside (`pop_into`)
        limits = limits or DEFAULT_LIMITS
        self.max_stacks = limits.max_stacks
        self.max_depth = limits.max_stack_depth
        self.epoch = 0
        self._fresh_tables()

    def _fresh_tables(self) -> None:
        self.initial: State | None = None  # (None while the start state is built: errors then say so)
        self.node_pos = [-1, -1]
        self.node_parent = [-1, -1]
        self.node_depth = [0, 0]
        self.node_count = [0, 0]  # a REP frame's copies begun (0: not a REP frame)
        self.tables = (self.node_pos, self.node_parent, self.node_count)
        self._nodes: dict[tuple[int, int, int], int] = {}
        self._closures: dict[tuple[int, int], tuple[int, ...]] = {}
        self._states: dict[tuple[int, ...], State] = {}
        self.by_id: list[State] = []  # the states by id: what `State.trans` entries name
        self.initial = self.state(self.closure_of_rule(self.program.root, EMPTY))

    def reset(self) -> None:
        """Forget every state, node and closure (a new epoch): older states are re-interned by `adopt`. Their
        transitions (ids of this epoch) are dropped."""
        for st in self._states.values():
            st.trans = st.advance = None
            st.mask = None
        self.epoch += 1
        self._fresh_tables()

    def adopt(self, st: State) -> State:
        """`st` as a state of the current epoch (itself when it already is one)."""
        if st.tables is self.tables:
            return st
        pos, parent, count = st.tables
        stacks = []
        for s in st.stacks:
            chain = []
            while s > EXIT:
                chain.append((pos[s], count[s]))
                s = parent[s]
            for p, k in reversed(chain):
                s = self.node(p, s, k)
            stacks.append(s)
        return self.state(stacks)

    def limit_error(self, limit: str, value: int, amount: int, pos: int, what: str) -> ConstraintLimitError:
        when = "the start state" if self.initial is None else "generation"
        return ConstraintLimitError(limit, value, amount, f"{when}, in rule {self.program.rule_at(pos)!r}", what)

    # -- stacks -----------------------------------------------------------------------------------------------

    def node(self, pos: int, parent: int, count: int = 0) -> int:
        key = (pos, parent, count)
        n = self._nodes.get(key)
        if n is None:
            depth = self.node_depth[parent] + 1
            if depth > self.max_depth:
                raise self.limit_error("max_stack_depth", self.max_depth, depth, pos, "stack depth (output nesting)")
            n = self._nodes[key] = len(self.node_pos)
            self.node_pos.append(pos)
            self.node_parent.append(parent)
            self.node_depth.append(depth)
            self.node_count.append(count)
        return n

    def closure_of_rule(self, rule: int, parent: int) -> tuple[int, ...]:
        out: set[int] = set()
        for start in self.rule_alts[rule]:
            out.update(self.closure(start, parent))
        return tuple(sorted(out))

    def closure(self, pos: int, parent: int) -> tuple[int, ...]:
        """The stacks reached by running from `pos` (continuation `parent`) up to the next BYTES elements,
        expanding references and returning from finished rules. Cycles that consume nothing are cut."""
        key = (pos, parent)
        done = self._closures.get(key)
        if done is not None:
            return done
        kind, arg, rule_alts, reps = self.kind, self.arg, self.rule_alts, self.reps
        node_pos, node_parent, node_count = self.node_pos, self.node_parent, self.node_count
        out: set[int] = set()
        seen: set[tuple[int, int]] = set()
        todo = [key]
        limit = self.max_stacks
        while todo:
            item = todo.pop()
            if item in seen:
                continue
            seen.add(item)
            if len(seen) > limit:
                raise self.limit_error("max_stacks", limit, len(seen), pos, "parser items explored in one step")
            p, par = item
            k = kind[p]
            if k == BYTES:
                out.add(self.node(p, par))
            elif k == END:
                if par <= EXIT:
                    out.add(par)
                elif node_count[par]:  # a copy of a REP returned: begin another, or go on after the REP
                    q, grand, n = node_pos[par], node_parent[par], node_count[par]
                    rule, lo, hi = reps[arg[q]]
                    if n < hi:
                        frame = self.node(q, grand, n + 1)
                        todo.extend((start, frame) for start in rule_alts[rule])
                    if n >= lo:
                        todo.append((q + 1, grand))
                else:
                    todo.append((node_pos[par], node_parent[par]))
            elif k == REP:  # entered: begin the first copy (or skip them all when none are needed)
                rule, lo, hi = reps[arg[p]]
                if hi > 0:
                    frame = self.node(p, par, 1)
                    todo.extend((start, frame) for start in rule_alts[rule])
                if lo == 0:
                    todo.append((p + 1, par))
            else:  # REF: push the return position unless it is the end of the alternative (tail call)
                cont = par if kind[p + 1] == END else self.node(p + 1, par)
                for start in rule_alts[arg[p]]:
                    todo.append((start, cont))
        result = tuple(sorted(out))
        self._closures[key] = result
        return result

    def pop_into(self, stack: int) -> tuple[int, ...]:
        """The stacks after control returns into `stack` (a return-position node)."""
        if stack <= EXIT:
            return (stack,)
        return self.closure(self.end_pos, stack)

    def depth(self, stack: int) -> int:
        return self.node_depth[stack]

    def truncate(self, stack: int, depth: int, horizon: int | None = None) -> tuple[int, int]:
        """(the top `depth` nodes of `stack` re-rooted on EXIT, the node below them). With a `horizon` (the most
        bytes the caller will push), REP counts are canonical: counts that behave alike for that many more bytes
        are made equal, so the strings of a `maxLength` share one truncated stack whatever their length so far."""
        frames = []
        s = stack
        node_pos, node_count = self.node_pos, self.node_count
        for _ in range(depth):
            frames.append((node_pos[s], node_count[s]))
            s = self.node_parent[s]
        t = EXIT
        for pos, n in reversed(frames):
            if n and horizon is not None:
                n = self.canonical_count(pos, n, horizon)
            t = self.node(pos, t, n)
        return t, s

    def canonical_count(self, pos: int, n: int, horizon: int) -> int:
        """A count that behaves as `n` for the next `horizon` bytes: each copy consumes a byte, so at most
        horizon + 1 more copies return; whether each may repeat (< max) and may stop (>= min) is what matters."""
        _, lo, hi = self.reps[self.arg[pos]]
        m = horizon + 2
        if n < lo - m:
            return 1  # min stays out of reach (so does max)
        if lo <= n < hi - m:
            return max(lo, 1)  # min reached, max out of reach
        return n

    # -- states -----------------------------------------------------------------------------------------------

    def state(self, stacks) -> State:
        key = stacks if isinstance(stacks, tuple) else tuple(sorted(stacks))
        st = self._states.get(key)
        if st is None:
            if len(key) > self.max_stacks:
                pos = self.node_pos[key[-1]] if key[-1] > EXIT else 0
                raise self.limit_error("max_stacks", self.max_stacks, len(key), pos, "stacks in one state")
            first = 0
            arg, node_pos = self.arg, self.node_pos
            for s in key:
                if s > EXIT:
                    first |= arg[node_pos[s]]
            st = self._states[key] = State(len(self.by_id), key, first, self.tables)
            self.by_id.append(st)
        return st

    def step(self, st: State, byte: int) -> State | None:
        """The state after `byte`, or None when no stack accepts it (memoized in `st.trans`)."""
        t = st.trans[byte]
        if t >= 0:
            return self.by_id[t]
        if t == UNSET:
            found: list[tuple[int, ...]] = []
            kind_arg, node_pos, node_parent = self.arg, self.node_pos, self.node_parent
            for s in st.stacks:
                if s <= EXIT:
                    continue
                p = node_pos[s]
                if kind_arg[p] >> byte & 1:
                    found.append(self.closure(p + 1, node_parent[s]))
            nxt = None
            if len(found) == 1:  # the common case: one stack takes the byte, its closure is already sorted
                if found[0]:
                    nxt = self.state(found[0])
            elif found:
                out: set[int] = set()
                for c in found:
                    out.update(c)
                if out:
                    nxt = self.state(out)
            st.trans[byte] = nxt.id if nxt is not None else DEAD
            return nxt
        return None

    push_byte = step

    def loop_bytes(self, st: State) -> int:
        """The bytes b with step(st, b) == st (a string's plain characters, say), computed once."""
        if st.loop < 0:
            loop, first = 0, st.first
            for b in range(256):
                if first >> b & 1 and self.step(st, b) is st:
                    loop |= 1 << b
            st.loop = loop
        return st.loop

    def advance_of(self, st: State, byte: int) -> tuple[int, State | None]:
        """(the bytes every stack of `st` treats as it treats `byte`, the state they all lead to): a string's
        plain characters, which loop back to `st` or count one more character of a bounded string. One step and
        no closure: bytes in or out of each top's byte set alike take the same stacks to the same state."""
        adv = st.advance
        if adv is not None and adv[0] >> byte & 1:
            return adv[0], (self.by_id[adv[1]] if adv[1] >= 0 else None)
        same = (1 << 256) - 1
        arg, node_pos = self.arg, self.node_pos
        for s in st.stacks:
            if s > EXIT:
                bits = arg[node_pos[s]]
                same &= bits if bits >> byte & 1 else ~bits
        nxt = self.step(st, byte)
        st.advance = (same, nxt.id if nxt is not None else DEAD)
        return same, nxt

    def push_bytes(self, st: State | None, data: bytes) -> State | None:
        by_id = self.by_id
        for b in data:
            if st is None:
                return None
            t = st.trans[b]
            st = by_id[t] if t >= 0 else (None if t == DEAD else self.step(st, b))
        return st

    def accepts_bytes(self, data: bytes, complete: bool = True) -> bool:
        """Whether `data` is a sentence of the grammar (or, complete=False, a prefix of one)."""
        st = self.push_bytes(self.initial, data)
        return st is not None and (st.complete or not complete)

    @property
    def n_states(self) -> int:
        return len(self._states)

    @property
    def n_nodes(self) -> int:
        return len(self.node_pos)

    @property
    def n_closures(self) -> int:
        return len(self._closures)
