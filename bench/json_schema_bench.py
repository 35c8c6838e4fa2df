#!/usr/bin/env python3
"""JSON Schema coverage, soundness and mask speed on JSONSchemaBench (not a test): llamay against llguidance
in the same run, each schema given to both at once (one worker process per engine, so both see the same load).

    tar xzf ../shared/fixtures/jsonschemabench/maskbench-dev.tgz -C /tmp/jsb
    python bench/json_schema_bench.py /tmp/jsb [--every 10 [--offset 3]] [--masks 4] [--llamay-python ...]

Per engine: schemas compiled / refused / crashed (any other exception, a dead worker or a timeout); compile CPU
p50 / p99 over the schemas it compiled (llamay: schema to grammar to program and the start state, the rest of
the program compiled as the automaton reaches it; llguidance: the grammar and its LLMatcher), and the same
with the walks of the schema's test instances added (llamay's lazily compiled rules are in those); the test
instances of the compiled schemas, written as compact JSON, that it accepts, valid and invalid (an invalid one
accepted is a soundness bug; a valid one refused is a generation choice or a missing feature; llamay's instances
stopped by a per-token limit are counted apart); and, on every `--masks`-th schema both compiled, the full
token mask before each token of its valid instances, tokenized once here with SmolLM2's tokenizer, until either
engine rejects a token: both are timed over the same tokens. llamay walks each instance on a fresh constraint
(cold: its caches start empty); with `--per-schema`, on one constraint per schema, as `llamay serve` keeps one
per schema it is asked for (the second instance finds the states and cut walks the first made). llguidance
walks each instance on a copy of one matcher per schema (its copies share the lexer's cache: a second instance
on a copy of a matcher that walked the first measured 11.1 us a mask on every 10th schema against 14.1 on a
fresh matcher).
`--llamay-python` runs another checkout's llamay (its venv's python) for the "before" figures; `--llamacpp`
compiles llamay's side as API requests do (listed order, closed objects: a subset of the valid documents, so
fewer valid instances accepted, and masks over fewer tokens). Each schema starts after a garbage collection (the
previous schema's garbage is not collected inside its timed compile); llamay's worker freezes what its load made
(the vocabulary, the compiled kernel) as `llamay serve` does.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import resource
import signal
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from constraint_masks import default_model
from workers import Timeout, WorkerProcess, alarm

MODEL = default_model()
LLG_DEFAULTS = {"whitespace_flexible": True}


def compact(doc: object) -> str:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)


# -- the engines (each runs inside its own worker) -----------------------------------------------------------


class Llamay:
    def __init__(self, per_schema: bool = False, llamacpp: bool = False) -> None:
        import llamay.constraints as C

        self.C = C
        # (`--llamacpp`: the options API requests compile with, constraint_from_request's, not the spec's)
        self.options = C.LLAMACPP if llamacpp else {}
        # (a recursive schema's grammar checks left to the compile, as json_schema_constraint: versions before
        # defer_checks made them at once)
        if "defer_checks" in inspect.signature(C.schema_to_grammar).parameters:
            self.options = {**self.options, "defer_checks": True}
        try:  # (and ending with the root value, as json_schema_constraint: versions before it did not)
            from llamay.constraints.trailing_space import without_trailing_space as ending
        except ImportError:
            ending = None
        self.ending = ending or (lambda grammar: grammar)
        self.vocab = None
        self.walk_errors = 0
        self.per_schema = per_schema  # masks: one constraint for all the instances of a schema
        from json_schema_pyodide import collector_settings

        collector_settings()()  # (serve's collector settings from its start: the compiles are timed under them)

    def compile(self, schema: object) -> object:
        from llamay.constraints.automaton import Automaton

        grammar = self.ending(self.C.schema_to_grammar(schema, **self.options))
        prog = self.C.compile_grammar(grammar)  # (lazily, past its start)
        return prog, Automaton(prog), {}

    def refused(self, e: Exception) -> bool:
        return isinstance(e, self.C.ConstraintError)

    def accepts(self, compiled: object, text: str, tokens: list[int]) -> bool:
        try:
            return compiled[1].accepts_bytes(text.encode())
        except self.C.ConstraintLimitError:  # a per-token limit (max_stacks, ...): the step raises, counted apart
            self.walk_errors += 1
            return False

    def masks(self, compiled: object, tokens: list[int]) -> list[float]:
        from json_schema_pyodide import collector_settings, masks

        if self.vocab is None:
            from llamay.constraints.vocab import ConstraintVocab
            from llamay.gguf import open_gguf
            from llamay.tokenizer import load_tokenizer

            self.vocab = ConstraintVocab.for_tokenizer(load_tokenizer(open_gguf(str(MODEL))))
            # as `llamay serve` does after its load: the vocabulary and the compiled kernel (~100k objects) out
            # of the collector's full passes, and its young generation's threshold (the kernel loaded by a
            # first walk, outside the timings)
            warm = self.C.compile_grammar(self.C.schema_to_grammar({"type": "string"}))
            masks(warm, self.vocab, [])
            collector_settings()()
        if not self.per_schema:
            return masks(compiled[0], self.vocab, tokens)
        from llamay.constraints.constraint import GrammarConstraint

        shared = compiled[2]
        if "c" not in shared:  # (made outside the timings, as the fresh one is)
            shared["c"] = GrammarConstraint(compiled[0], self.vocab)
        return masks(compiled[0], self.vocab, tokens, shared["c"])


class LLGuidance:
    def __init__(self) -> None:
        import llguidance

        from llamay.gguf import open_gguf
        from llamay.tokenizer import load_tokenizer

        sys.path.insert(0, str(Path(__file__).parent))
        from constraint_masks import lltokenizer

        self.llg = llguidance
        self.tok = lltokenizer(load_tokenizer(open_gguf(str(MODEL))))

    def compile(self, schema: object) -> object:
        grammar = self.llg.LLMatcher.grammar_from_json_schema(schema, defaults=LLG_DEFAULTS)
        m = self.llg.LLMatcher(self.tok, grammar, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def refused(self, e: Exception) -> bool:
        return isinstance(e, (ValueError, TypeError))  # how llguidance reports a schema it does not support

    def accepts(self, m: object, text: str, tokens: list[int]) -> bool:
        m = m.deep_copy()
        return m.consume_tokens(tokens) and m.is_accepting()

    def masks(self, m: object, tokens: list[int]) -> list[float]:
        m, out = m.deep_copy(), []
        for t in tokens:
            t0 = time.perf_counter()
            mask = m.compute_bitmask()
            out.append(time.perf_counter() - t0)
            if not mask[t >> 3] >> (t & 7) & 1 or not m.consume_token(t):
                break
        return out


def handle(engine: object, req: dict) -> dict:
    schema = req["schema"]
    rec: dict = {}
    gc.collect()  # (the previous schema's garbage is collected now, not inside this one's timed compile)
    t0 = time.process_time()
    try:
        compiled = engine.compile(schema)
        rec["status"] = "ok"
    except Timeout:
        raise
    except Exception as e:  # every failure of either engine is counted
        rec["status"] = "refused" if engine.refused(e) else "crash"
        rec["msg"] = f"{type(e).__name__}: {e}"[:300]
        rec["cpu"] = time.process_time() - t0
        return rec
    rec["cpu"] = time.process_time() - t0
    t0 = time.process_time()
    errors = getattr(engine, "walk_errors", 0)
    rec["accepts"] = [engine.accepts(compiled, text, toks) for text, toks in req["tests"]]
    rec["walk_cpu"] = time.process_time() - t0  # (llamay: with the rules compiled lazily on the way)
    rec["walk_errors"] = getattr(engine, "walk_errors", 0) - errors
    if req["masks"]:
        rec["masks"] = [engine.masks(compiled, toks) for _, toks in req["masks"]]
    return rec


def worker(engine_name: str, timeout: float, memory_gb: float, per_schema: bool, llamacpp: bool) -> None:
    """Answer one JSON line per request line."""
    resource.setrlimit(resource.RLIMIT_AS, (int(memory_gb * (1 << 30)),) * 2)
    signal.signal(signal.SIGALRM, alarm)
    engine = Llamay(per_schema, llamacpp) if engine_name == "llamay" else LLGuidance()
    for line in sys.stdin:
        req = json.loads(line)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            rec = handle(engine, req)
        except Timeout:
            rec = {"status": "crash", "msg": f"timeout ({timeout} s)", "cpu": timeout}
        except MemoryError:
            rec = {"status": "crash", "msg": "MemoryError", "cpu": 0.0}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        print(json.dumps(rec), flush=True)


# -- the driver ----------------------------------------------------------------------------------------------


def worker_side(engine: str, python: str, args: argparse.Namespace) -> WorkerProcess:
    """One engine's worker process, restarted when it dies."""
    return WorkerProcess(
        [python, __file__, "--worker", engine, "--timeout", str(args.timeout), "--memory", str(args.memory),
         *(["--per-schema"] if args.per_schema else []), *(["--llamacpp"] if args.llamacpp else [])]
    )  # fmt: skip


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))] if s else float("nan")


