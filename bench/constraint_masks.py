#!/usr/bin/env python3
"""Constrained-decoding benchmark (not a test): token-mask time per token for typical JSON Schemas on the
SmolLM2 vocabulary (49,152 tokens), llamay against llguidance in the same run, and the cost of llamay's
sample-then-check path (accepts + advance) per token.

For each schema a valid document is tokenized with SmolLM2's tokenizer; both engines then walk that token
sequence, computing the full mask before each token. llamay is measured "cold" (a freshly compiled
constraint: its per-top-of-stack walks happen on first use) and "warm" (the same constraint on a second
document of the same schema, with other strings and numbers: masks come from the caches, as for repeated
requests with one schema). llguidance computes every mask afresh (it keeps no mask cache across requests).
The check path (accepts + advance, no mask: what a token costs when the sampled token fits) is measured on a
fresh constraint too.

    python bench/constraint_masks.py [-m MODEL.gguf] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from llamay.constraints import GrammarConstraint, compile_grammar, parse_gbnf, schema_to_gbnf
from llamay.constraints.vocab import ConstraintVocab
from llamay.gguf import open_gguf
from llamay.tokenizer import load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = json.loads((ROOT / "tests/constraints/data/schemas.json").read_text())["schemas"]
DOCUMENTS = {
    "glaive_weather_call": {"name": "get_current_weather", "arguments": {"location": "San Francisco, CA",
                                                                         "unit": "celsius"}},
    "product": {"productId": 1, "productName": "A green door", "price": 12.5, "tags": ["home", "green"],
                "dimensions": {"length": 7.0, "width": 12.0, "height": 9.5}},
    "k8s_container": {"name": "web-frontend", "image": "nginx:1.25", "imagePullPolicy": "IfNotPresent",
                      "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                      "env": [{"name": "MODE", "value": "production"}, {"name": "DEBUG", "value": "false"}]},
    "recipe": {"title": "Pancakes", "servings": 4,
               "ingredients": [{"item": "flour", "quantity": 200, "unit": "g"},
                               {"item": "milk", "quantity": 300, "unit": "ml"},
                               {"item": "egg", "quantity": 2, "unit": "piece"}],
               "steps": ["Mix everything.", "Rest for ten minutes.", "Fry in a hot pan."]},
    "bank_transaction": {"id": "3f2b8c1e-9d4a-4b6f-8e2a-1c5d7f9a0b3e", "amount": 149.99, "currency": "EUR",
                         "timestamp": "2024-05-17T10:42:00Z", "status": "completed", "note": None},
}  # fmt: skip


def default_model() -> Path:
    """SmolLM2 from llamay's store (`llamay pull smollm2`)."""
    from llamay.native.store import resolve_model

    return resolve_model("smollm2", log=lambda *a: None)


def cell(times: list[float], width: int, digits: int = 0) -> str:
    mean, p99 = stats(times)
    return f"{mean:{width}.{digits}f} {p99:8.{digits}f}"


def stats(times: list[float]) -> tuple[float, float]:
    """(mean, p99) in microseconds."""
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.fmean(times) * 1e6, p99 * 1e6


def llamay_masks(c: GrammarConstraint, tokens: list[int]) -> list[float]:
    st = c.start()
    out = []
    for t in tokens:
        t0 = time.perf_counter()
        mask = c.allowed(st)
        out.append(time.perf_counter() - t0)
        assert t in mask, f"llamay rejects token {t} of the document"
        st = c.advance(st, t)
    return out


def variant(value):
    """Another document of the same shape: other strings, other numbers."""
    if isinstance(value, dict):
        return {k: variant(v) for k, v in value.items()}
    if isinstance(value, list):
        return [variant(v) for v in value]
    if isinstance(value, str) and value not in (
        "celsius",
        "IfNotPresent",
        "TCP",
        "g",
        "ml",
        "piece",
        "EUR",
        "completed",
        "get_current_weather",
    ):
        return value[::-1] if "-" not in value and ":" not in value else value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value + 7
    if isinstance(value, float):
        return round(value * 1.5, 2)
    return value


def llamay_checks(c: GrammarConstraint, tokens: list[int]) -> list[float]:
    """The sample-then-check path: accepts(state, token) + advance, per token (no mask)."""
    st = c.start()
    out = []
    for t in tokens:
        t0 = time.perf_counter()
        ok = c.accepts(st, t)
        st = c.advance(st, t)
        out.append(time.perf_counter() - t0)
        assert ok
    return out


