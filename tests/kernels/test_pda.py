"""The `pda` op on every backend (portable reference, numba, wasm): a grammar run by the kernel (automaton, DFA
and masks in flat tables, `KernelEngine`) gives the Python engine's masks and states (`PythonEngine`:
automaton.py, masks.py) and the token-by-token checks, along walks through several grammars, with and without
the chain shortcut, with arenas that must grow mid-operation, and with its limits."""

from __future__ import annotations

import gc
import random
import weakref

import pytest

from llamay.constraints import (
    ConstraintLimitError,
    GrammarConstraint,
    compile_grammar,
    parse_gbnf,
    schema_to_gbnf,
    schema_to_grammar,
)
from llamay.constraints.constraint import PythonEngine
from llamay.constraints.kernel_engine import KernelEngine
from llamay.constraints.limits import ConstraintLimits
from llamay.kernels import pda_layout as L
from tests.backends import require_backend
from tests.constraints.conftest import load_vocab
from tests.constraints.test_masks import GRAMMARS, LONG

BACKENDS = ("portable", "numba", "wasm")


def pair(gbnf: str, vocab, backend: str, limits=None) -> tuple[GrammarConstraint, GrammarConstraint]:
    """(a constraint on the Python engine, one on the kernel of `backend`), over the same program."""
    prog = compile_grammar(parse_gbnf(gbnf))
    ref = GrammarConstraint(prog, vocab, limits=limits)
    ref.engine = PythonEngine(prog, vocab, ref.limits)
    ker = GrammarConstraint(prog, vocab, limits=limits)
    ker.engine = KernelEngine(prog, vocab, ker.limits, require_backend(backend))
    return ref, ker


def brute_force(c: GrammarConstraint, st) -> list[int]:
    return [t for t in range(c.vocab.n_vocab) if c.accepts(st, t)]


def walk_and_compare(ref, ker, seed, steps: int, check_every: int) -> int:
    """Follow one random path of allowed tokens; at each state the kernel's mask must be the reference's (and,
    every `check_every` steps, the tokens accepted one by one). Returns the masks compared."""
    rng = random.Random(seed)
    st_r, st_k = ref.start(), ker.start()
    vocab = ref.vocab
    for step in range(steps):
        mask = ref.allowed(st_r)
        assert ker.allowed(st_k).bits == mask.bits, f"step {step}"
        assert (ker.is_complete(st_k), ker.is_finished(st_k)) == (ref.is_complete(st_r), ref.is_finished(st_r))
        if step % check_every == 0:
            assert mask.tokens() == brute_force(ker, st_k)
        choices = [t for t in mask.tokens() if t not in vocab.eog_ids]
        if not choices:
            return step + 1
        tok = max(rng.sample(choices, min(4, len(choices))), key=lambda t: len(vocab.token_bytes[t] or b""))
        st_r, st_k = ref.advance(st_r, tok), ker.advance(st_k, tok)
    return steps


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vocab_name", ["synthetic", "stories260K"])
@pytest.mark.parametrize("grammar", sorted(GRAMMARS))
def test_kernel_masks_equal_the_python_engine(backend, vocab_name, grammar):
    ref, ker = pair(GRAMMARS[grammar], load_vocab(vocab_name), backend)
    assert walk_and_compare(ref, ker, grammar, 25, 6) >= 2
    assert ker.engine.walks > 0


