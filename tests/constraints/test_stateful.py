"""Stateful property test: walking any grammar by tokens it allows never reaches a dead end.

Hypothesis drives a constraint through a grammar: each step picks one of the allowed tokens (or EOS when it
is allowed). Invariants after every step: something is allowed (a token, or EOS when the grammar is
complete), EOS is allowed exactly when the grammar is complete, and the mask agrees with `accepts` on a few
tokens hypothesis picks.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from llamay.constraints import (
    FINISHED,
    GrammarConstraint,
    compile_grammar,
    json_gbnf,
    lexicon_grammar,
    parse_gbnf,
    schema_to_gbnf,
)
from tests.constraints.conftest import load_vocab
from tests.constraints.helpers import DATA, SCHEMAS

GRAMMARS = [
    json_gbnf("value"),
    schema_to_gbnf(SCHEMAS["recipe"], max_string_length=8, max_items=2),
    schema_to_gbnf(SCHEMAS["payment_method"]),
    schema_to_gbnf(SCHEMAS["tree"]),
    schema_to_gbnf(SCHEMAS["network_interface"]),
    (DATA / "grammars" / "c.gbnf").read_text(),
    (DATA / "grammars" / "japanese.gbnf").read_text(),
    (DATA / "grammars" / "list.gbnf").read_text(),
    lexicon_grammar(["alpha", "alphabet", "beta", "é"], separator=", ", max_count=3).to_gbnf(),
]
_CONSTRAINTS: dict[tuple[int, str], GrammarConstraint] = {}


def get_constraint(grammar: int, vocab: str) -> GrammarConstraint:
    key = (grammar, vocab)
    if key not in _CONSTRAINTS:
        _CONSTRAINTS[key] = GrammarConstraint(compile_grammar(parse_gbnf(GRAMMARS[grammar])), load_vocab(vocab))
    return _CONSTRAINTS[key]


class NeverADeadEnd(RuleBasedStateMachine):
    @initialize(grammar=st.integers(0, len(GRAMMARS) - 1), vocab=st.sampled_from(["synthetic", "stories260K"]))
    def start(self, grammar, vocab):
        self.c = get_constraint(grammar, vocab)
        self.state = self.c.start()
        self.eos = next(iter(self.c.vocab.eog_ids))

    @precondition(lambda self: self.state is not FINISHED)
    @rule(pick=st.integers(min_value=0), prefer_long=st.booleans())
    def advance(self, pick, prefer_long):
        allowed = self.c.allowed(self.state).tokens()
        if prefer_long:
            allowed.sort(key=lambda t: -len(self.c.vocab.token_bytes[t] or b""))
            allowed = allowed[: max(1, len(allowed) // 8)]
        self.state = self.c.advance(self.state, allowed[pick % len(allowed)])

    @precondition(lambda self: self.state is FINISHED)
    @rule()
    def restart(self):
        self.state = self.c.start()

    @invariant()
    def something_is_allowed(self):
        if self.state is FINISHED:
            return
        mask = self.c.allowed(self.state)
        assert len(mask) > 0, "dead end: an allowed token led to a state that allows nothing"
        assert (self.eos in mask) == self.c.is_complete(self.state)

    @precondition(lambda self: self.state is not FINISHED)
    @rule(tokens=st.lists(st.integers(min_value=0), min_size=1, max_size=8))
    def mask_agrees_with_accepts(self, tokens):
        mask = self.c.allowed(self.state)
        for t in tokens:
            t %= self.c.vocab.n_vocab
            assert (t in mask) == self.c.accepts(self.state, t)


NeverADeadEnd.TestCase.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestNeverADeadEnd = NeverADeadEnd.TestCase
