"""`warm_up` (llamay.constraints): the tokenizer's vocabulary built and cached, and the default backend's pda
kernel made ready (numba: compiled or loaded), before any constraint is asked for; what follows reuses both."""

from __future__ import annotations

from llamay.constraints import ConstraintVocab, json_schema_constraint, warm_up
from llamay.constraints.vocab import _CACHE
from llamay.gguf import open_gguf
from llamay.kernels import get_backend
from llamay.tokenizer import load_tokenizer
from tests.tokenizer.vocabs import vocab_path


def _fresh_tokenizer():
    with open_gguf(vocab_path("stories260K")) as f:  # (a tokenizer no other test has a vocabulary of)
        return load_tokenizer(f)


def test_warm_up_builds_the_vocabulary_once_and_readies_the_kernel():
    tok = _fresh_tokenizer()
    assert tok not in _CACHE
    warm_up(tok)
    vocab = _CACHE[tok]
    assert ConstraintVocab.for_tokenizer(tok) is vocab
    if get_backend(None).name == "numba":
        from llamay.native.kernels.pda import pda

        assert pda.signatures  # compiled (or loaded from numba's cache), not left for a first request
    c = json_schema_constraint({"type": "string", "maxLength": 3}, tok)
    assert c.vocab is vocab
    st = c.advance_bytes(c.start(), b'"')
    mask = c.allowed(st)  # the constraint runs on what warm_up made: inside the string, the closing quote
    assert any(tok.token_bytes(t, special=False) == b'"' for t in range(tok.n_vocab) if t in mask)
