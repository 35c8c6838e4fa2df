"""A grammar run by the `pda` kernel op (numba natively; in the browser C/wasm translated from the same source,
wasm/scalar_c.py): the automaton, its DFA and the token masks live in flat int32 tables in backend memory
(layouts: `llamay.kernels.pda_layout`), and each operation (start, a token, a mask) is one call into the kernel
(a lazy program's rules not compiled yet: the host compiles those the operation met, `Arena.compile_rules`,
and calls again):

    ConstraintVocab ──once per vocabulary and backend──▶ VocabTables: the trie, each token's bytes (V)
    Program         ──once per constraint────────────▶ Arena: the program, then nodes, closures, states, the
                                                        DFA, the cut walks' masks, grown as they fill (A)

The kernel computes what an operation needs (closures, transitions, cut walks) on the way and caches it in the
arena; when a region is full it returns, the arena is copied into a larger one, and the operation runs again
from its start (what it built before is found in the tables). It follows `Automaton` and `MaskEngine`
(automaton.py, masks.py) step for step, so its masks are theirs (tests compare them token by token); a state
is a `KernelState`, interned per arena. Past `max_states` states or cached masks the engine starts a new arena,
and a state of an older one is re-interned from its stacks on its next use (`adopt`), as `Automaton.adopt`.

Arena buffers are pooled per backend: the wasm backend never frees memory, so a buffer given up (an arena grown
or dropped) is reused by the next arena that fits in it.
"""

from __future__ import annotations

import struct
import weakref
from array import array
from collections.abc import Sequence

from ..kernels import pda_layout as L
from .automaton import Interned
from .compile import Program
from .limits import ConstraintLimitError, ConstraintLimits
from .vocab import ConstraintVocab

_RESULT = struct.Struct("<4i")  # H_RES, H_RES_FLAGS, H_N_STATES, H_N_MASKS


def words(bits: int, n: int = 8) -> list[int]:
    """A set of 32 * n bits (a byte set: 256) as n signed int32 words (little-endian)."""
    out = []
    for k in range(n):
        w = bits >> (32 * k) & 0xFFFFFFFF
        out.append(w - (1 << 32) if w >= 1 << 31 else w)
    return out


# The slice: a JSON string's plain characters (printable ASCII but the quote and the backslash). Most of a
# vocabulary's tokens are made of them only, and where a string of them may follow (string contents, keys, most
# patterns' free text), the walk sets those tokens as one mask and looks only for the rest (`pda_walk.slice_alive`).
_SLICE_BYTES = frozenset(range(0x20, 0x7F)) - {ord('"'), ord("\\")}


def _slice(vocab: ConstraintVocab, n_words: int) -> tuple[array, array, array]:
    """The V parts `slice`, `rfirst` and `rorder` (pda_layout.py) of a vocabulary."""
    trie, tb = vocab.trie, vocab.token_bytes
    in_slice = [bool(data) and _SLICE_BYTES.issuperset(data) for data in tb]
    bits = height = 0
    for t, yes in enumerate(in_slice):
        if yes:
            bits |= 1 << t
            height = max(height, len(tb[t]))
    byte_set = sum(1 << b for b in _SLICE_BYTES)
    rfirst, rorder = array("i"), array("i")
    order, first = trie.tok_order, trie.first_tok
    for i in range(trie.n_nodes):
        rfirst.append(len(rorder))
        rorder.extend(t for t in order[first[i] : first[i + 1]] if not in_slice[t])
    rfirst.append(len(rorder))
    return array("i", [*words(byte_set), height, *words(bits, n_words)]), rfirst, rorder


