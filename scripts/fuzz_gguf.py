"""Fuzz llamay's GGUF loading with mutated fixture files: thousands of cases from one seed, and a summary.

    python scripts/fuzz_gguf.py --seed 1 --count 5000          # every fixture (stories260K, vocabularies, MiniLM)
    python scripts/fuzz_gguf.py --seed 1 --count 200 --only stories -v

Each case mutates one fixture (a truncation, a header or index field, a metadata type, length or value, a
tensor's type, shape or offset, a data value) and must end in a clean refusal naming the file or in a model that
loads, passes the audit and runs a short forward pass with finite output (`tests/gguf/fuzz.py`). Case i of a
seed is reproducible alone: `--seed S --start i --count 1 -v`. Exits 1 when any case fails.
"""

from __future__ import annotations

import argparse
import faulthandler
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: `tests` holds the fuzzer

from tests.gguf.fuzz import fixture_files, fuzz


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0, help="first case index (to rerun one case of a seed)")
    ap.add_argument("--only", default="", help="fuzz only the fixtures whose file name contains this")
    ap.add_argument("--backend", default=None, help="kernel backend (default: the best one here)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each case before it runs")
    args = ap.parse_args()
    faulthandler.enable()  # a crash in a kernel still prints where, after the case line
    files = {p: w for p, w in fixture_files().items() if args.only in p.name}
    if not files:
        print("no fixture files (set LLAMAY_FIXTURES?)", file=sys.stderr)
        return 2
    from llamay.kernels import get_backend

    summary = fuzz(
        args.seed,
        args.count,
        files,
        get_backend(args.backend),
        on_case=(lambda i, label: print(label[:300], flush=True)) if args.verbose else None,
        start=args.start,
    )
    print(summary.report())
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
