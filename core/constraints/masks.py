"""Token masks: which tokens of the vocabulary a grammar state allows, computed by walking the token trie with
the automaton, and cached where that is sound.

    trie (tokens)            automaton (grammar)
    node i, byte b  ───────▶ push_byte(state[depth-1], b) ──▶ state[depth]  (None: skip i's subtree)
                    ◀─────── token at node i and state alive: allowed

A state is a set of stacks and a token is allowed when some stack accepts it, so a state's mask is the union
of its stacks' masks. The mask of a stack depends on few of its frames: most tokens are used up within the
top ones. So a stack is cut after its top d frames (the floor becomes EXIT) and that truncated stack is walked
over the whole trie once; the result is cached by the truncated stack and shared by every context with the
same top frames (all string fields of a schema share their string-content walk). A subtree whose bytes all lead
back to the state reached at its root (plain characters inside a string) is accepted whole, without walking
it (`TokenTrie.below`, `Automaton.loop_bytes`); so is one whose bytes all lead, step after step, along a chain
of single states at least as long as the subtree is deep (`TokenTrie.height`, `Automaton.advance_of`): a
bounded string's characters, each one state further along its counter. Where the walk reaches EXIT
after consuming a prefix with more bytes below it in the trie, the rest of those tokens depends on the frames
below the cut: those few subtrees are walked again from the real continuation. d starts at 1 and grows while
those subtrees are too big (in a string, the cut must keep the frame with the closing quote), up to
`_MAX_CUTS` frames, beyond which the stack is walked whole: a mask costs a bounded number of walks per stack.
"""

from __future__ import annotations

from .automaton import DEAD, EXIT, Automaton, State
from .trie import TokenTrie

_BIT = bytes(1 << k for k in range(8))
_SHORTCUT = 16  # subtrees above this many nodes are checked for "every byte below loops back"
_MAX_CUTS = 8  # cuts tried (each a budgeted walk) before a stack is walked whole: bounds the work of one mask


class _Local:
    """A truncated stack's walk over the whole trie: allowed token bits and the nodes where control left."""

    __slots__ = ("bits", "exits")

    def __init__(self, bits: int, exits: list[int]) -> None:
        self.bits = bits
        self.exits = exits


_HEAVY = _Local(0, [])  # marker: the exits cover too much of the trie at this cut