def lltokenizer(tok):
    import llguidance

    class Wrapper:
        def __init__(self) -> None:
            self.eos_token_id = tok.eos_id
            self.bos_token_id = tok.bos_id
            control = [tok.is_control(i) for i in range(tok.n_vocab)]
            self.special_token_ids = [i for i, c in enumerate(control) if c]
            # control tokens are marked with a 0xFF prefix, as llguidance's llama.cpp bridge does
            self.tokens = [b"\xff" * c + tok.token_bytes(i) for i, c in enumerate(control)]

        def __call__(self, s):
            return tok.encode(s.decode("utf-8", "replace") if isinstance(s, bytes) else s, add_special=False)

    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(Wrapper()))


def llguidance_masks(lltok, schema, tokens: list[int]) -> list[float] | str:
    import llguidance

    grammar = llguidance.LLMatcher.grammar_from_json_schema(
        schema, defaults={"whitespace_flexible": True, "item_separator": ", ", "key_separator": ": "}
    )
    m = llguidance.LLMatcher(lltok, grammar, log_level=0)
    if m.is_error():
        return m.get_error()
    out = []
    for t in tokens:
        t0 = time.perf_counter()
        mask = m.compute_bitmask()
        out.append(time.perf_counter() - t0)
        if not mask[t >> 3] >> (t & 7) & 1 or not m.consume_token(t):
            return f"rejects token {t} ({m.get_error()})"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", type=Path, default=default_model(), help="GGUF whose vocabulary to use")
    ap.add_argument("--repeat", type=int, default=3, help="passes for llguidance and warm llamay (best kept)")
    args = ap.parse_args()
    with open_gguf(args.model) as f:
        tok = load_tokenizer(f)
    t0 = time.perf_counter()
    vocab = ConstraintVocab.for_tokenizer(tok)
    print(f"vocabulary: {tok.n_vocab} tokens, trie of {vocab.trie.n_nodes} nodes built in "
          f"{time.perf_counter() - t0:.2f} s")  # fmt: skip
    try:
        lltok = lltokenizer(tok)
    except ImportError:
        lltok = None
        print("llguidance is not installed: llamay only", file=sys.stderr)
    head = f"{'schema':<20} {'tokens':>6} | {'llamay cold':>17} | {'llamay warm':>15} | {'llguidance':>15} | "
    print(head + f"{'cold/llg':>8} | {'check path':>15}")
    print(" " * 29 + "|  mean µs  p99 µs |" + "  mean   p99 µs |" * 2 + " mean ratio | mean   p99 µs")
    totals = {"cold": [], "warm": [], "llg": [], "check": []}

    def tokenize(doc) -> list[int]:
        text = json.dumps(doc, ensure_ascii=False, separators=(", ", ": "))
        return [*tok.encode(text, add_special=False), tok.eos_id]

    for name, doc in DOCUMENTS.items():
        schema = SCHEMAS[name]
        tokens, other = tokenize(doc), tokenize(variant(doc))
        program = compile_grammar(parse_gbnf(schema_to_gbnf(schema)))
        check = llamay_checks(GrammarConstraint(program, vocab), tokens)
        c = GrammarConstraint(program, vocab)
        cold = llamay_masks(c, tokens)
        warm = llamay_masks(c, other)
        llg = None
        if lltok is not None:
            runs = [llguidance_masks(lltok, schema, tokens) for _ in range(args.repeat)]
            llg = runs[0] if isinstance(runs[0], str) else min(runs, key=sum)
        for key, value in (("cold", cold), ("warm", warm), ("check", check)):
            totals[key] += value
        row = f"{name:<20} {len(tokens):>6} | {cell(cold, 8)} | {cell(warm, 6)} | "
        if isinstance(llg, list):
            totals["llg"] += llg
            ratio = statistics.fmean(cold) / statistics.fmean(llg)
            row += f"{cell(llg, 6)} | {ratio:>8.1f}x | "
        else:
            row += f"{'n/a':>15} | {'':>9} | "
        print(row + cell(check, 6, 1))
        if isinstance(llg, str):
            print(f"  llguidance: {llg}")
    print("all tokens:", "  ".join(f"{k} mean {stats(v)[0]:.0f} µs p99 {stats(v)[1]:.0f} µs"
                                    for k, v in totals.items() if v))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
