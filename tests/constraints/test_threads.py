"""Compiling in worker threads while another thread samples with other constraints (as the server does:
constraints compile off the event loop, the model thread steps the running ones): every compile gives the
program a sequential one gives, refusals stay in their thread and leave nothing in the cache, and the
sampling thread's answers do not change."""

from __future__ import annotations

import threading

import pytest

import llamay.constraints as constraints
from llamay.constraints import (
    ConstraintLimitError,
    GrammarConstraint,
    compile_grammar,
    grammar_constraint,
    json_constraint,
    json_schema_constraint,
    parse_gbnf,
)
from tests.constraints.conftest import load_vocab
from tests.constraints.helpers import SCHEMAS

HOSTILE = [{"type": "string", "minLength": 10**9}, {"type": "array", "minItems": 10**8}]


def walk(c, text: bytes) -> list[int]:
    """Mask sizes along `text`, one byte token at a time (synthetic vocabulary: token b is byte b)."""
    st, sizes = c.start(), []
    for b in text:
        sizes.append(len(c.allowed(st)))
        st = c.advance(st, b)
    return sizes


@pytest.mark.native_only
def test_compiles_in_threads_while_another_thread_samples():
    vocab = load_vocab("synthetic")
    names = sorted(SCHEMAS)
    sequential = {n: json_schema_constraint(SCHEMAS[n], vocab).program for n in names}
    constraints._CACHE.clear()  # the threads compile afresh
    gbnf = 'root ::= ("ab" | [0-9]{1,3} ",")+'
    text = b"ab12,ab3,999," * 20
    expected = walk(GrammarConstraint(compile_grammar(parse_gbnf(gbnf)), vocab), text)
    sampler = grammar_constraint(gbnf, vocab)  # cold: its tables are built while the workers compile
    results: dict[str, object] = {}
    refused: list[str] = []

    def compile_some(part: list[str]) -> None:
        for n in part:
            results[n] = json_schema_constraint(SCHEMAS[n], vocab).program
            for cap in range(8, 12):  # more compiles (other texts), for the threads to overlap the sampling
                json_schema_constraint(SCHEMAS[n], vocab, max_string_length=cap)
        for schema in HOSTILE:
            try:
                json_schema_constraint(schema, vocab)
            except ConstraintLimitError as e:
                refused.append(e.limit)

    workers = [threading.Thread(target=compile_some, args=(names[i::3],)) for i in range(3)]
    for w in workers:
        w.start()
    walks = [walk(sampler, text) for _ in range(5)]
    walks.append(walk(json_constraint(vocab, root="value"), b"[1,2,{}]"))
    for w in workers:
        w.join()
    assert walks[:5] == [expected] * 5
    assert sorted(refused) == ["max_repeat"] * 6
    for n in names:
        got, want = results[n], sequential[n]
        assert (got.kind, got.arg, got.rule_alts, got.root) == (want.kind, want.arg, want.rule_alts, want.root), n
    assert all(key[0] in ("json-schema", "grammar", "json") for key in constraints._CACHE)
    assert len(constraints._CACHE) <= constraints._CACHE_SIZE
