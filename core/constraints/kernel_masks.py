"""Token masks computed by the `trie_walk` kernel op (numba natively, C/wasm in the browser) instead of the
Python walk of `masks.py`, over the same trie and automaton laid out as flat tables (`kernels/trie_walk.py`):

    TokenTrie (lists)  ──once per vocabulary and backend──▶  TrieTables: nodes, first_tok, tok_order, sets
    Automaton (lazy)   ──a row per state, as walks need──▶  Workspace: trans (the DFA), info, scratch

The DFA is as lazy as the automaton: a state's row starts UNKNOWN for the bytes some stack can take (DEAD
for the others); the kernel stops at an UNKNOWN entry, the engine steps the automaton for that byte and fills
every byte the state treats alike (`Automaton.advance_of`: one step), and the kernel resumes. So the kernel
steps the automaton for the same bytes the Python walk would, and its masks are the same (tests check them
token by token); the cuts, caches and exits logic is `MaskEngine`'s, unchanged.

Workspaces (the DFA tables and the walk's scratch, in backend memory) are pooled per TrieTables: the wasm
backend never frees memory, so a constraint gives its workspace back when it is dropped.
"""

from __future__ import annotations

import weakref
from array import array

from ..errors import LlamayError
from ..kernels import get_backend
from ..kernels import trie_walk as K
from .automaton import Automaton, State
from .masks import _HEAVY, MaskEngine, _Local
from .trie import TokenTrie

_WORDS = tuple(range(8))
_DEAD_ROW = array("i", [K.DEAD]) * 256


def _words(bits: int) -> list[int]:
    """A 256-bit set as 8 signed int32 words (little-endian)."""
    out = []
    for k in _WORDS:
        w = bits >> (32 * k) & 0xFFFFFFFF
        out.append(w - (1 << 32) if w >= 1 << 31 else w)
    return out


_BYTE_LISTS: dict[int, tuple[int, ...]] = {}  # a byte set -> its bytes (states share their sets: string content)
_ROWS: dict[int, tuple[array, array]] = {}  # the `first` bytes of a state -> (its fresh row, its info words)


def _bytes_of(bits: int) -> tuple[int, ...]:
    got = _BYTE_LISTS.get(bits)
    if got is None:
        out, rest = [], bits
        while rest:
            low = rest & -rest
            out.append(low.bit_length() - 1)
            rest ^= low
        if len(_BYTE_LISTS) > 65536:  # bounded: sets come from grammars
            _BYTE_LISTS.clear()
        got = _BYTE_LISTS[bits] = tuple(out)
    return got


def _fresh_row(first: int) -> tuple[array, array]:
    """(a row: UNKNOWN for the bytes in `first`, DEAD for the others; the info words after the flags)."""
    got = _ROWS.get(first)
    if got is None:
        row = array("i", _DEAD_ROW)
        for b in _bytes_of(first):
            row[b] = K.UNKNOWN
        if len(_ROWS) > 4096:
            _ROWS.clear()
        got = _ROWS[first] = (row, array("i", [0, *_words(first), *_words(0)]))
    return got


class Workspace:
    """A DFA's tables with room for `cap` states, and the buffers of one walk."""

    def __init__(self, be, tables: TrieTables, exits: int, cap: int = 256) -> None:
        self.be = be
        self.n_words = (tables.n_vocab + 31) // 32
        self.out = be.alloc_i32(self.n_words)
        self.states = be.alloc_i32(tables.max_depth + 2)
        self.exits_cap = exits
        self.exits = be.alloc_i32(exits)
        self.ctl = be.alloc_i32(K.CTL)
        self.cap = cap
        self.trans = be.alloc_i32(256 * cap)
        self.info = be.alloc_i32(K.INFO * cap)

    def grow(self, need: int) -> None:
        cap = self.cap
        while cap <= need:
            cap *= 2
        be = self.be
        trans, info = be.alloc_i32(256 * cap), be.alloc_i32(K.INFO * cap)
        be.copy(trans, 0, self.trans, 0, 256 * self.cap)
        be.copy(info, 0, self.info, 0, K.INFO * self.cap)
        self.trans, self.info, self.cap = trans, info, cap


