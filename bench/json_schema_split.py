#!/usr/bin/env python3
"""Where llamay's JSONSchemaBench mask time goes (not a test; no reference engine: json_schema_bench.py compares
with llguidance): the masks of json_schema_bench.py's walks (json_schema_pyodide.masks, the full token mask before
each token of each valid instance, one program per schema so its lazy rules are compiled once), with the time
spent compiling the rules the automaton reaches (kernel_engine.Arena.compile_rules, split into the schema's lazy
rule bodies built, `Grammar.body`; their lowering to the program, `_Compiler.compile_rule` without them; and the
program written into the arena) apart from the rest (the `pda` op's walks and steps; of them, the calls that
stopped at a rule not compiled yet: the op then starts over).

    tar xzf ../shared/fixtures/jsonschemabench/maskbench-dev.tgz -C /tmp/jsb
    python bench/json_schema_split.py /tmp/jsb [--every 10 [--offset 3]] [--top 8]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from constraint_masks import default_model
from json_schema_pyodide import masks

SPENT: dict[str, float] = {}


def timed(owner: object, name: str, key: str) -> None:
    """owner.name wrapped: the seconds it takes added to SPENT[key] (calls nested in one another counted once)."""
    f = getattr(owner, name)
    SPENT[key] = 0.0
    depth = [0]

    def wrapper(*args):
        depth[0] += 1
        t0 = time.perf_counter()
        try:
            return f(*args)
        finally:
            depth[0] -= 1
            if not depth[0]:
                SPENT[key] += time.perf_counter() - t0

    setattr(owner, name, wrapper)


def stopped(backend: type) -> None:
    """backend.pda wrapped: the seconds of its calls that stopped at a rule not compiled yet in SPENT["stopped"]
    (the op starts over once the host compiled it: a walk that reaches n such rules is begun n + 1 times)."""
    from llamay.kernels.pda_layout import NEED_RULE

    f = backend.pda
    SPENT["stopped"] = 0.0

    def wrapper(self, vocab, arena):
        t0 = time.perf_counter()
        status = f(self, vocab, arena)
        if status == NEED_RULE:
            SPENT["stopped"] += time.perf_counter() - t0
        return status

    backend.pda = wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the unpacked maskbench folder (one SPLIT---ID.json per schema)")
    ap.add_argument("--every", type=int, default=10, help="take every N-th schema (sorted by name)")
    ap.add_argument("--offset", type=int, default=0, help="starting from this one")
    ap.add_argument("--top", type=int, default=8, help="list the schemas of the most mask time")
    args = ap.parse_args()

    import llamay.constraints as C
    from llamay.constraints import compile as compile_mod
    from llamay.constraints import grammar, kernel_engine
    from llamay.constraints.vocab import ConstraintVocab
    from llamay.gguf import open_gguf
    from llamay.kernels import get_backend
    from llamay.tokenizer import load_tokenizer

    tok = load_tokenizer(open_gguf(str(default_model())))
    vocab = ConstraintVocab.for_tokenizer(tok)
    warm = C.compile_grammar(C.schema_to_grammar({"type": "object", "properties": {"a": {"type": "string"}}}))
    masks(warm, vocab, tok.encode('{"a":"xyz"}', add_special=False))  # (the kernel loaded, outside the timings)
    stopped(type(get_backend(None)))
    timed(kernel_engine.Arena, "compile_rules", "rules")
    timed(compile_mod._Compiler, "compile_rule", "lowered")
    timed(grammar.Grammar, "body", "bodies")

    times: list[float] = []
    per: list[tuple[float, float, str]] = []
    for path in sorted(Path(args.dir).glob("*.json"))[args.offset :: args.every]:
        doc = json.loads(path.read_text())
        try:
            program = C.compile_grammar(C.schema_to_grammar(doc["schema"]))
        except C.ConstraintError:
            continue
        n, rules = len(times), SPENT["rules"]
        for test in doc["tests"]:
            if test.get("valid"):
                text = json.dumps(test["data"], separators=(",", ":"), ensure_ascii=False)
                try:
                    times += masks(program, vocab, tok.encode(text, add_special=False))
                except C.ConstraintError:  # (a per-token limit: json_schema_bench.py counts these)
                    continue
        per.append((sum(times[n:]), SPENT["rules"] - rules, path.stem))

    total, ordered = sum(times), sorted(times)
    rules, bodies, lowered = SPENT["rules"], SPENT["bodies"], SPENT["lowered"]
    mean, p99 = total / len(times), ordered[len(times) * 99 // 100]
    print(f"{len(times)} masks: mean {mean * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us")
    for what, secs in (
        ("rules compiled as reached", rules),
        ("  their bodies built (Grammar.body)", bodies),
        ("  lowered to the program (without the bodies)", lowered - bodies),
        ("  written into the arena", rules - lowered),
        ("the rest (pda walks and steps)", total - rules),
        ("  pda calls stopped at a rule not compiled", SPENT["stopped"]),
    ):
        print(f"{what:48} {secs:8.2f} s  {secs / total:4.0%}")
    for secs, in_rules, name in sorted(per, reverse=True)[: args.top]:
        print(f"  {name}: masks {secs * 1e3:.0f} ms, rules compiled {in_rules * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
