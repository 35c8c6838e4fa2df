"""The collector held off while a lazy rule compiles (gc_pause.py): off inside its build, back on after it
(also when it raises), left off when it was off, and on again only when the last of several overlapping pauses
ends, in any thread."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from llamay.constraints import ConstraintError, compile_grammar
from llamay.constraints.gc_pause import gc_paused
from llamay.constraints.grammar import EMPTY, Grammar, LazyRule, Lit, Ref, seq


@pytest.fixture(autouse=True)
def _collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if was:  # (as it was, either way: a test that turns it off must not leave later tests without it)
        gc.enable()
    else:
        gc.disable()


def _lazy_grammar(seen: list[bool], fail: bool = False) -> Grammar:
    """root ::= "a" lazy; lazy's build records whether the collector was on (and raises when `fail`)."""

    def build():
        seen.append(gc.isenabled())
        if fail:
            raise ConstraintError("refused on purpose")
        return Lit("b")

    return Grammar({"root": seq(Lit("a"), Ref("later"))}, lazy={"later": LazyRule(build, EMPTY)})


def test_a_lazy_rule_is_built_with_the_collector_off_and_it_is_on_after():
    seen: list[bool] = []
    program = compile_grammar(_lazy_grammar(seen))
    assert gc.isenabled()
    program.rule_alts[program.rule_names.index("later")]  # (compiled on first use)
    assert seen == [False]
    assert gc.isenabled()


def test_a_compile_that_raises_turns_it_back_on():
    seen: list[bool] = []
    program = compile_grammar(_lazy_grammar(seen, fail=True))
    with pytest.raises(ConstraintError, match="on purpose"):
        program.rule_alts[program.rule_names.index("later")]
    assert seen == [False]
    assert gc.isenabled()


def test_it_stays_off_when_it_was_off():
    gc.disable()
    with gc_paused:
        with gc_paused:
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_nested_pauses_turn_it_on_at_the_last_end():
    with gc_paused:
        with gc_paused:
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.skipif(sys.platform == "emscripten", reason="no threads under Pyodide")
def test_overlapping_pauses_in_two_threads():
    inside, release, states = threading.Event(), threading.Event(), []

    def other():
        with gc_paused:
            inside.set()
            release.wait(10)

    t = threading.Thread(target=other)
    with gc_paused:
        t.start()
        assert inside.wait(10)
    states.append(gc.isenabled())  # (this thread's pause ended, the other's goes on)
    release.set()
    t.join(10)
    states.append(gc.isenabled())
    assert states == [False, True]
