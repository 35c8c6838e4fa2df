#!/usr/bin/env python3
"""JSONSchemaBench mask speed under Pyodide (the wasm pda kernel) against native (numba), same masks, same run
(not a test): json_schema_bench.py's mask walks, the full token mask before each token of the valid instances
of every `--masks`-th schema llamay compiles (tokenized with SmolLM2's tokenizer, on a fresh constraint: caches
cold), timed natively in this process and under Pyodide in Node (`web/bin/llamay-web.mjs python`, this file
again with --replay), over the tokens both walked.

    tar xzf ../shared/fixtures/jsonschemabench/maskbench-dev.tgz -C /tmp/jsb
    python bench/json_schema_pyodide.py /tmp/jsb [--every 10 [--offset 3]] [--masks 4]

Needs `npm ci` in web/ and `python web/build.py`.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def collector_settings():
    """`llamay.collector.settle_after_load` (what serve does after its load), or what versions without it did."""
    try:
        from llamay.collector import settle_after_load
    except ImportError:  # (an older llamay, run for "before" figures)

        def settle_after_load() -> None:
            gc.collect()
            gc.freeze()

    return settle_after_load


def masks(program, vocab, tokens: list[int], constraint=None) -> list[float]:
    """The time of each mask along `tokens`, until one is not allowed (as json_schema_bench.Llamay.masks), on
    `constraint` (its caches as earlier walks left them) or a fresh constraint of `program` (caches empty)."""
    from llamay.constraints.constraint import GrammarConstraint

    c = constraint or GrammarConstraint(program, vocab)
    st, out = c.start(), []
    for t in tokens:
        t0 = time.perf_counter()
        mask = c.allowed(st)
        out.append(time.perf_counter() - t0)
        if t not in mask:
            break
        st = c.advance(st, t)
    return out


def walk_all(requests: list[dict], model: str) -> tuple[str, list[list[float]]]:
    """(the backend the constraints ran on, each request's mask times)."""
    import llamay.constraints as C
    from llamay.constraints.constraint import grammar_engine
    from llamay.constraints.vocab import ConstraintVocab
    from llamay.gguf import open_gguf
    from llamay.tokenizer import load_tokenizer

    settle_after_load = collector_settings()

    tok = load_tokenizer(open_gguf(model))
    vocab = ConstraintVocab.for_tokenizer(tok)
    warm = C.compile_grammar(C.schema_to_grammar({"type": "object", "properties": {"a": {"type": "string"}}}))
    masks(warm, vocab, tok.encode('{"a":"xyz"}', add_special=False))  # (the kernel loaded, outside the timings)
    settle_after_load()  # (what the load made out of the collector's passes, as json_schema_bench's worker and serve)
    out, engine = [], ""
    for req in requests:
        gc.collect()  # (the previous request's garbage collected here, not inside this one's masks)
        program = C.compile_grammar(C.schema_to_grammar(req["schema"]))  # fresh: its lazy rules not compiled
        if not engine:
            eng = grammar_engine(program, vocab, C.DEFAULT_LIMITS)
            engine = f"{type(eng).__name__} on {getattr(eng, 'be', None) and eng.be.name}"
        out.append(masks(program, vocab, req["tokens"]))
    return engine, out


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def line(name: str, xs: list[float]) -> str:
    return (f"{name}: masks mean {statistics.fmean(xs) * 1e6:,.0f} µs, p50 {pct(xs, 0.5) * 1e6:,.0f} µs, "
            f"p99 {pct(xs, 0.99) * 1e6:,.0f} µs over {len(xs)} masks")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="the unpacked maskbench folder (one SPLIT---ID.json per schema)")
    ap.add_argument("--every", type=int, default=10, help="take every N-th schema (sorted by name)")
    ap.add_argument("--offset", type=int, default=0)
    ap.add_argument("--masks", type=int, default=4, help="time masks on every N-th schema llamay compiles")
    ap.add_argument("--replay", nargs=2, metavar=("REQUESTS", "MODEL"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.replay:  # under Pyodide: the walks, into a file beside the requests (long lines of stdout are cut)
        req = Path(args.replay[0])
        engine, times = walk_all(json.loads(req.read_text()), args.replay[1])
        req.with_name("times.json").write_text(json.dumps({"engine": engine, "times": times}))
        return
    sys.path.insert(0, str(Path(__file__).parent))
    from constraint_masks import default_model

    import llamay.constraints as C
    from llamay.gguf import open_gguf
    from llamay.tokenizer import load_tokenizer

    model = str(default_model())
    tok = load_tokenizer(open_gguf(model))
    requests, n_ok = [], 0
    for f in sorted(Path(args.dir).expanduser().glob("*.json"))[args.offset :: args.every]:
        data = json.loads(f.read_text())
        try:
            C.compile_grammar(C.schema_to_grammar(data["schema"]))
        except C.ConstraintError:
            continue
        n_ok += 1
        if n_ok % args.masks != 1 % args.masks:
            continue
        for t in data.get("tests", []):
            if t["valid"]:
                text = json.dumps(t["data"], separators=(",", ":"), ensure_ascii=False)
                requests.append({"schema": data["schema"], "tokens": tok.encode(text, add_special=False)})
    native_engine, native = walk_all(requests, model)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "requests.json"
        path.write_text(json.dumps(requests))
        run = subprocess.run(["node", str(ROOT / "web/bin/llamay-web.mjs"), "python", __file__, "--replay", str(path),
                              model], capture_output=True, text=True, check=False)  # fmt: skip
        out = path.with_name("times.json")
        if run.returncode != 0 or not out.exists():
            raise SystemExit(f"the Pyodide run failed:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}")
        web = json.loads(out.read_text())
    nat, wasm = [], []
    for a, b in zip(native, web["times"], strict=True):
        n = min(len(a), len(b))  # the tokens both walked
        nat += a[:n]
        wasm += b[:n]
    print(f"{len(requests)} instances of {n_ok} schemas llamay compiled (every {args.every}th from {args.offset}, "
          f"masks on every {args.masks}th)")  # fmt: skip
    print(line(f"native ({native_engine})", nat))
    print(line(f"pyodide ({web['engine']})", wasm))
    print(
        f"pyodide/native: mean {statistics.fmean(wasm) / statistics.fmean(nat):.1f}x, "
        f"p50 {pct(wasm, 0.5) / pct(nat, 0.5):.1f}x, p99 {pct(wasm, 0.99) / pct(nat, 0.99):.1f}x"
    )


if __name__ == "__main__":
    main()
