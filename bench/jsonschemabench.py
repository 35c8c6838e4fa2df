#!/usr/bin/env python3
"""JSONSchemaBench coverage and mask benchmark (not a test): how many of the benchmark's real-world schemas
compile, how long they take, and the per-token mask time on a sample; optionally against another checkout's
llamay in the same run (each schema compiled by both at once, so both see the same machine load).

    tar xzf ../shared/fixtures/jsonschemabench/maskbench-dev.tgz -C ~/.cache/jsonschemabench
    python bench/jsonschemabench.py ~/.cache/jsonschemabench [--base /work/main/.venv/bin/python] [--masks 100]

A schema ends as ok, refused (a ConstraintError; a limit refusal names its limit), timeout (--timeout seconds),
memory (over --memory GB) or crash (any other exception, or the worker died). Masks: for every k-th schema
that compiles on both sides, the first valid test instance (compact JSON) is tokenized with SmolLM2's tokenizer
and walked on a fresh constraint, its mask computed before each token, until a token the grammar does not
allow (llamay writes a subset of the valid documents: properties in order, bounded whitespace).
"""

from __future__ import annotations

import argparse
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


def compile_one(path: str) -> tuple[dict, object]:
    """(the record of compiling `path`'s schema, its program or None)."""
    import llamay.constraints as C
    from llamay.constraints.automaton import Automaton

    rec: dict = {}
    prog = None
    schema = json.loads(Path(path).read_text())["schema"]
    t0 = time.process_time()
    try:
        prog = C.compile_grammar(C.parse_gbnf(C.schema_to_gbnf(schema)))
        Automaton(prog)  # the start state: where a per-token limit can refuse at compile time
        rec["status"] = "ok"
    except Timeout:
        rec["status"] = "timeout"
    except MemoryError:
        rec["status"] = "memory"
    except C.ConstraintError as e:
        rec["status"] = "refused"
        rec["limit"] = getattr(e, "limit", None)
        rec["msg"] = str(e)[:300]
    except Exception as e:  # the benchmark counts every failure, of either side
        rec["status"] = "crash"
        rec["msg"] = f"{type(e).__name__}: {e}"[:300]
    rec["cpu"] = time.process_time() - t0
    return rec, prog


def walk_masks(path: str, prog: object, tok, vocab) -> list[float]:
    """Seconds per mask over the schema's first valid instance (see the module docstring)."""
    from json_schema_pyodide import masks

    tests = [t for t in json.loads(Path(path).read_text()).get("tests", []) if t.get("valid")]
    if not tests:
        return []
    return masks(prog, vocab, tok.encode(json.dumps(tests[0]["data"], separators=(",", ":"), ensure_ascii=False)))


def worker(timeout: float, memory_gb: float) -> None:
    """Answer one JSON line per request line: {"file", "masks"} -> the record."""
    resource.setrlimit(resource.RLIMIT_AS, (int(memory_gb * (1 << 30)),) * 2)
    signal.signal(signal.SIGALRM, alarm)
    tok = vocab = None
    for line in sys.stdin:
        req = json.loads(line)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            rec, prog = compile_one(req["file"])
            if req["masks"] and prog is not None:
                if tok is None:
                    from llamay.constraints.vocab import ConstraintVocab
                    from llamay.gguf import open_gguf
                    from llamay.tokenizer import load_tokenizer

                    signal.setitimer(signal.ITIMER_REAL, 0)
                    tok = load_tokenizer(open_gguf(str(MODEL)))
                    vocab = ConstraintVocab.for_tokenizer(tok)
                    signal.setitimer(signal.ITIMER_REAL, timeout)
                try:
                    rec["masks"] = walk_masks(req["file"], prog, tok, vocab)
                except (Timeout, MemoryError) as e:
                    rec["masks_failed"] = type(e).__name__
                except Exception as e:  # a per-token limit, or any failure of either side
                    rec["masks_failed"] = f"{type(e).__name__}: {e}"[:300]
        except Timeout:
            rec = {"status": "timeout", "cpu": timeout}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        print(json.dumps(rec), flush=True)