@pytest.mark.parametrize("backend", ["numba", "wasm"])
@pytest.mark.parametrize("grammar", ["json", "k8s_container", "bounded_strings"])
def test_kernel_masks_on_a_real_vocabulary(backend, grammar):
    vocab = load_vocab("smollm2")
    ref, ker = pair(GRAMMARS[grammar], vocab, backend)
    walk_and_compare(ref, ker, grammar, 12, 6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_counted_strings_and_no_chain_shortcut(backend):
    """Long bounded strings reached at many lengths (counter chains in the DFA), with the chain shortcut off
    in the kernel too: the same masks."""
    vocab = load_vocab("stories260K")
    ref, ker = pair(schema_to_gbnf(LONG), vocab, backend)
    _, on = pair(schema_to_gbnf(LONG), vocab, backend)
    ker.engine.chains = False
    for n in (0, 5, 250, 299, 300, 339, 340):
        prefix = ('{"code":"' + "z" * n).encode()
        st_r, st_k, st_on = (c.advance_bytes(c.start(), prefix) for c in (ref, ker, on))
        assert ker.allowed(st_k).bits == ref.allowed(st_r).bits == on.allowed(st_on).bits, n


@pytest.mark.parametrize("backend", BACKENDS)
def test_arenas_grow_mid_operation(backend, monkeypatch):
    """An arena whose regions start with room for one entry: operations stop, the arena is copied into a larger
    one (hash tables rebuilt by the kernel) and they start over, with the same answers."""
    from llamay.constraints import kernel_engine

    fixed = (L.R_TOKS, L.R_WALKOUT, L.R_OUT)  # sized once: SPARSE_MAX tokens, a mask
    tiny = {r: (2 if r in kernel_engine._HASHES else 1) for r in kernel_engine._CAPS if r not in fixed}
    monkeypatch.setattr(kernel_engine, "_CAPS", {**kernel_engine._CAPS, **tiny})
    vocab = load_vocab("synthetic")
    ref, ker = pair(GRAMMARS["product"], vocab, backend)
    walk_and_compare(ref, ker, "grow", 15, 5)
    assert ker.engine.arena.caps[L.R_STATES] > 8 and ker.engine.kernel_calls > 50


@pytest.mark.parametrize("backend", BACKENDS)
def test_limits_in_the_kernel_name_the_rule(backend):
    """Stacks per state and stack depth are bounded in the kernel as in the automaton: the same error."""
    vocab = load_vocab("synthetic")
    limits = ConstraintLimits(max_stacks=100)
    _, ker = pair('root ::= "a" root "b"? | ""', vocab, backend, limits)
    st = ker.start()
    with pytest.raises(ConstraintLimitError) as e:
        for _ in range(200):
            st = ker.advance_bytes(st, b"a")
    assert e.value.limit == "max_stacks" and "root" in str(e.value)
    _, deep = pair('root ::= "[" root "]" | "x"', vocab, backend, ConstraintLimits(max_stack_depth=20))
    with pytest.raises(ConstraintLimitError) as e:
        deep.advance_bytes(deep.start(), b"[" * 30)
    assert e.value.limit == "max_stack_depth"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_arena_past_max_states_adopts_old_states(backend):
    """Past max_states the engine starts a new arena; states of the old one are re-interned on use (a rollback
    across the reset still works) with the same answers."""
    vocab = load_vocab("synthetic")
    gbnf = 'root ::= "[" ( [a-z]{0,300} ("," [0-9]{1,40})* ) "]"'
    ref, ker = pair(gbnf, vocab, backend, ConstraintLimits(max_states=40))
    text = b"[" + b"abcxyz" * 20 + b",123,4567" * 6
    tokens = [vocab.token_bytes.index(bytes([b])) for b in text]
    s_ref, s_ker = ref.start(), ker.start()
    early = None
    for i, t in enumerate(tokens):
        if i == 5:
            early = (s_ref, s_ker)
        if i % 5 == 0:
            assert ker.allowed(s_ker).bits == ref.allowed(s_ref).bits
        s_ref, s_ker = ref.advance(s_ref, t), ker.advance(s_ker, t)
    assert ker.resets > 0
    assert ker.allowed(early[1]).bits == ref.allowed(early[0]).bits  # a state from before the resets
    end = ker.advance_bytes(s_ker, b"]")
    assert end is not None and ker.is_complete(end)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lazy_rules_are_compiled_as_the_kernel_reaches_them(backend):
    """A schema's lazy program (an object's members in any order: a rule per set of members, compiled on first
    use): the kernel stops at a rule not compiled yet, the host compiles it and writes the program again. Each
    engine has its own program, so the kernel's rules are compiled at its own request; the same masks."""
    vocab = load_vocab("synthetic")
    schema = {"type": "object", "properties": {f"k{i}": {"type": "integer"} for i in range(12)}, "required": ["k7"]}
    progs = [compile_grammar(schema_to_grammar(schema)) for _ in range(2)]
    assert progs[1].lazy
    before = len(progs[1].rule_alts)
    ref, ker = GrammarConstraint(progs[0], vocab), GrammarConstraint(progs[1], vocab)
    ref.engine = PythonEngine(progs[0], vocab, ref.limits)
    ker.engine = KernelEngine(progs[1], vocab, ker.limits, require_backend(backend))
    assert walk_and_compare(ref, ker, "lazy", 30, 7) >= 10
    st_r, st_k = ref.start(), ker.start()
    for part in (b'{"k3":1,', b'"k11":2,"k7":', b"3}"):
        st_r, st_k = ref.advance_bytes(st_r, part), ker.advance_bytes(st_k, part)
        assert ker.allowed(st_k).bits == ref.allowed(st_r).bits
    assert ker.is_complete(st_k)
    assert len(progs[1].rule_alts) > before + 3


@pytest.mark.parametrize("backend", ["portable", "numba"])
def test_a_program_run_by_the_kernel_is_freed_with_its_constraints(backend):
    """The program's words (kernel_engine._PROGRAMS, kept per program) do not keep the program alive: once its
    constraints are gone it is freed, grammar and lazy rules with it (every schema served used to stay)."""
    vocab = load_vocab("synthetic")
    prog = compile_grammar(schema_to_grammar({"type": "object", "properties": {"a": {"type": "integer"}}}))
    ker = GrammarConstraint(prog, vocab)
    ker.engine = KernelEngine(prog, vocab, ker.limits, require_backend(backend))
    st = ker.advance_bytes(ker.start(), b'{"a":')
    assert ker.allowed(st).tokens()
    gone = weakref.ref(prog)
    del prog, ker, st
    gc.collect()
    assert gone() is None


SLICE_SCHEMA = {
    "type": "object",
    "properties": {
        "min": {"type": "string"},
        "max": {"type": "string", "maxLength": 5},
        "mode": {"type": "string", "pattern": "^[a-z]+$"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
}
SLICE_PREFIXES = (b'{"', b'{"m', b'{"mi', b'{"min', b'{"zz', b'{"min":"', b'{"min":"ab', b'{"max":"',
                  b'{"max":"abcd', b'{"mode":"', b'{"tags":["', b'{"tags":["x","', b'{"min":"a","',
                  b'{"min":"a","max":"b","')  # fmt: skip


@pytest.mark.parametrize(
    ("backend", "vocab_name"), [("portable", "stories260K"), ("numba", "smollm2"), ("wasm", "smollm2")]
)
def test_the_slice_sets_plain_characters_at_once(backend, vocab_name):
    """Where every string of a JSON string's plain characters may follow (a string's contents; a key, among an
    object's names and its other keys, which no one stack of the state takes alone), the kernel sets those
    tokens as one mask and walks the trie only for the rest; where they may not (a bounded string near its
    end, a pattern's letters, a closed position): the whole walk. The Python engine walks every token: the
    same masks."""
    vocab = load_vocab(vocab_name)
    progs = [compile_grammar(schema_to_grammar(SLICE_SCHEMA)) for _ in range(2)]
    ref, ker = GrammarConstraint(progs[0], vocab), GrammarConstraint(progs[1], vocab)
    ref.engine = PythonEngine(progs[0], vocab, ref.limits)
    ker.engine = KernelEngine(progs[1], vocab, ker.limits, require_backend(backend))
    for prefix in SLICE_PREFIXES:
        st_r, st_k = ref.advance_bytes(ref.start(), prefix), ker.advance_bytes(ker.start(), prefix)
        assert ker.allowed(st_k).bits == ref.allowed(st_r).bits, prefix
    assert 4 <= ker.engine.sliced < len(SLICE_PREFIXES)
    assert walk_and_compare(ref, ker, "slice", 20, 7) >= 3  # (masks compared on the way)


def test_the_slice_tables():
    """V's slice (pda_layout.py): its tokens are those of only a JSON string's plain characters, and `rfirst`
    lists every other token at its node of the trie."""
    from llamay.constraints.kernel_engine import _slice

    vocab = load_vocab("smollm2")
    n_words = (vocab.n_vocab + 31) // 32
    head, rfirst, rorder = _slice(vocab, n_words)
    plain = set(range(0x20, 0x7F)) - set(b'"\\')
    assert [b for b in range(256) if head[b >> 5] >> (b & 31) & 1] == sorted(plain)
    in_slice = [t for t in range(vocab.n_vocab) if head[9 + (t >> 5)] >> (t & 31) & 1]
    expect = [t for t, data in enumerate(vocab.token_bytes) if data and set(data) <= plain]
    assert in_slice == expect and head[8] == max(len(vocab.token_bytes[t]) for t in expect)
    trie, rest = vocab.trie, set(range(vocab.n_vocab)) - set(expect)
    for i in range(trie.n_nodes):
        at_node = trie.tok_order[trie.first_tok[i] : trie.first_tok[i + 1]]
        assert list(rorder[rfirst[i] : rfirst[i + 1]]) == [t for t in at_node if t in rest]
    assert len(rorder) == len([t for t in rest if vocab.token_bytes[t]])


@pytest.mark.parametrize("rules", [0, 16])
def test_a_slice_search_that_gives_up_leaves_the_walks_to_it(monkeypatch, rules):
    """A key of an object of 40 long names (a trie of rules of its own, compiled as reached): with no rule the
    slice search may ask for (L.SLICE_RULES 0, on the portable reference, whose constants are read as it runs)
    it gives up at the first key and the walks find every token; with some, it is sliced. The Python engine's
    masks either way."""
    from llamay.kernels import pda_walk

    monkeypatch.setattr(pda_walk, "SLICE_RULES", rules)
    vocab = load_vocab("stories260K")
    schema = {"type": "object", "properties": {f"name_{i:02d}_{'x' * 12}": {"type": "string"} for i in range(40)}}
    progs = [compile_grammar(schema_to_grammar(schema)) for _ in range(2)]
    ref, ker = GrammarConstraint(progs[0], vocab), GrammarConstraint(progs[1], vocab)
    ref.engine = PythonEngine(progs[0], vocab, ref.limits)
    ker.engine = KernelEngine(progs[1], vocab, ker.limits, require_backend("portable"))
    sliced = []
    for prefix in (b'{"', b'{"name_1', b'{"name_12_xx'):
        st_r, st_k = ref.advance_bytes(ref.start(), prefix), ker.advance_bytes(ker.start(), prefix)
        assert ker.allowed(st_k).bits == ref.allowed(st_r).bits, prefix
        sliced.append(ker.engine.sliced)
    assert (sliced[0] > 0) == (rules > 0)  # (later keys find the rules the first one's walks compiled)
