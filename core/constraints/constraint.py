"""`GrammarConstraint`: a compiled grammar bound to a vocabulary, behind the `Constraint` interface.

    c = GrammarConstraint(program, vocab)
    st = c.start()
    if not c.accepts(st, tok):          # the fast check: walk one token's bytes
        mask = c.allowed(st)            # the fallback: every allowed token (cached per state)
    st = c.advance(st, tok)

States are immutable automaton states: keeping an old one is a rollback, sharing one is a fork. The
automaton's tables and the mask caches grow with what generation visits; past `max_states` (limits.py) they
start afresh at the next call, and a state from before is re-interned (`Automaton.adopt`): memory stays bounded
however long a cached constraint serves.

The tables are built as states are stepped: one thread at a time may call a constraint's methods (the model
thread); compiling one (constructing it) touches nothing shared.
"""

from __future__ import annotations

from .automaton import Automaton, State
from .compile import Program
from .errors import ConstraintError
from .kernel_masks import mask_engine
from .limits import DEFAULT_LIMITS, ConstraintLimits
from .vocab import ConstraintVocab

_POPCOUNT = bytes(bin(i).count("1") for i in range(256))
_BITS_OF = tuple(tuple(k for k in range(8) if i >> k & 1) for i in range(256))


class TokenMask:
    """A set of token ids as a bitset (bit t of `bits`); `to_bytes()` is the packed little-endian form
    (token t is bit t % 8 of byte t // 8), as llguidance and xgrammar lay theirs out."""

    __slots__ = ("_count", "_packed", "bits", "n_vocab")

    def __init__(self, bits: int, n_vocab: int) -> None:
        self.bits = bits
        self.n_vocab = n_vocab
        self._packed: bytes | None = None
        self._count = -1

    def to_bytes(self) -> bytes:
        if self._packed is None:
            self._packed = self.bits.to_bytes((self.n_vocab + 7) // 8, "little")
        return self._packed

    def to_bytearray(self) -> bytearray:
        return bytearray(self.to_bytes())

    def __contains__(self, token: int) -> bool:
        packed = self.to_bytes()
        return 0 <= token < self.n_vocab and bool(packed[token >> 3] >> (token & 7) & 1)

    def __len__(self) -> int:
        if self._count < 0:
            self._count = sum(map(_POPCOUNT.__getitem__, self.to_bytes()))
        return self._count

    def tokens(self) -> list[int]:
        out = []
        for i, byte in enumerate(self.to_bytes()):
            if byte:
                base = i << 3
                out.extend(base + k for k in _BITS_OF[byte])
        return out

    def __repr__(self) -> str:
        return f"TokenMask({len(self)} of {self.n_vocab})"


# the state after an end-of-generation token: nothing more is allowed
FINISHED = State(-1, ())


class GrammarConstraint:
    """A grammar (compiled `Program`) over a vocabulary: masks, fast checks and advancing, per token."""

    def __init__(
        self,
        program: Program,
        vocab: ConstraintVocab,
        name: str = "grammar",
        limits: ConstraintLimits | None = None,
        backend: str | None = None,
    ) -> None:
        self.program = program
        self.vocab = vocab
        self.name = name
        self.limits = limits or DEFAULT_LIMITS
        self.automaton = Automaton(program, self.limits)
        self.engine = mask_engine(self.automaton, vocab.trie, backend)
        self._last: tuple[State, int, State | None] | None = None
        self.resets = 0  # statistics: times the tables started afresh

    def _live(self, state: State) -> State:
        """`state` in the automaton's current tables, after starting them afresh if they grew past the limit."""
        aut = self.automaton
        if aut.n_states > self.limits.max_states or self.engine.n_cached > self.limits.max_states:
            aut.reset()
            self.engine.clear()
            self._last = None
            self.resets += 1
        return state if state is FINISHED or state.tables is aut.tables else aut.adopt(state)

    def start(self) -> State:
        return self._live(self.automaton.initial)

    def is_complete(self, state: State) -> bool:
        return state is FINISHED or state.complete

    def is_finished(self, state: State) -> bool:
        """No byte can follow: only an end-of-generation token is allowed (or nothing, after one)."""
        return state is FINISHED or state.only_exit

    def _after(self, state: State, token: int) -> State | None:
        state = self._live(state)
        last = self._last
        if last is not None and last[0] is state and last[1] == token:
            return last[2]
        if state is FINISHED:
            nxt = None
        elif token in self.vocab.eog_ids:
            nxt = FINISHED if state.complete else None
        else:
            data = self.vocab.token_bytes[token] if 0 <= token < self.vocab.n_vocab else None
            nxt = self.automaton.push_bytes(state, data) if data else None
        self._last = (state, token, nxt)
        return nxt

    def accepts(self, state: State, token: int) -> bool:
        return self._after(state, token) is not None

    def advance(self, state: State, token: int) -> State:
        nxt = self._after(state, token)
        if nxt is None:
            data = self.vocab.token_bytes[token] if 0 <= token < self.vocab.n_vocab else None
            raise ConstraintError(f"{self.name}: token {token} ({data!r}) is not allowed here")
        return nxt

    def allowed(self, state: State) -> TokenMask:
        if state is FINISHED:
            return TokenMask(0, self.vocab.n_vocab)
        state = self._live(state)
        bits = self.engine.state_bits(state)
        if state.complete:
            bits |= self.vocab.eog_bits
        return TokenMask(bits, self.vocab.n_vocab)

    def advance_bytes(self, state: State, data: bytes) -> State | None:
        """The state after raw bytes (for tests and forced text), None when they are not allowed."""
        return None if state is FINISHED else self.automaton.push_bytes(self._live(state), data)