class VocabTables:
    """A vocabulary as the kernel's V buffer on one backend: the token trie and every token's bytes."""

    def __init__(self, vocab: ConstraintVocab, be) -> None:
        trie = vocab.trie
        n = trie.n_nodes
        nodes = array("i", bytes(4 * L.NODE * n))
        sets = array("i")
        byte, depth, skip, below, height = trie.byte, trie.depth, trie.skip, trie.below, trie.height
        for i in range(n):
            at = L.NODE * i
            nodes[at], nodes[at + 1], nodes[at + 2] = byte[i], depth[i], skip[i]
            if skip[i] - i > L.SHORTCUT:
                nodes[at + 3] = len(sets) // L.SET
                sets.extend(words(below[i]))
                sets.append(height[i])
            else:
                nodes[at + 3] = -1
        tok_off, tok_bytes = array("i", [0]), array("i")
        for data in vocab.token_bytes:
            tok_bytes.extend(data or b"")
            tok_off.append(len(tok_bytes))
        root = array("i", [-1] * 256)
        i = 1
        while i < n:  # the root's children, in byte order
            root[byte[i]] = i
            i = skip[i]
        self.n_words = (vocab.n_vocab + 31) // 32
        slice_, rfirst, rorder = _slice(vocab, self.n_words)
        parts = [nodes, array("i", trie.first_tok), array("i", trie.tok_order or [0]), sets or array("i", [0] * 9),
                 tok_off, tok_bytes or array("i", [0]), root, slice_, rfirst, rorder or array("i", [0])]  # fmt: skip
        head = array("i", bytes(4 * L.V_HDR))
        head[L.V_N_NODES], head[L.V_N_VOCAB], head[L.V_MAX_DEPTH] = n, vocab.n_vocab, trie.max_depth
        head[L.V_N_WORDS] = self.n_words
        at = L.V_HDR
        fields = (L.V_NODES, L.V_FIRST_TOK, L.V_TOK_ORDER, L.V_SETS, L.V_TOK_OFF, L.V_TOK_BYTES, L.V_ROOT, L.V_SLICE,
                  L.V_RFIRST, L.V_RORDER)  # fmt: skip
        for field, part in zip(fields, parts, strict=True):
            head[field] = at
            at += len(part)
        self.be = be
        self.n_nodes, self.n_vocab, self.max_depth = n, vocab.n_vocab, trie.max_depth
        self.buf = be.alloc_i32(at)
        be.write_i32(self.buf, head)
        at = L.V_HDR
        for part in parts:
            be.write_i32(self.buf, part, at)
            at += len(part)


_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # vocab -> {backend name: VocabTables}


def vocab_tables(vocab: ConstraintVocab, be) -> VocabTables:
    per = _TABLES.setdefault(vocab, {})
    t = per.get(be.name)
    if t is None or t.be is not be:
        t = per[be.name] = VocabTables(vocab, be)
    return t


class _Pool:
    """Buffers given up, by size, for reuse (the wasm backend never frees its memory)."""

    def __init__(self) -> None:
        self.free: list[tuple[int, object]] = []

    def take(self, be, n: int):
        best = None
        for k, (size, _) in enumerate(self.free):
            if size >= n and (best is None or size < self.free[best][0]):
                best = k
        return self.free.pop(best)[1] if best is not None else be.alloc_i32(n)

    def give(self, n: int, buf) -> None:
        self.free.append((n, buf))
        if len(self.free) > 32:  # bounded: the smallest go (freed, except on wasm)
            self.free.sort(key=lambda e: e[0])
            del self.free[0]


_POOLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # backend -> _Pool
_PROGRAMS: dict[int, _ProgramWords] = {}  # id(program) -> its words (`program_words`)
_HASHES = {rh for rh, _ in L.HASHES}
_TABLES_OF = [(rh, re) for rh, re in L.HASHES if re >= 0]
# the regions that fill as the automaton runs (grown ahead when past half full)
_GROWN = (L.R_NODES, L.R_CLOS, L.R_CPOOL, L.R_STATES, L.R_TRANS, L.R_SPOOL, L.R_LOCAL, L.R_XBITS, L.R_SBITS,
          L.R_MASKS, L.R_TPOOL, L.R_EXPOOL, L.R_PARTS, L.R_PPOOL)  # fmt: skip
