"""`GrammarConstraint`: a compiled grammar bound to a vocabulary, behind the `Constraint` interface.

    c = GrammarConstraint(program, vocab)
    st = c.start()
    if not c.accepts(st, tok):          # the fast check: walk one token's bytes
        mask = c.allowed(st)            # the fallback: every allowed token (cached per state)
    st = c.advance(st, tok)

Two engines run the grammar, with the same answers: on a compiled backend (numba; wasm: C translated from the
same source) the `pda` kernel op (`KernelEngine`, kernel_engine.py: the automaton and the masks in flat tables
in backend memory); on the portable backend (whose pda op is its Python reference), or with none, the Python
automaton and trie walk (`PythonEngine`: automaton.py, masks.py).
States are immutable: keeping an old one is a rollback, sharing one is a fork. The tables and the mask caches
grow with what generation visits; past `max_states` (limits.py) they start afresh at the next call, and a state
from before is re-interned (`adopt`): memory stays bounded however long a cached constraint serves.

The tables are built as states are stepped: one thread at a time may call a constraint's methods (the model
thread); compiling one (constructing it) touches nothing shared.
"""

from __future__ import annotations

from ..errors import LlamayError
from ..kernels import get_backend
from .automaton import Automaton, State
from .compile import Program
from .errors import ConstraintError
from .kernel_engine import KernelEngine
from .limits import DEFAULT_LIMITS, ConstraintLimits
from .masks import MaskEngine
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


class PythonEngine:
    """A compiled grammar run by the Python automaton and trie walk (automaton.py, masks.py)."""

    def __init__(self, program: Program, vocab: ConstraintVocab, limits: ConstraintLimits) -> None:
        self.vocab = vocab
        self.limits = limits
        self.automaton = Automaton(program, limits)
        self.masks = MaskEngine(self.automaton, vocab.trie)
        self.resets = 0

    @property
    def initial(self) -> State:
        return self.automaton.initial

    @property
    def n_states(self) -> int:
        return self.automaton.n_states

    def too_big(self) -> bool:
        return self.automaton.n_states > self.limits.max_states or self.masks.n_cached > self.limits.max_states

    def reset(self) -> None:
        self.automaton.reset()
        self.masks.clear()
        self.resets += 1

    def adopt(self, st: State) -> State:
        return st if st.tables is self.automaton.tables else self.automaton.adopt(st)

    def push_token(self, st: State, token: int) -> State | None:
        return self.automaton.push_bytes(st, self.vocab.token_bytes[token])

    def push_bytes(self, st: State, data: bytes) -> State | None:
        return self.automaton.push_bytes(st, data)

    def state_bits(self, st: State) -> int:
        return self.masks.state_bits(st)

    @property
    def walked_nodes(self) -> int:
        return self.masks.walked_nodes

    @property
    def chains(self) -> bool:
        return self.masks.chains

    @chains.setter
    def chains(self, on: bool) -> None:
        self.masks.chains = on


_REFERENCE_PDA = ("portable",)  # backends whose pda op is the Python reference


def grammar_engine(program: Program, vocab: ConstraintVocab, limits: ConstraintLimits, backend: str | None = None):
    """The kernel engine on a backend with a compiled pda op (`backend`, else the default one,
    `kernels.get_backend`), the Python one on those that run its Python reference (where it is the faster of the
    two) or with no backend."""
    try:
        be = get_backend(backend)
    except LlamayError:
        if backend is not None:
            raise
        return PythonEngine(program, vocab, limits)
    if be.name in _REFERENCE_PDA:
        return PythonEngine(program, vocab, limits)
    return KernelEngine(program, vocab, limits, be)


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
        self.engine = grammar_engine(program, vocab, self.limits, backend)
        self._last: tuple[object, int, object] | None = None

    @property
    def resets(self) -> int:
        """Times the tables started afresh (statistics)."""
        return self.engine.resets

    def _live(self, state):
        """`state` in the engine's current tables, after starting them afresh if they grew past the limit."""
        eng = self.engine
        if eng.too_big():
            eng.reset()
            self._last = None
        return state if state is FINISHED else eng.adopt(state)

    def start(self):
        return self._live(self.engine.initial)

    def is_complete(self, state) -> bool:
        return state is FINISHED or state.complete

    def is_finished(self, state) -> bool:
        """No byte can follow: only an end-of-generation token is allowed (or nothing, after one)."""
        return state is FINISHED or state.only_exit

    def _after(self, state, token: int):
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
            nxt = self.engine.push_token(state, token) if data else None
        self._last = (state, token, nxt)
        return nxt

    def accepts(self, state, token: int) -> bool:
        return self._after(state, token) is not None

    def advance(self, state, token: int):
        nxt = self._after(state, token)
        if nxt is None:
            data = self.vocab.token_bytes[token] if 0 <= token < self.vocab.n_vocab else None
            raise ConstraintError(f"{self.name}: token {token} ({data!r}) is not allowed here")
        return nxt

    def allowed(self, state) -> TokenMask:
        if state is FINISHED:
            return TokenMask(0, self.vocab.n_vocab)
        state = self._live(state)
        bits = self.engine.state_bits(state)
        if state.complete:
            bits |= self.vocab.eog_bits
        return TokenMask(bits, self.vocab.n_vocab)

    def advance_bytes(self, state, data: bytes):
        """The state after raw bytes (for tests and forced text), None when they are not allowed."""
        return None if state is FINISHED else self.engine.push_bytes(self._live(state), data)
