"""A fixed sample of JSONSchemaBench (../shared/fixtures/jsonschemabench, read in place from its archive;
skipped when absent): every schema of the sample that compiles accepts none of its invalid test instances,
its random sentences validate with `jsonschema`, and the valid instances are accepted (compact JSON: at least
98% of them over the sample, and at least 90% of the schemas compile; the subsets llamay generates, docs/
constraints.md, may refuse a few)."""

from __future__ import annotations

import json
import random
import tarfile
from functools import cache

import pytest

from llamay.constraints import ConstraintError, compile_grammar, schema_to_grammar
from llamay.constraints.automaton import Automaton
from tests.constraints.helpers import schema_validator, sentences
from tests.paths import FIXTURES

ARCHIVE = FIXTURES / "jsonschemabench" / "maskbench-dev.tgz"
SAMPLE = 50


@cache
def sample() -> list[tuple[str, dict]]:
    """Every (len / SAMPLE)-th schema file of the archive, by name."""
    if not ARCHIVE.exists():
        pytest.skip(f"no {ARCHIVE}")
    with tarfile.open(ARCHIVE) as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and m.name.endswith(".json")), key=lambda m: m.name)
        step = max(1, len(members) // SAMPLE)
        return [(m.name.rsplit("/", 1)[-1], json.loads(tar.extractfile(m).read())) for m in members[::step][:SAMPLE]]


def compact(doc) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


@cache
def outcome(i: int) -> tuple[str, list[tuple[bool, bool]]] | None:
    """(name, [(valid, accepted) per test instance]) of the i-th schema, None when it is refused."""
    name, data = sample()[i]
    try:
        prog = compile_grammar(schema_to_grammar(data["schema"]))
    except ConstraintError:
        return None
    a = Automaton(prog)
    return name, [(t["valid"], a.accepts_bytes(compact(t["data"]))) for t in data.get("tests", [])]


@pytest.mark.parametrize("i", range(SAMPLE))
def test_no_invalid_instance_is_accepted(i):
    got = outcome(i)
    if got is None:
        pytest.skip("refused (a keyword or combination not supported)")
    name, results = got
    assert [k for k, (valid, ok) in enumerate(results) if ok and not valid] == [], name


@pytest.mark.parametrize("i", range(SAMPLE))
def test_sentences_validate(i):
    jsonschema = pytest.importorskip("jsonschema")
    if outcome(i) is None:
        pytest.skip("refused")
    name, data = sample()[i]
    try:
        check = schema_validator(data["schema"])
        check.is_valid(None)
    except (jsonschema.exceptions.SchemaError, jsonschema.exceptions._WrappedReferencingError) as e:
        pytest.skip(f"jsonschema cannot check it: {type(e).__name__}")
    prog = compile_grammar(schema_to_grammar(data["schema"]))
    bad = [s for s in sentences(prog, random.Random(name), 10, budget=200) if not check.is_valid(json.loads(s))]
    assert bad == [], name


def test_most_valid_instances_are_accepted_and_most_schemas_compile():
    got = [outcome(i) for i in range(len(sample()))]
    compiled = [g for g in got if g is not None]
    valid = [(name, ok) for name, results in compiled for v, ok in results if v]
    refused = [name for name, ok in valid if not ok]
    assert len(compiled) >= 0.9 * len(got), f"{len(compiled)} of {len(got)} compile"
    assert len(refused) <= 0.02 * len(valid), refused
