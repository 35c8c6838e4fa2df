"""llamay.Sampler in a loop of the caller's own: seeded draws with penalties equal the Engine's loop under the same
settings, a constraint holds in the loop (the output parses), and misuse names the parameter."""

from __future__ import annotations

import json
import math

import pytest

import llamay
from llamay.engine import Engine
from llamay.sampling import Sampler as ChainSampler
from llamay.sampling import SamplerConfig
from tests import paths

SETTINGS = {"temperature": 0.9, "top_k": 20, "top_p": 0.9, "min_p": 0.02, "seed": 11, "repeat_penalty": 1.2}


@pytest.fixture(scope="module")
def model():
    with llamay.load(paths.stories("q8_0")) as m:
        yield m


def test_seeded_loop_equals_the_engines(model):
    prompt = model.tokenize("Once upon a time")
    sampler = llamay.Sampler(**SETTINGS)
    sampler.accept_prompt(prompt)  # before the chain exists: kept until the first sample
    with model.context(n_ctx=64) as ctx:
        ctx.decode(prompt)
        ours = []
        for _ in range(20):
            tok = sampler.sample(ctx)
            if model.is_eog(tok):
                break
            ours.append(tok)
            ctx.decode(tok)
    chain = ChainSampler(SamplerConfig(**SETTINGS), tokenizer=model.tokenizer)
    theirs = list(Engine(model.core, n_ctx=64).generate_tokens(prompt, len(ours) or 1, chain))
    assert ours == theirs and len(set(ours)) > 3
    sampler.reset()  # from the seed again, the history forgotten
    assert sampler.seed == 11


def run(model, ctx, sampler, n: int) -> list[int]:
    out = []
    for _ in range(n):
        out.append(sampler.sample(ctx))
        ctx.decode(out[-1])
    return out


def test_a_forked_sampler_and_context_go_on_as_the_originals(model):
    grammar = llamay.constraints.gbnf_grammar('root ::= [^.]+ "."')
    sampler = llamay.Sampler(**SETTINGS, constraint=grammar)
    with model.context(n_ctx=64, n_seq=4) as ctx:
        ctx.decode(model.tokenize("Once upon a time"))
        run(model, ctx, sampler, 4)
        a, b = ctx.fork(), ctx.fork()
        fork, other = sampler.fork(), sampler.fork()
        assert run(model, a, fork, 8) == run(model, ctx, sampler, 8)
        other.reset()  # the copy's history is its own: reset, it draws as a fresh sampler does
        with b.fork() as c:
            assert run(model, b, other, 8) == run(model, c, llamay.Sampler(**SETTINGS, constraint=grammar), 8)


def test_a_constraint_holds_in_the_loop(model):
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 999},
              "ok": {"type": "boolean"}}, "required": ["n", "ok"], "additionalProperties": False}  # fmt: skip
    for seed in (4, 5):
        sampler = llamay.Sampler(temperature=0.8, seed=seed, constraint=llamay.constraints.json_schema(schema))
        with model.context(n_ctx=128) as ctx:
            ctx.decode(model.tokenize("Once upon a time"))
            toks = []
            while not sampler.done and len(toks) < 100:
                tok = sampler.sample(ctx)
                if model.is_eog(tok):
                    break
                toks.append(tok)
                ctx.decode(tok)
        assert sampler.done  # nothing but an end of generation may follow the object
        value = json.loads(model.detokenize(toks))  # the schema's checks, by hand (no jsonschema under Pyodide)
        assert set(value) == {"n", "ok"} and type(value["n"]) is int and 0 <= value["n"] <= 999
        assert type(value["ok"]) is bool


def test_log_probabilities_are_the_logits_log_softmax(model):
    sampler = llamay.Sampler(temperature=0, n_probs=3)
    with model.context(n_ctx=16) as ctx:
        row = ctx.decode(model.tokenize("Once upon")).tolist()
        got = sampler.sample_with_probs(ctx)
    top = sorted(range(len(row)), key=lambda t: -row[t])[:3]
    lse = max(row) + math.log(math.fsum(math.exp(x - max(row)) for x in row))
    assert got.token == top[0] and [t for t, _ in got.top] == top
    assert got.logprob == pytest.approx(row[top[0]] - lse, abs=1e-4)
    assert [lp for _, lp in got.top] == pytest.approx([row[t] - lse for t in top], abs=1e-4)


def test_misuse_names_the_parameter(model):
    with pytest.raises(llamay.LlamayError, match="top_kk: not a sampling parameter"):
        llamay.Sampler(top_kk=3)
    with pytest.raises(llamay.LlamayError, match="repeat_penalty: must be a number > 0"):
        llamay.Sampler(repeat_penalty=0)
    with pytest.raises(llamay.LlamayError, match="sample once first"):
        llamay.Sampler().accept(3)
    sampler = llamay.Sampler(temperature=0)
    with model.context(n_ctx=16) as ctx:
        ctx.decode(model.tokenize("Once"))
        sampler.sample(ctx)
        sampler.accept(300)
    with llamay.load(paths.stories("f32"), backend="portable") as other, other.context(n_ctx=16) as ctx:
        ctx.decode(other.tokenize("Once"))
        with pytest.raises(llamay.LlamayError, match="one per model"):
            sampler.sample(ctx)
