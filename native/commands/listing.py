"""`llamay list [--verify]`: the models of llamay's store and of Ollama's (marked), as `ollama list` shows them."""

from __future__ import annotations

import argparse
import time

from llamay.native.store.progress import human_bytes

ID_DIGITS = 12


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("list", aliases=["ls"], help="list stored models (llamay's store, then Ollama's)")
    p.add_argument("--verify", action="store_true", help="hash every blob (reads them whole), not only sizes")
    p.set_defaults(func=run)


def ago(t: float, now: float | None = None) -> str:
    s = max(0, int((now or time.time()) - t))
    for unit, n in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if s >= n:
            k = s // n
            return f"{k} {unit}{'s' if k > 1 else ''} ago"
    return "just now"


def run(args: argparse.Namespace) -> int:
    """Exits 1 when a model's blobs are missing or damaged (each named)."""
    from llamay.native.store import listing

    rows = listing(verify=args.verify)
    width = max([len(r.name.short) + 9 for r in rows] + [24])
    print(f"{'NAME':<{width}} {'ID':<{ID_DIGITS}}  {'SIZE':>9}  MODIFIED")
    damaged = 0
    for r in rows:
        name = r.name.short + ("  (ollama)" if r.store.kind != "llamay" else "")
        print(f"{name:<{width}} {r.digest[:ID_DIGITS]}  {human_bytes(r.size):>9}  {ago(r.modified)}")
        for problem in r.problems:
            damaged += 1
            print(f"  DAMAGED: {problem}")
    return 1 if damaged else 0
