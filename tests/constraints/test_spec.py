"""Constraint specs (llamay.constraints.json_schema & co.): checked when made, compiled per vocabulary to the same
constraint the direct builders give (the cache), and the package keeps its submodules reachable."""

from __future__ import annotations

import pytest

import llamay.constraints as C
from llamay.constraints.spec import ConstraintSpec, compiled
from llamay.gguf import open_gguf
from llamay.tokenizer import load_tokenizer
from tests import paths


@pytest.fixture(scope="module")
def tok():
    with open_gguf(paths.stories("f32")) as f:
        yield load_tokenizer(f)


def test_specs_compile_to_the_builders_constraints(tok):
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    assert compiled(C.json_schema(schema), tok) is C.json_schema_constraint(schema, tok)
    assert compiled(C.json_object(), tok) is C.json_constraint(tok)
    assert compiled(C.gbnf_grammar('root ::= "x" [0-9]'), tok) is C.grammar_constraint('root ::= "x" [0-9]', tok)
    assert compiled(C.word_list(["yes", "no"]), tok) is C.lexicon_constraint(["yes", "no"], tok)
    direct = C.json_constraint(tok)
    assert compiled(direct, tok) is direct and compiled(None, tok) is None


def test_a_word_list_constraint_allows_its_words_only(tok):
    c = compiled(C.word_list(["Lily", "Ben"]), tok)
    st = c.start()
    allowed = {t for t in range(tok.n_vocab) if c.accepts(st, t)}
    firsts = {tok.decode([t]) for t in allowed}
    assert firsts and all("Lily".startswith(p) or "Ben".startswith(p) for p in firsts)


def test_bad_sources_fail_when_the_spec_is_made():
    with pytest.raises(C.ConstraintError, match="contains"):
        C.json_schema({"type": "array", "contains": {"type": "integer"}, "maxContains": 1})
    with pytest.raises(C.ConstraintError):
        C.gbnf_grammar("root ::= (")
    with pytest.raises(C.ConstraintError, match="list of words"):
        C.word_list("yes")
    with pytest.raises(C.ConstraintError, match="root must be"):
        C.json_object(root="array")
    with pytest.raises(C.ConstraintError, match=r"made by llamay\.constraints"):
        compiled("root ::= x", None)


def test_the_json_schema_name_is_the_function_and_its_module_still_imports():
    import llamay.constraints.json_schema  # noqa: F401 (already loaded: the name stays the function's)
    from llamay.constraints.json_schema import schema_to_gbnf

    assert callable(C.json_schema) and isinstance(C.json_schema({"type": "string"}), ConstraintSpec)
    assert "root" in schema_to_gbnf({"type": "string"})


def test_a_json_schema_spec_compiles_its_schema_once(tok, monkeypatch):
    """Made, then built: one compile (the spec's program is the first build's); built again once its constraint
    has left the cache: compiled again (the first program is not kept for it)."""
    import importlib

    module = importlib.import_module("llamay.constraints.json_schema")
    calls = []
    grammar = module.SchemaCompiler.schema_grammar
    monkeypatch.setattr(module.SchemaCompiler, "schema_grammar", lambda self, *a: calls.append(1) or grammar(self, *a))
    schema = {"type": "object", "properties": {"spec-once": {"type": "integer"}}, "required": ["spec-once"]}
    spec = C.json_schema(schema)
    assert len(calls) == 1
    c = compiled(spec, tok)
    assert len(calls) == 1 and compiled(spec, tok) is c is C.json_schema_constraint(schema, tok)
    C._CACHE.clear()
    assert compiled(spec, tok) is not c and len(calls) == 2
    st = c.start()
    firsts = {tok.decode([t]) for t in range(tok.n_vocab) if c.accepts(st, t)}
    assert firsts and all(f.startswith("{") for f in firsts)  # (the spec's program serves: an object first)