class TrieTables:
    """A TokenTrie as the kernel's int32 buffers on one backend (built once per vocabulary and backend)."""

    def __init__(self, trie: TokenTrie, be) -> None:
        self.be = be
        self.n_vocab = trie.n_vocab
        self.n_nodes = trie.n_nodes
        self.max_depth = trie.max_depth
        n = trie.n_nodes
        nodes = array("i", bytes(4 * K.NODE * n))
        sets = array("i")
        byte, depth, skip, below, height = trie.byte, trie.depth, trie.skip, trie.below, trie.height
        for i in range(n):
            at = K.NODE * i
            nodes[at] = byte[i]
            nodes[at + 1] = depth[i]
            nodes[at + 2] = skip[i]
            if skip[i] - i > K.SHORTCUT:
                nodes[at + 3] = len(sets) // K.SET
                sets.extend(_words(below[i]))
                sets.append(height[i])
            else:
                nodes[at + 3] = -1
        self.nodes = self._put(nodes)
        self.first_tok = self._put(array("i", trie.first_tok))
        self.tok_order = self._put(array("i", trie.tok_order or [0]))
        self.sets = self._put(sets or array("i", [0] * K.SET))
        self._free: list[Workspace] = []
        # an empty walk: the kernel is loaded (numba compiles or reads its cache) here, not in the first mask
        ws = self.acquire(2)
        be.trie_walk(ws.out, self.nodes, self.first_tok, self.tok_order, self.sets, ws.trans, ws.info, ws.states,
                     ws.exits, ws.ctl)  # fmt: skip
        self.release(ws)

    def _put(self, values: array):
        buf = self.be.alloc_i32(len(values))
        self.be.write_i32(buf, values)
        return buf

    def acquire(self, exits: int) -> Workspace:
        for k, ws in enumerate(self._free):
            if ws.exits_cap >= exits:
                return self._free.pop(k)
        return Workspace(self.be, self, exits)

    def release(self, ws: Workspace) -> None:
        self._free.append(ws)


_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trie -> {backend name: TrieTables}


def trie_tables(trie: TokenTrie, be) -> TrieTables:
    per = _TABLES.setdefault(trie, {})
    t = per.get(be.name)
    if t is None or t.be is not be:
        t = per[be.name] = TrieTables(trie, be)
    return t