_PART_ROOM = 2048  # a program part's first room in PROG, in entries (`Arena.__init__`)
# initial capacities, in entries (hash tables: powers of two, at least twice their entries)
_CAPS = {L.R_NODES: 4096, L.R_NHASH: 8192, L.R_CLOS: 1024, L.R_CHASH: 2048, L.R_CPOOL: 4096, L.R_STATES: 512,
         L.R_TRANS: 4096, L.R_SHASH: 1024, L.R_SPOOL: 4096, L.R_LOCAL: 256, L.R_LHASH: 512, L.R_XBITS: 256,
         L.R_XHASH: 512, L.R_SBITS: 1024, L.R_SBHASH: 2048, L.R_MASKS: 16, L.R_TPOOL: 8192, L.R_WORK: 256,
         L.R_SEEN: 1024, L.R_CLOUT: 256, L.R_STEP: 1024, L.R_TOKS: L.SPARSE_MAX, L.R_WALKOUT: 1, L.R_OUT: 1,
         L.R_INPUT: 256, L.R_PARTS: 128, L.R_PHASH: 256, L.R_PPOOL: 32768, L.R_PSCR: 256}  # fmt: skip
_LIMITS = {L.LIM_STACKS: ("max_stacks", "stacks in one state"),
           L.LIM_ITEMS: ("max_stacks", "parser items explored in one step"),
           L.LIM_DEPTH: ("max_stack_depth", "stack depth (output nesting)")}  # fmt: skip


