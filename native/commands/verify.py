"""`llamay verify -m MODEL`: batched prefill == token-by-token decode, and every backend == portable."""

from __future__ import annotations

import argparse

from llamay.errors import LlamayError
from llamay.native.commands import MODEL_HELP_DEFAULT

BIG_MODEL = 50e6  # weights: above this, pure Python compares 2 positions and runs no invariants of its own


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check the engine's invariants on a model (prefill vs decode, backends)")
    p.add_argument("-m", "--model", help=MODEL_HELP_DEFAULT)
    p.add_argument("--backend", action="append", help="backend(s) to check (default: every available one)")
    p.add_argument("--tokens", type=int, default=16, help="prompt tokens for the prefill/decode comparison")
    p.add_argument(
        "--portable-tokens",
        type=int,
        default=None,
        help="positions compared with portable (pure Python: slow on big models; default 16, or 2 above 50M weights)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from llamay.gguf import open_gguf
    from llamay.kernels import available_backends
    from llamay.native.store import resolve_model
    from llamay.verify import verify

    backends = args.backend or available_backends()
    with open_gguf(resolve_model(args.model)) as f:
        n_weights = sum(t.n_elements for t in f.tensors.values())
        big = n_weights >= BIG_MODEL
        n_portable = args.portable_tokens if args.portable_tokens is not None else (2 if big else 16)
        if big and not args.backend and len(backends) > 1:
            # portable stays the reference (block by block), but its own invariants would take most of an hour
            backends = [b for b in backends if b != "portable"]
            print(f"portable: the reference only ({n_weights / 1e6:.0f}M weights; --backend portable checks its own)")
        checks = verify(f, backends, args.tokens, min(n_portable, args.tokens))
    width = max(len(c.name) for c in checks)
    for c in checks:
        mark = "ok  " if c.passed else "FAIL"
        print(f"{mark} {c.name:<{width}}  measured {c.measured:.3g} (limit {c.limit:g})")
    failed = [c for c in checks if not c.passed]
    if failed:
        raise LlamayError(f"{len(failed)} of {len(checks)} checks failed")
    print(f"all {len(checks)} checks passed")
    return 0
