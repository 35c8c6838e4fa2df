"""The `trie_walk` op on every backend (portable reference, numba, wasm): masks computed by the kernel over
flat DFA tables equal the Python walk's (`MaskEngine`) and the token-by-token checks, along walks through
several grammars, with and without the chain shortcut, and with DFA tables that must grow mid-walk."""

from __future__ import annotations

import random
from array import array

import pytest

from llamay.constraints import GrammarConstraint, compile_grammar, parse_gbnf, schema_to_gbnf
from llamay.constraints.kernel_masks import KernelMaskEngine, Workspace, trie_tables
from llamay.constraints.masks import MaskEngine
from llamay.kernels import trie_walk as K
from tests.backends import require_backend
from tests.constraints.conftest import load_vocab
from tests.constraints.test_masks import GRAMMARS, LONG

BACKENDS = ("portable", "numba", "wasm")


def pair(gbnf: str, vocab, backend: str) -> tuple[GrammarConstraint, GrammarConstraint]:
    """(a constraint on the Python walk, one on the kernel of `backend`), over the same program."""
    prog = compile_grammar(parse_gbnf(gbnf))
    ref = GrammarConstraint(prog, vocab)
    ref.engine = MaskEngine(ref.automaton, vocab.trie)
    ker = GrammarConstraint(prog, vocab)
    ker.engine = KernelMaskEngine(ker.automaton, vocab.trie, require_backend(backend))
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
def test_kernel_masks_equal_the_python_walk(backend, vocab_name, grammar):
    ref, ker = pair(GRAMMARS[grammar], load_vocab(vocab_name), backend)
    assert walk_and_compare(ref, ker, grammar, 25, 6) >= 2
    assert ker.engine.kernel_calls > 0


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
    ker.engine.chains = False
    for n in (0, 5, 250, 299, 300, 339, 340):
        prefix = ('{"code":"' + "z" * n).encode()
        st_r, st_k = ref.advance_bytes(ref.start(), prefix), ker.advance_bytes(ker.start(), prefix)
        assert ker.allowed(st_k).bits == ref.allowed(st_r).bits, n


@pytest.mark.parametrize("backend", BACKENDS)
def test_tables_grow_mid_walk(backend):
    """A workspace with room for two states: every walk outgrows it and resumes on the copied tables."""
    vocab = load_vocab("synthetic")
    ref, ker = pair(GRAMMARS["product"], vocab, backend)
    be = ker.engine.be
    ker.engine.ws = Workspace(be, trie_tables(vocab.trie, be), ker.engine.budget + 2, cap=2)
    walk_and_compare(ref, ker, "grow", 15, 5)
    assert ker.engine.ws.cap > 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_kernel_asks_for_missing_entries_and_resumes(backend):
    """One walk by hand: the op stops at the first UNKNOWN entry, naming it, and resumes where it stopped."""
    vocab = load_vocab("synthetic")
    _, ker = pair('root ::= "ab" [0-9]*', vocab, backend)
    eng = ker.engine
    start = eng.aut.initial
    be, ws, t = eng.be, eng.ws, eng.tables
    sid = eng._row_of(start)
    ctl = [0] * K.CTL
    ctl[K.I], ctl[K.HI], ctl[K.BUDGET], ctl[K.R_START] = 1, t.n_nodes, -1, sid
    ctl[K.FRESH], ctl[K.D0], ctl[K.N_WORDS] = 1, 0, ws.n_words
    be.write_i32(ws.out, [-1] * ws.n_words)  # a fresh walk clears it
    be.write_i32(ws.ctl, ctl)
    args = (ws.out, t.nodes, t.first_tok, t.tok_order, t.sets, ws.trans, ws.info, ws.states, ws.exits, ws.ctl)
    assert be.trie_walk(*args) == K.NEED_STEP
    regs = array("i", be.read_bytes(ws.ctl, 0, K.CTL))
    assert (regs[K.MISS_STATE], regs[K.MISS_BYTE]) == (sid, ord("a"))
    assert vocab.trie.byte[regs[K.I]] == ord("a")  # stopped at the node of "a"
    eng._fill_step(sid, ord("a"))
    status = be.trie_walk(*args)
    while status != K.DONE:
        regs = array("i", be.read_bytes(ws.ctl, 0, K.CTL))
        (eng._fill_step(regs[K.MISS_STATE], regs[K.MISS_BYTE]) if status == K.NEED_STEP else
         eng._fill_loop(regs[K.MISS_STATE]))  # fmt: skip
        args = (ws.out, t.nodes, t.first_tok, t.tok_order, t.sets, ws.trans, ws.info, ws.states, ws.exits, ws.ctl)
        status = be.trie_walk(*args)
    bits = int.from_bytes(be.read_bytes(ws.out, 0, ws.n_words), "little")
    digits = set(b"0123456789")
    want = [
        t
        for t, b in enumerate(vocab.token_bytes)
        if b and (b"ab".startswith(b) or (b[:2] == b"ab" and set(b[2:]) <= digits))
    ]
    assert [t for t in range(vocab.n_vocab) if bits >> t & 1] == want