class _ProgramWords:
    """A program as the arena's PROG region, in parts: kind, arg (a BYTES element's set as a row of SETS), sets,
    rules (per rule: start and end in ALTS; -1 -1 while a lazy program's rule is not compiled), alts, reps. A lazy
    program grows at its end as its rules are compiled: `update` appends what is new, so each part only grows at
    its end, except the rules' entries, set once each (`rule_log` lists them in order)."""

    def __init__(self, program: Program) -> None:
        self._program = weakref.ref(program)  # (weak: _PROGRAMS holds this, and the program must be freed)
        self.parts = [array("i") for _ in range(6)]
        self.set_ids: dict[int, int] = {}
        self.n_names = 0  # rules of the program seen (their ids below this have an entry)
        self.rule_log: list[int] = []  # the rules whose entries were set, in order
        self.hint = [0] * L.N_REGIONS  # the region capacities this program's arenas grew to
        self.update([program.root])

    @property
    def program(self) -> Program:
        return self._program()

    def update(self, rids: list[int]) -> None:
        """Take in what the program compiled since: its new positions and reps, and the entries of the rules
        `rids` and of the rules compiled with them (a lazy program: the ones numbered since; an eager one: all)."""
        prog = self.program
        kind, args, sets, rules, alts, reps = self.parts
        n = len(kind)
        new_kind, new_args = prog.kind[n:], prog.arg[n:]
        set_ids, byte_set = self.set_ids, L.BYTES
        for i, k in enumerate(new_kind):
            if k == byte_set:  # (a set's row, numbered as first met)
                a = new_args[i]
                sid = set_ids.get(a)
                if sid is None:
                    sid = set_ids[a] = len(set_ids)
                    sets.extend(words(a))
                new_args[i] = sid
        args.extend(new_args)
        kind.extend(new_kind)
        for rep in prog.reps[len(reps) // 3 :]:
            reps.extend(rep)
        table = prog.rule_alts
        n_names = len(prog.rule_names)
        rules.extend([-1, -1] * (n_names - self.n_names))
        lazy = prog.lazy
        new = range(self.n_names, n_names) if lazy else range(n_names)
        for r in (*rids, *new):
            if rules[2 * r] < 0 and (not lazy or r in table):  # (a lazy program's dict: compiled ones only)
                starts = table[r]
                rules[2 * r], rules[2 * r + 1] = len(alts), len(alts) + len(starts)
                alts.extend(starts)
                self.rule_log.append(r)
        self.n_names = n_names


def _compile_leftmost(program: Program, rid: int) -> list[int]:
    """Rule `rid` compiled, and with it the rules that begin one of its alternatives (a REF or a REP's unit
    first), and theirs in turn: the kernel predicts them as soon as it enters `rid`, and each rule it meets
    uncompiled costs a NEED_RULE and the operation run again from its start. The rules compiled, in order."""
    table, kind, arg, reps = program.rule_alts, program.kind, program.arg, program.reps
    out, todo = [], [rid]
    while todo:
        r = todo.pop()
        if out and r in table:  # (compiled already: by another engine of the program, or just now)
            continue
        out.append(r)
        for at in table[r]:  # (compiled on first access: compile._LazyRules)
            k = kind[at]
            if k == L.REF:
                todo.append(arg[at])
            elif k == L.REP:
                todo.append(reps[arg[at]][0])
    return out


def program_words(program: Program) -> _ProgramWords:
    """The program's words, made once per program."""
    got = _PROGRAMS.get(id(program))
    if got is None:
        got = _PROGRAMS[id(program)] = _ProgramWords(program)
        weakref.finalize(program, _PROGRAMS.pop, id(program), None)
    return got


class Arena:
    """One constraint's A buffer: the header, the program, and the regions the kernel fills."""

    def __init__(self, be, tables: VocabTables, program: Program, limits: ConstraintLimits, budget: int,
                 chains: bool) -> None:  # fmt: skip
        self.be = be
        self.tables = tables
        self.pool = _POOLS.setdefault(be, _Pool())
        self.pw = pw = program_words(program)
        caps = dict(_CAPS)
        # each part's room in PROG (it grows at its end; a lazy program starts with its start rule alone and grows
        # by a rule at a time: a room of a few rules' elements spares the first grows, each a copy of the arena)
        self.pcaps = [max(2 * len(part), _PART_ROOM) for part in pw.parts]
        caps[L.R_PROG] = sum(self.pcaps)
        caps[L.R_EXREC] = budget + 2  # a budgeted walk stops past `budget` nodes below its exits
        caps[L.R_EXPOOL] = 8 * (budget + 2)
        caps[L.R_DEPTH] = tables.max_depth + 2
        self.caps = [caps[r] for r in range(L.N_REGIONS)]
        self.hint = pw.hint  # the sizes the arenas of this program grew to: the next starts there
        self.caps = [max(a, b) for a, b in zip(self.caps, pw.hint, strict=True)]
        self.width = [w if w > 0 else tables.n_words for w in L.WIDTH]  # words per entry
        self.offs, self.size = self._layout()
        self.buf = self.pool.take(be, self.size)
        self._finalizer = weakref.finalize(self, self.pool.give, self.size, self.buf)
        head = array("i", bytes(4 * L.HDR))
        head[L.H_MAX_STACKS], head[L.H_MAX_DEPTH] = limits.max_stacks, limits.max_stack_depth
        head[L.H_BUDGET], head[L.H_CHAINS], head[L.H_HORIZON] = budget, int(chains), tables.max_depth
        head[L.H_N_WORDS] = tables.n_words
        head[L.H_DIRTY] = 1  # WALKOUT: whatever the buffer held
        self._program_fields(head)
        head[L.H_END_POS] = program.kind.index(L.END)
        head[L.H_ROOT] = program.root
        self._directory(head, [sum(self.pcaps)] + [0] * (L.N_REGIONS - 1))
        head[L.H_REG + L.REG_W * L.R_NODES + 2] = 2
        for rh in _HASHES:  # empty tables: the kernel clears them
            head[L.H_REHASH] |= 1 << rh
        be.write_i32(self.buf, head)
        self._write_program()
        be.write_i32(self.buf, [-1, -1, 0, 0, -1, -1, 0, 0], self.offs[L.R_NODES])  # EMPTY, EXIT
        # the states handed out and still held, by id (weak: a state refers to its arena)
        self.states: weakref.WeakValueDictionary[int, KernelState] = weakref.WeakValueDictionary()

    def _part_offsets(self) -> list[int]:
        at, out = self.offs[L.R_PROG], []
        for c in self.pcaps:
            out.append(at)
            at += c
        return out

    def _program_fields(self, head) -> None:
        for field, at in zip((L.H_P_KIND, L.H_P_ARG, L.H_P_SETS, L.H_P_RULES, L.H_P_ALTS, L.H_P_REPS),
                             self._part_offsets(), strict=True):  # fmt: skip
            head[field] = at

    def _write_program(self) -> None:
        """Every part written whole (a new arena, or parts laid out again)."""
        for part, at in zip(self.pw.parts, self._part_offsets(), strict=True):
            if part:
                self.be.write_i32(self.buf, part, at)
        self.written = [len(part) for part in self.pw.parts]
        self.logged = len(self.pw.rule_log)

    def compile_rules(self, rids: Sequence[int]) -> None:
        """A lazy program's rules `rids` compiled (unless another engine of the program had them compiled) and
        what the program gained written: each part's new end, and the rules' entries set since (PROG laid out
        again, grown, when a part outgrows its room)."""
        pw = self.pw
        program = pw.program
        pw.update([r for rid in rids for r in _compile_leftmost(program, rid)])
        be = self.be
        if any(len(part) > c for part, c in zip(pw.parts, self.pcaps, strict=True)):
            self.pcaps = [max(c, 2 * len(part)) for part, c in zip(pw.parts, self.pcaps, strict=True)]
            if sum(self.pcaps) > self.caps[L.R_PROG]:
                self.grow(L.R_PROG, sum(self.pcaps))
            head = array("i", be.read_bytes(self.buf, 0, L.HDR))
            self._program_fields(head)
            head[L.H_REG + L.REG_W * L.R_PROG + 2] = sum(self.pcaps)
            be.write_i32(self.buf, head)
            self._write_program()
            return
        offs = self._part_offsets()
        for k, (part, at) in enumerate(zip(pw.parts, offs, strict=True)):
            if len(part) > self.written[k]:
                be.write_i32(self.buf, part[self.written[k] :], at + self.written[k])
        rules = pw.parts[3]
        for r in pw.rule_log[self.logged :]:
            if 2 * r + 1 < self.written[3]:  # (entries past the old end were written with the part's new end)
                be.write_i32(self.buf, rules[2 * r : 2 * r + 2], offs[3] + 2 * r)
        self.written = [len(part) for part in pw.parts]
        self.logged = len(pw.rule_log)

    def _layout(self) -> tuple[list[int], int]:
        offs, at = [], L.HDR
        for r in range(L.N_REGIONS):
            offs.append(at)
            at += self.caps[r] * self.width[r]
        return offs, at

    def _directory(self, head, used: list[int]) -> None:
        for r in range(L.N_REGIONS):
            at = L.H_REG + L.REG_W * r
            head[at], head[at + 1], head[at + 2] = self.offs[r], self.caps[r], used[r]

    def grow(self, r: int, need: int = 0) -> None:
        """Region r grown (to at least `need` entries), and with it every region past half full (and each hash
        table to twice its entries): the arena copied into a larger buffer once for all of them (grown hash
        tables rebuilt by the kernel)."""
        be = self.be
        head = array("i", be.read_bytes(self.buf, 0, L.HDR))
        used = [head[L.H_REG + L.REG_W * k + 2] for k in range(L.N_REGIONS)]
        old_caps = list(self.caps)
        factor = 2
        self.caps[r] = max(self.caps[r] * factor, need)
        for k in _GROWN:
            if 2 * used[k] > self.caps[k]:
                self.caps[k] *= factor
        for rh, re in _TABLES_OF:
            while self.caps[rh] < 2 * self.caps[re]:
                self.caps[rh] *= 2
        old_offs, old_buf, old_size = self.offs, self.buf, self.size
        self.offs, self.size = self._layout()
        self.buf = self.pool.take(be, self.size)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, self.pool.give, self.size, self.buf)
        for k in range(L.N_REGIONS):
            if k == L.R_SEEN or (k in _HASHES and self.caps[k] != old_caps[k]):
                head[L.H_REHASH] |= 1 << k  # scratch, or a grown table: the kernel clears or rebuilds it
            else:  # a table holds entry ids, not addresses: it moves as it is
                n = (self.caps[k] if k in _HASHES else used[k]) * self.width[k]
                if n:
                    be.copy(self.buf, self.offs[k], old_buf, old_offs[k], n)
        self._directory(head, used)
        head[L.H_DIRTY] = 1
        be.write_i32(self.buf, head)
        self.pool.give(old_size, old_buf)
        self.hint[:] = [max(a, b) for a, b in zip(self.hint, self.caps, strict=True)]


