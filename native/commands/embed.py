"""`llamay embed -m MODEL TEXT...`: pooled, L2-normalised embeddings as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from llamay.native.commands import MODEL_HELP


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("embed", help="print sentence embeddings as JSON (encoder models, e.g. all-MiniLM)")
    p.add_argument("-m", "--model", required=True, help=MODEL_HELP)
    p.add_argument("texts", nargs="+", help="texts to embed")
    p.add_argument("--backend", help="kernel backend (portable, numba, wasm)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from llamay.engine import Engine
    from llamay.model import load_model
    from llamay.native.store import resolve_model

    with load_model(resolve_model(args.model), args.backend) as model:
        vectors = Engine(model).embed(args.texts)
    json.dump([{"text": t, "embedding": v} for t, v in zip(args.texts, vectors, strict=True)], sys.stdout)
    sys.stdout.write("\n")
    return 0