def worker_side(python: str, args: argparse.Namespace) -> WorkerProcess:
    """One checkout's worker process, restarted when it dies."""
    return WorkerProcess([python, __file__, "--worker", "--timeout", str(args.timeout), "--memory", str(args.memory)])


def stats(times: list[float]) -> str:
    if not times:
        return "no masks"
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"mean {statistics.fmean(times) * 1e6:,.0f} µs, p99 {p99 * 1e6:,.0f} µs over {len(times)} masks"


def report(name: str, recs: dict[str, dict]) -> None:
    counts = Counter(r["status"] for r in recs.values())
    cpu = sum(r["cpu"] for r in recs.values())
    print(f"{name}: {dict(counts)}; compile CPU {cpu:.1f} s")
    limits = Counter(r.get("limit") for r in recs.values() if r["status"] == "refused" and r.get("limit"))
    if limits:
        print(f"  refused by a limit: {dict(limits)}")


def compare(this: dict[str, dict], base: dict[str, dict]) -> None:
    lost = [f for f in base if base[f]["status"] == "ok" and this[f]["status"] != "ok"]
    gained = [f for f in base if base[f]["status"] != "ok" and this[f]["status"] == "ok"]
    both = [f for f in base if base[f]["status"] == this[f]["status"] == "ok"]
    print(f"compiled by base, not by this: {len(lost)}; by this, not by base: {len(gained)}")
    for f in lost:
        print(f"  lost {f}: {this[f]['status']} {this[f].get('msg', '')[:160]}")
    for f in gained[:10]:
        print(f"  gained {f} (base: {base[f]['status']} {base[f].get('msg', '')[:100]})")
    cb, ct = sum(base[f]["cpu"] for f in both), sum(this[f]["cpu"] for f in both)
    print(f"compile CPU of the {len(both)} compiled by both: base {cb:.1f} s, this {ct:.1f} s ({ct / cb:.2f}x)")
    slow = sorted(both, key=lambda f: this[f]["cpu"], reverse=True)[:5]
    print("slowest here:", [(f, round(this[f]["cpu"], 2), round(base[f]["cpu"], 2)) for f in slow])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="the unpacked maskbench folder (one SPLIT---ID.json per schema)")
    ap.add_argument("--base", help="another checkout's python (its llamay is the 'before' side)")
    ap.add_argument("--masks", type=int, default=100, help="schemas of the mask sample (0: none)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per schema")
    ap.add_argument("--memory", type=float, default=3.0, help="address space per worker, GB")
    ap.add_argument("--limit", type=int, help="only the first N schemas")
    ap.add_argument("--out", help="write every record here (JSON)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.timeout, args.memory)
    files = sorted(str(p) for p in Path(args.dir).expanduser().glob("*.json"))[: args.limit]
    sides = {"this": worker_side(sys.executable, args)}
    if args.base:
        sides["base"] = worker_side(args.base, args)
    step = max(1, len(files) // args.masks) if args.masks else 0
    recs: dict[str, dict[str, dict]] = {name: {} for name in sides}
    t0 = time.time()
    for i, f in enumerate(files):
        for side in sides.values():
            side.send({"file": f, "masks": bool(step) and i % step == 0})
        for name, side in sides.items():
            recs[name][Path(f).name] = side.receive()
        if i % 500 == 0:
            print(f"{i}/{len(files)} {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    for side in sides.values():
        side.close()
    for name, r in recs.items():
        report(name, r)
    sampled = [f for f in recs["this"] if all("masks" in recs[n][f] for n in sides)]
    for name, r in recs.items():
        failed = [(f, x["masks_failed"]) for f, x in r.items() if "masks_failed" in x]
        if failed:
            print(f"{name}: {len(failed)} mask walks failed, e.g. {failed[:3]}")
    for name in sides:
        print(f"{name} masks on {len(sampled)} schemas: {stats([t for f in sampled for t in recs[name][f]['masks']])}")
    if args.base:
        compare(recs["this"], recs["base"])
    if args.out:
        Path(args.out).write_text(json.dumps(recs))


if __name__ == "__main__":
    main()