class KernelState(Interned):
    """A state of a kernel arena (an id in its tables), with its mask once computed."""

    __slots__ = ("__weakref__", "arena", "complete", "id", "mask", "only_exit")

    def __init__(self, arena: Arena, sid: int, flags: int) -> None:
        self.arena = arena
        self.id = sid
        self.complete = bool(flags & L.COMPLETE)
        self.only_exit = bool(flags & L.ONLY_EXIT)
        self.mask: int | None = None

    def __repr__(self) -> str:
        return f"KernelState({self.id})"


class KernelEngine:
    """A compiled grammar over a vocabulary, run by the backend's `pda` kernel op."""

    def __init__(self, program: Program, vocab: ConstraintVocab, limits: ConstraintLimits, be,
                 budget: int | None = None) -> None:  # fmt: skip
        self.program = program
        self.vocab = vocab
        self.limits = limits
        self.be = be
        self.tables = vocab_tables(vocab, be)
        # the most trie nodes below exits a cut may leave to per-context walks before the cut is deepened
        self.budget = budget if budget is not None else max(2048, vocab.trie.n_nodes // 32)
        self._chains = True
        self.kernel_calls = 0  # statistics: calls of the kernel (one more per region grown)
        self.resets = 0
        self.n_states = self.n_masks = 0
        self._visited = 0
        self.arena = self._fresh()
        self.initial = self._state(self._run(L.OP_START, 0, 0, "the start state"))

    def _fresh(self) -> Arena:
        self.n_states = self.n_masks = 0
        return Arena(self.be, self.tables, self.program, self.limits, self.budget, self._chains)

    # -- calls ------------------------------------------------------------------------------------------------

    def _run(self, op: int, arg: int, arg2: int, when: str = "generation") -> int:
        """Operation `op` run to its end (regions grown as the kernel asks): its result."""
        be, a = self.be, self.arena
        be.write_i32(a.buf, (op, arg, arg2))
        pda, vbuf = be.pda, self.tables.buf
        while True:
            status = pda(vbuf, a.buf)
            self.kernel_calls += 1
            if status == L.DONE:
                res, flags, self.n_states, self.n_masks = _RESULT.unpack(be.read_bytes(a.buf, L.H_RES, 4))
                self._flags = flags
                return res
            head = array("i", be.read_bytes(a.buf, 0, L.H_REG))
            if status == L.NEED_GROW:
                a.grow(head[L.H_GROW])
                continue
            if status == L.NEED_RULE:
                if not head[L.H_NEEDS]:  # (a kernel bug: compiling nothing, the op would only ask again)
                    raise RuntimeError("the pda kernel asked for rules without naming any")
                a.compile_rules(head[L.H_NEED_LIST : L.H_NEED_LIST + head[L.H_NEEDS]])
                continue
            limit, what = _LIMITS[head[L.H_ERR_LIMIT]]
            value = getattr(self.limits, limit)
            where = f"{when}, in rule {self.program.rule_at(head[L.H_ERR_POS])!r}"
            raise ConstraintLimitError(limit, value, head[L.H_ERR_AMOUNT], where, what)

    def _state(self, sid: int) -> KernelState | None:
        if sid < 0:
            return None
        st = self.arena.states.get(sid)
        if st is None:
            st = self.arena.states[sid] = KernelState(self.arena, sid, self._flags)
        return st

    # -- the engine interface (constraint.py) -----------------------------------------------------------------

    def too_big(self) -> bool:
        return self.n_states > self.limits.max_states or self.n_masks > self.limits.max_states

    def reset(self) -> None:
        """A new arena (the old one lives on while states of it are held: `adopt` re-interns them)."""
        self.arena = self._fresh()
        self.resets += 1
        self.initial = self._state(self._run(L.OP_START, 0, 0, "the start state"))

    def adopt(self, st: KernelState) -> KernelState:
        """`st` as a state of the current arena (itself when it already is one)."""
        if st.arena is self.arena:
            return st
        old, be = st.arena, self.be
        rec = array("i", be.read_bytes(old.buf, old.offs[L.R_STATES] + L.ST_W * st.id, 2))
        stacks = array("i", be.read_bytes(old.buf, old.offs[L.R_SPOOL] + rec[0], rec[1]))
        n_nodes = array("i", be.read_bytes(old.buf, L.H_REG + L.REG_W * L.R_NODES + 2, 1))[0]
        nodes = array("i", be.read_bytes(old.buf, old.offs[L.R_NODES], 4 * n_nodes))
        out = array("i", [len(stacks)])
        for s in stacks:
            frames = []
            while s > L.EXIT:
                frames.append((nodes[4 * s], nodes[4 * s + 2]))
                s = nodes[4 * s + 1]
            out.extend((s, len(frames)))
            for pos, count in reversed(frames):
                out.extend((pos, count))
        self._input(out)
        return self._state(self._run(L.OP_IMPORT, 0, 0))

    def _input(self, values: array) -> None:
        a = self.arena
        if len(values) > a.caps[L.R_INPUT]:  # (once: each grow copies the whole arena)
            a.grow(L.R_INPUT, len(values))
        self.be.write_i32(a.buf, values, a.offs[L.R_INPUT])
        self.be.write_i32(a.buf, [len(values)], L.H_REG + L.REG_W * L.R_INPUT + 2)  # kept if the arena grows

    def push_token(self, st: KernelState, token: int) -> KernelState | None:
        return self._state(self._run(L.OP_PUSH_TOKEN, st.id, token))

    def push_bytes(self, st: KernelState, data: bytes) -> KernelState | None:
        self._input(array("i", list(data)))
        return self._state(self._run(L.OP_PUSH_BYTES, st.id, len(data)))

    def state_bits(self, st: KernelState) -> int:
        """The allowed tokens of `st` as an int bitset over token ids (EOS is the caller's business)."""
        bits = st.mask
        if bits is None:
            self._run(L.OP_MASK, st.id, 0)
            a = self.arena
            bits = st.mask = int.from_bytes(self.be.read_bytes(a.buf, a.offs[L.R_OUT], self.tables.n_words), "little")
        return bits

    # -- statistics and switches (tests) ----------------------------------------------------------------------

    def _header(self, field: int) -> int:
        return array("i", self.be.read_bytes(self.arena.buf, field, 1))[0]

    @property
    def walked_nodes(self) -> int:
        """Trie nodes visited by the walks of this arena."""
        return self._header(L.H_VISITED)

    @property
    def walks(self) -> int:
        return self._header(L.H_WALKS)

    @property
    def sliced(self) -> int:
        """Masks of this arena whose slice tokens were set at once (`pda_walk.slice_alive`)."""
        return self._header(L.H_SLICED)

    @property
    def chains(self) -> bool:
        return self._chains

    @chains.setter
    def chains(self, on: bool) -> None:
        """Whether subtrees are accepted whole along counter chains (tests turn it off)."""
        self._chains = on
        self.be.write_i32(self.arena.buf, [int(on)], L.H_CHAINS)