def summary(name: str, recs: list[dict], labels: list[list[bool]], masks: list[float]) -> list[str]:
    counts = Counter(r["status"] for r in recs)
    ok = [i for i, r in enumerate(recs) if r["status"] == "ok"]
    cpu = [recs[i]["cpu"] for i in ok]
    total = [recs[i]["cpu"] + recs[i].get("walk_cpu", 0.0) for i in ok]
    valid = [(a, v) for i in ok for a, v in zip(recs[i]["accepts"], labels[i], strict=True) if v]
    invalid = [(a, v) for i in ok for a, v in zip(recs[i]["accepts"], labels[i], strict=True) if not v]
    va, ia = sum(a for a, _ in valid), sum(a for a, _ in invalid)
    errors = sum(recs[i].get("walk_errors", 0) for i in ok)
    return [
        f"{name}: compiled {counts['ok']}, refused {counts['refused']}, crashed {counts['crash']}",
        f"  compile CPU p50 {pct(cpu, 0.5) * 1e3:.2f} ms, p99 {pct(cpu, 0.99) * 1e3:.1f} ms; with the test "
        f"instances' walks: p50 {pct(total, 0.5) * 1e3:.2f} ms, p99 {pct(total, 0.99) * 1e3:.1f} ms",
        f"  valid instances accepted {va}/{len(valid)} ({100 * va / max(1, len(valid)):.1f}%), "
        f"invalid accepted {ia}/{len(invalid)}; instances stopped by a per-token limit {errors}",
        f"  masks: mean {statistics.fmean(masks) * 1e6:,.0f} µs, p50 {pct(masks, 0.5) * 1e6:,.0f} µs, "
        f"p99 {pct(masks, 0.99) * 1e6:,.0f} µs over {len(masks)} masks"
        if masks
        else "  masks: none",
    ]