class MaskEngine:
    def __init__(self, automaton: Automaton, trie: TokenTrie, budget: int | None = None, chains: bool = True) -> None:
        self.aut = automaton
        self.chains = chains  # accept subtrees whole along `Automaton.advance_of` chains (tests turn it off)
        self.trie = trie
        self.n_bytes = (trie.n_vocab + 7) // 8
        # the most trie nodes below exits a cut may leave to per-context walks before the cut is deepened
        self.budget = budget if budget is not None else max(2048, trie.n_nodes // 32)
        self._local: dict[int, _Local] = {}
        self._stack_bits: dict[int, int] = {}
        self._exit_bits: dict[tuple[int, int], int] = {}  # (truncated stack, the rest below it) -> exits' bits
        self.horizon = trie.max_depth  # a walk pushes at most this many bytes (REP counts are canonical beyond)
        self._scratch: list[State | None] = [None] * (trie.max_depth + 2)
        self.walked_nodes = 0  # statistics: trie nodes visited by all walks

    @property
    def n_cached(self) -> int:
        return len(self._local) + len(self._stack_bits) + len(self._exit_bits)

    def clear(self) -> None:
        """Forget every cached walk (the automaton's tables started afresh: the stack ids are stale)."""
        self._local.clear()
        self._stack_bits.clear()
        self._exit_bits.clear()
        self._scratch = [None] * len(self._scratch)

    # -- public -----------------------------------------------------------------------------------------------

    def state_bits(self, st: State) -> int:
        """The allowed tokens of `st` as an int bitset over token ids (EOS is the caller's business)."""
        bits = st.mask
        if bits is None:
            bits = 0
            for s in st.stacks:
                if s > EXIT:
                    bits |= self.stack_bits(s)
            st.mask = bits
        return bits

    def stack_bits(self, stack: int) -> int:
        bits = self._stack_bits.get(stack)
        if bits is not None:
            return bits
        aut = self.aut
        total = aut.depth(stack)
        d = 1
        while True:
            if d >= total or d > _MAX_CUTS:
                key, rest = stack, None
            else:
                key, rest = aut.truncate(stack, d, self.horizon)
            local = self._local.get(key)
            if local is None:
                local = self._walk_local(key, self.budget if rest is not None else None)
                self._local[key] = local
            if local is not _HEAVY:
                break
            d += 1
        bits = local.bits
        if local.exits and rest is not None:
            more = self._exit_bits.get((key, rest))
            if more is None:  # the tokens that leave the cut, continued below it (the same for every count)
                more = self._exit_bits[key, rest] = self._walk_exits(aut.state(aut.pop_into(rest)), local.exits)
            bits |= more
        self._stack_bits[stack] = bits
        return bits

    # -- walks ------------------------------------------------------------------------------------------------

    def _walk_local(self, key: int, budget: int | None) -> _Local:
        acc = bytearray(self.n_bytes)
        exits: list[int] = []
        start = self.aut.state((key,))
        if not self._walk(start, 1, self.trie.n_nodes, 0, acc, exits, budget):
            return _HEAVY
        return _Local(int.from_bytes(acc, "little"), exits)

    def _walk_exits(self, st_rest: State, exits: list[int]) -> int:
        """The bits of the tokens below each exit node, walked from `st_rest` (control returned below the cut)."""
        acc = bytearray(self.n_bytes)
        skip, depth = self.trie.skip, self.trie.depth
        for ex in exits:
            self._walk(st_rest, ex + 1, skip[ex], depth[ex], acc, None, None)
        return int.from_bytes(acc, "little")

    def _walk(self, st0: State, lo: int, hi: int, d0: int, acc: bytearray, exits, budget) -> bool:
        """Walk trie nodes lo..hi (the subtree below a node at depth d0, whose state is st0), setting the bits
        of allowed tokens in `acc`. With `exits`, record nodes where EXIT is reached and return False once the
        subtrees below them exceed `budget` nodes."""
        trie = self.trie
        byte, depth, skip, token = trie.byte, trie.depth, trie.skip, trie.token
        below, first_tok, tok_order, height = trie.below, trie.first_tok, trie.tok_order, trie.height
        chains = self.chains
        step, loop_bytes, by_id = self.aut.step, self.aut.loop_bytes, self.aut.by_id
        states = self._scratch
        states[d0] = st0
        heavy = 0
        i = lo
        visited = 0
        while i < hi:
            visited += 1
            d = depth[i]
            st = states[d - 1]
            b = byte[i]
            ns = st.trans[b]
            if ns >= 0:
                ns = by_id[ns]
            elif ns == DEAD or (ns := step(st, b)) is None:
                i = skip[i]
                continue
            t = token[i]
            if t >= 0:
                acc[t >> 3] |= _BIT[t & 7]
            elif t == -2:
                for t in trie.extra[i]:
                    acc[t >> 3] |= _BIT[t & 7]
            end = skip[i]
            if end - i > _SHORTCUT and not ns.exit and not below[i] & ~ns.first:
                loop = ns.loop if ns.loop >= 0 else loop_bytes(ns)
                if not below[i] & ~loop or (chains and self._chain_alive(ns, below[i], height[i])):
                    # every byte below loops back to ns, or leads along one chain of live states (a bounded
                    # string's counter) at least as long as the subtree is deep: all those tokens are allowed
                    for t in tok_order[first_tok[i + 1] : first_tok[end]]:
                        acc[t >> 3] |= _BIT[t & 7]
                    i = end
                    continue
            if ns.exit:
                if exits is not None and end > i + 1:
                    exits.append(i)
                    heavy += end - i - 1
                    if budget is not None and heavy > budget:
                        self.walked_nodes += visited
                        return False
                if ns.only_exit:
                    i = end
                    continue
            states[d] = ns
            i += 1
        self.walked_nodes += visited
        return True

    def _chain_alive(self, st: State, byte_set: int, n: int) -> bool:
        """Whether every string of at most `n` bytes from `byte_set` is alive from `st`: each of the next `n`
        states on its `advance_of` chain takes all of `byte_set` alike (to the next one, a single state)."""
        advance_of = self.aut.advance_of
        low = (byte_set & -byte_set).bit_length() - 1
        for _ in range(n):
            same, nxt = advance_of(st, low)
            if nxt is None or byte_set & ~same:
                return False
            if nxt is st:
                return True
            st = nxt
        return True

    def token_allowed(self, st: State, data: bytes) -> bool:
        """Whether the token with bytes `data` is allowed in `st` (a walk of its bytes, no mask needed)."""
        return self.aut.push_bytes(st, data) is not None
