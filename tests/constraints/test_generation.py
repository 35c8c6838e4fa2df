"""Generation under a constraint with real models: every output under a JSON Schema parses and validates
with `jsonschema` (stories260K on every schema of data/schemas.json; SmolLM2 on a few, numba only), grammars
and lexicons hold, and the engine's `constraint=` reaches the sampler."""

from __future__ import annotations

import json

import pytest

from llamay.constraints import (
    constraint_from_request,
    grammar_constraint,
    json_constraint,
    json_schema_constraint,
    lexicon_constraint,
)
from llamay.constraints.json_schema import LLAMACPP
from llamay.engine import Engine
from llamay.errors import LlamayError
from llamay.kernels import get_backend
from llamay.model import load_model
from llamay.sampling import SamplerConfig
from tests import paths
from tests.constraints.helpers import DATA, SCHEMAS

SMOLLM2_SCHEMAS = ("glaive_weather_call", "person_with_address", "recipe", "payment_method", "bank_transaction")
CAPS = {"max_string_length": 12, "max_items": 2, **LLAMACPP}  # a tiny model never ends an open object or a pattern


def fast_backend() -> str:
    try:
        get_backend("numba")
        return "numba"
    except LlamayError:
        return "portable"


@pytest.fixture(scope="module")
def stories():
    with load_model(paths.stories("f32"), fast_backend()) as m:
        yield Engine(m, n_ctx=512)


@pytest.fixture(scope="module")
def smollm2():
    if fast_backend() != "numba":
        pytest.skip("SmolLM2 on the portable backend is too slow for a test")
    with load_model(paths.registry_model(paths.SMOLLM2), "numba") as m:
        yield Engine(m, n_ctx=1024)


def validate(schema, text: str) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls(schema, format_checker=cls.FORMAT_CHECKER).validate(json.loads(text))


def generate(engine: Engine, prompt, constraint, seed: int, max_tokens: int) -> str:
    text = "".join(engine.complete(prompt, max_tokens, SamplerConfig(temp=0.8, seed=seed), constraint=constraint))
    assert engine.stats.finish_reason == "stop", f"no end after {max_tokens} tokens: {text!r}"
    return text


@pytest.mark.native_only
@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_stories260k_output_validates(stories, name):
    schema = SCHEMAS[name]
    c = json_schema_constraint(schema, stories.tokenizer, **CAPS)
    for seed in (1, 2):
        text = generate(stories, "Once upon a time", c, seed, 480)
        validate(schema, text)


@pytest.mark.native_only
@pytest.mark.slow
@pytest.mark.parametrize("name", SMOLLM2_SCHEMAS)
def test_smollm2_output_validates(smollm2, name):
    schema = SCHEMAS[name]
    tok = smollm2.tokenizer
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": f"Reply with one JSON object for this schema: {json.dumps(schema)}"}]
    )
    text = generate(smollm2, prompt, json_schema_constraint(schema, tok, **CAPS), 3, 600)
    validate(schema, text)


def test_json_and_grammar_and_lexicon_constraints(stories):
    tok = stories.tokenizer
    text = generate(stories, "Once upon a time", json_constraint(tok, max_string_length=12, max_items=2), 4, 480)
    assert isinstance(json.loads(text), dict)
    chess = (DATA / "grammars" / "chess.gbnf").read_text().replace("+\n", "{1,2}\n")  # bounded: it must end
    text = generate(stories, "Once", grammar_constraint(chess, tok), 5, 480)
    assert text.startswith("1. ") and text.endswith("\n")
    words = ["Lily", "Tim", "the big dog"]
    text = generate(stories, "Once upon a time there was", lexicon_constraint(words, tok), 6, 40)
    assert text in words


def test_request_fields_make_constraints(stories):
    tok = stories.tokenizer
    assert constraint_from_request({"response_format": {"type": "text"}}, tok) is None
    obj = constraint_from_request({"response_format": {"type": "json_object"}}, tok)
    assert obj is json_constraint(tok)  # cached: compiled once per vocabulary
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    for params in (
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}},
        {"response_format": {"type": "json_object", "schema": schema}},
        {"json_schema": schema},
    ):
        c = constraint_from_request(params, tok)
        value = json.loads(generate(stories, "Once", c, 7, 200))
        assert list(value) == ["n"] and isinstance(value["n"], int)
    g = constraint_from_request({"grammar": 'root ::= "yes" | "no"'}, tok)
    assert generate(stories, "Once", g, 8, 10) in ("yes", "no")


def test_greedy_constrained_generation_is_deterministic(stories):
    c = json_schema_constraint(SCHEMAS["geojson_point"], stories.tokenizer, **CAPS)
    greedy = SamplerConfig(temp=0.0)
    a = "".join(stories.complete("Once upon a time", 200, greedy, constraint=c))
    b = "".join(stories.complete("Once upon a time", 200, greedy, constraint=c))
    assert a == b
    value = json.loads(a)
    assert value["type"] == "Point" and len(value["coordinates"]) == 2  # minItems 2, capped at 2