def run(files: list[Path], sides: dict[str, WorkerProcess], tok, every_mask: int) -> tuple[dict, list, dict]:
    """Every schema to both engines; masks on every `every_mask`-th schema both compile."""
    recs: dict[str, list[dict]] = {n: [] for n in sides}
    labels: list[list[bool]] = []
    times: dict[str, list[float]] = {n: [] for n in sides}
    both = 0
    t_start = time.time()
    for i, f in enumerate(files):
        data = json.loads(f.read_text())
        tests = [(compact(t["data"]), t["valid"]) for t in data.get("tests", [])]
        labels.append([v for _, v in tests])
        req = {"schema": data["schema"], "tests": [(text, tok.encode(text, add_special=False)) for text, _ in tests]}
        req["masks"] = []
        got = exchange(sides, req)
        if all(r["status"] == "ok" for r in got.values()):
            both += 1
            if every_mask and both % every_mask == 1 % every_mask:
                walk = {"schema": req["schema"], "tests": [], "masks": [t for t, (_, v) in zip(req["tests"], tests,
                        strict=True) if v]}  # fmt: skip
                walked = exchange(sides, walk)
                if all("masks" in r for r in walked.values()):
                    for runs in zip(*(walked[n]["masks"] for n in sides), strict=True):
                        n_same = min(map(len, runs))  # the tokens both engines walked
                        for n, run in zip(sides, runs, strict=True):
                            times[n] += run[:n_same]
        for n in sides:
            got[n]["file"] = f.name
            recs[n].append(got[n])
        if i % 100 == 0:
            print(f"{i}/{len(files)} {time.time() - t_start:.0f} s", file=sys.stderr, flush=True)
    return recs, labels, times


def exchange(sides: dict[str, WorkerProcess], req: dict) -> dict[str, dict]:
    for side in sides.values():
        side.send(req)
    return {n: side.receive() for n, side in sides.items()}