class KernelMaskEngine(MaskEngine):
    """`MaskEngine` with its walks run by the backend's `trie_walk` kernel."""

    def __init__(self, automaton: Automaton, trie: TokenTrie, be, budget: int | None = None, chains: bool = True):
        super().__init__(automaton, trie, budget, chains)
        self.be = be
        self.tables = trie_tables(trie, be)
        self.ws = self.tables.acquire(self.budget + 2)
        self._finalizer = weakref.finalize(self, self.tables.release, self.ws)
        self._known: dict[int, State] = {}  # states with a row in the tables, by id (this epoch)
        self._rows: dict[int, array] = {}  # each known state's row, as written
        self._flags: dict[int, int] = {}
        self._ctl = array("i", bytes(4 * K.CTL))
        self.kernel_calls = 0  # statistics: calls of the kernel (one more per entry it had to ask for)

    def clear(self) -> None:
        super().clear()
        self._known.clear()
        self._rows.clear()
        self._flags.clear()

    # -- the tables -------------------------------------------------------------------------------------------

    def _row_of(self, st: State) -> int:
        """The id of `st`, its row started in the tables (UNKNOWN for the bytes it can take)."""
        sid = st.id
        if self._known.get(sid) is st:
            return sid
        ws = self.ws
        if sid >= ws.cap:
            ws.grow(sid)
        template, words = _fresh_row(st.first)
        row = array("i", template)
        info = array("i", words)
        info[0] = flags = (K.EXIT if st.exit else 0) | (K.ONLY_EXIT if st.only_exit else 0)
        self.be.write_i32(ws.trans, row, 256 * sid)
        self.be.write_i32(ws.info, info, K.INFO * sid)
        self._known[sid] = st
        self._rows[sid] = row
        self._flags[sid] = flags
        return sid

    def _fill_step(self, sid: int, byte: int) -> None:
        """Row `sid`: the entry of `byte` and of every byte the state treats alike (one automaton step)."""
        st = self._known[sid]
        same, nxt = self.aut.advance_of(st, byte)
        target = self._row_of(nxt) if nxt is not None else K.DEAD
        row = self._rows[sid]
        for b in _bytes_of(same):
            row[b] = target
        self.be.write_i32(self.ws.trans, row, 256 * sid)

    def _fill_loop(self, sid: int) -> None:
        """Row `sid` whole and its loop bytes (`Automaton.loop_bytes` steps every byte it can take)."""
        st = self._known[sid]
        loop = self.aut.loop_bytes(st)
        row = self._rows[sid]
        by_id = self.aut.by_id
        for b in _bytes_of(st.first):
            t = st.trans[b]
            row[b] = self._row_of(by_id[t]) if t >= 0 else K.DEAD
        flags = self._flags[sid] = self._flags[sid] | K.LOOP_KNOWN
        ws = self.ws
        self.be.write_i32(ws.trans, row, 256 * sid)
        self.be.write_i32(ws.info, [flags], K.INFO * sid)
        self.be.write_i32(ws.info, _words(loop), K.INFO * sid + K.LOOP)

    # -- walks --------------------------------------------------------------------------------------------------

    def _run(self, st0: State, lo: int, hi: int, d0: int, budget: int | None, ranges: list[int] = ()) -> int:
        """Run the kernel over nodes lo..hi below depth d0 from st0 (then the subtrees below `ranges`, from st0),
        on a cleared `out`, filling the entries it asks for, until it is done: DONE or HEAVY_CUT."""
        be, ws, t = self.be, self.ws, self.tables
        sid = self._row_of(st0)
        ctl = self._ctl
        ctl[K.I], ctl[K.HI], ctl[K.HEAVY], ctl[K.N_EXITS] = lo, hi, 0, 0
        ctl[K.BUDGET] = -1 if budget is None else budget
        ctl[K.RECORD] = budget is not None
        ctl[K.CHAINS] = self.chains
        ctl[K.VISITED] = 0
        ctl[K.R_NEXT], ctl[K.R_COUNT], ctl[K.R_START] = 0, len(ranges), sid
        ctl[K.FRESH], ctl[K.D0], ctl[K.N_WORDS] = 1, d0, ws.n_words
        if ranges:
            be.write_i32(ws.exits, ranges)
        be.write_i32(ws.ctl, ctl)
        walk = be.trie_walk
        args = (ws.out, t.nodes, t.first_tok, t.tok_order, t.sets, ws.trans, ws.info, ws.states, ws.exits, ws.ctl)
        while True:
            status = walk(*args)
            self.kernel_calls += 1
            if status == K.DONE or status == K.HEAVY_CUT:
                break
            regs = array("i", be.read_bytes(ws.ctl, K.MISS_STATE, 2))
            if status == K.NEED_STEP:
                self._fill_step(regs[0], regs[1])
            else:
                self._fill_loop(regs[0])
            args = (ws.out, t.nodes, t.first_tok, t.tok_order, t.sets, ws.trans, ws.info, ws.states, ws.exits, ws.ctl)
        ctl.frombytes(be.read_bytes(ws.ctl, 0, K.CTL))
        del ctl[: K.CTL]
        self.walked_nodes += ctl[K.VISITED]
        return status

    def _bits(self) -> int:
        return int.from_bytes(self.be.read_bytes(self.ws.out, 0, self.ws.n_words), "little")

    def _walk_local(self, key: int, budget: int | None) -> _Local:
        start = self.aut.state((key,))
        if self._run(start, 1, self.trie.n_nodes, 0, budget) == K.HEAVY_CUT:
            return _HEAVY
        n_ex = self._ctl[K.N_EXITS]
        exits = array("i", self.be.read_bytes(self.ws.exits, 0, n_ex)).tolist() if n_ex else []
        return _Local(self._bits(), exits)

    def _walk_exits(self, st_rest: State, exits: list[int]) -> int:
        self._run(st_rest, 0, 0, 0, None, exits)
        return self._bits()


def mask_engine(automaton: Automaton, trie: TokenTrie, backend: str | None = None) -> MaskEngine:
    """The mask engine for a constraint: the kernel walk on a compiled backend (`backend`, else the default one,
    `kernels.get_backend`), the Python walk on portable (where it is the faster of the two) or with no backend."""
    try:
        be = get_backend(backend)
    except LlamayError:
        if backend is not None:
            raise
        return MaskEngine(automaton, trie)
    if be.name == "portable":
        return MaskEngine(automaton, trie)
    return KernelMaskEngine(automaton, trie, be)