def report(recs: dict, labels: list, times: dict) -> None:
    for n in recs:
        print("\n".join(summary(n, recs[n], labels, times[n])))
    lm, lg = times["llamay"], times["llguidance"]
    if lm and lg:
        print(f"mask ratio llamay/llguidance: mean {statistics.fmean(lm) / statistics.fmean(lg):.1f}x, "
              f"p99 {pct(lm, 0.99) / pct(lg, 0.99):.1f}x")  # fmt: skip
    only = Counter((a["status"] == "ok", b["status"] == "ok") for a, b in zip(recs["llamay"], recs["llguidance"],
                   strict=True))  # fmt: skip
    print(f"compiled by llamay only {only[True, False]}, by llguidance only {only[False, True]}, "
          f"by both {only[True, True]}")  # fmt: skip
    pairs = [(a["cpu"], b["cpu"]) for a, b in zip(recs["llamay"], recs["llguidance"], strict=True)
             if a["status"] == b["status"] == "ok"]  # fmt: skip
    if pairs:
        lm_cpu, lg_cpu = [a for a, _ in pairs], [b for _, b in pairs]
        print(f"compile CPU on the {len(pairs)} schemas both compile: llamay p50 {pct(lm_cpu, 0.5) * 1e3:.2f} ms, "
              f"p99 {pct(lm_cpu, 0.99) * 1e3:.1f} ms; llguidance p50 {pct(lg_cpu, 0.5) * 1e3:.2f} ms, "
              f"p99 {pct(lg_cpu, 0.99) * 1e3:.1f} ms")  # fmt: skip
    bad = [(r["file"], i) for r, lab in zip(recs["llamay"], labels, strict=True) if r["status"] == "ok"
           for i, (a, v) in enumerate(zip(r["accepts"], lab, strict=True)) if a and not v]  # fmt: skip
    if bad:
        print(f"llamay accepted invalid instances: {bad[:20]}")
    crashed = [(r["file"], r.get("msg", "")[:120]) for r in recs["llamay"] if r["status"] == "crash"]
    if crashed:
        print(f"llamay crashed on: {crashed[:10]}")
    reasons = Counter(_reason(r.get("msg", "")) for r in recs["llamay"] if r["status"] != "ok")
    print("llamay refusals by reason:")
    for reason, count in reasons.most_common(30):
        print(f"  {count:5d}  {reason}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="the unpacked maskbench folder (one SPLIT---ID.json per schema)")
    ap.add_argument("--every", type=int, default=10, help="take every N-th schema (sorted by name): a fixed subset")
    ap.add_argument("--offset", type=int, default=0, help="starting from this one (0 .. every-1: disjoint slices)")
    ap.add_argument("--masks", type=int, default=4, help="time masks on every N-th schema both compile (0: none)")
    ap.add_argument("--llamay-python", default=sys.executable, help="the python whose llamay is measured")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per schema and engine")
    ap.add_argument("--memory", type=float, default=3.0, help="address space per worker, GB")
    ap.add_argument("--out", help="write every record here (JSON)")
    ap.add_argument("--per-schema", action="store_true", help="llamay's masks: one constraint per schema (as serve)")
    ap.add_argument(
        "--llamacpp",
        action="store_true",
        help="llamay compiles with LLAMACPP (listed order, closed objects: what API requests use)",
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.timeout, args.memory, args.per_schema, args.llamacpp)
    from llamay.gguf import open_gguf
    from llamay.tokenizer import load_tokenizer

    tok = load_tokenizer(open_gguf(str(MODEL)))
    files = sorted(Path(args.dir).expanduser().glob("*.json"))[args.offset :: args.every]
    sides = {
        "llamay": worker_side("llamay", args.llamay_python, args),
        "llguidance": worker_side("llguidance", sys.executable, args),
    }
    recs, labels, times = run(files, sides, tok, args.masks)
    for side in sides.values():
        side.close()
    print(f"{len(files)} schemas (every {args.every}th from {args.offset} of {args.dir}), "
          f"{sum(map(len, labels))} test instances; "
          f"llamay: {args.llamay_python}{', one constraint per schema' if args.per_schema else ''}"
          f"{', LLAMACPP options' if args.llamacpp else ''}")  # fmt: skip
    report(recs, labels, times)
    if args.out:
        Path(args.out).write_text(json.dumps({"labels": labels, **recs}))


def _reason(msg: str) -> str:
    """A refusal message without its place, so that equal reasons count together."""
    import re

    msg = re.sub(r" at [^ ]+", "", msg)
    msg = re.sub(r"^[A-Za-z]+Error: (#[^ :]*: )?", "", msg)
    msg = re.sub(r"\d+", "_", msg)
    return msg[:90]


if __name__ == "__main__":
    main()
