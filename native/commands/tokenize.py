"""`llamay tokenize -m MODEL TEXT`: the ids of TEXT as a JSON array.

`--no-special` parses no special tokens (`<|im_start|>` stays text), `--no-add-special` adds no BOS/EOS,
`--pieces` prints `[{"id": ..., "piece": ...}, ...]` instead of bare ids, and `--batch` reads one JSON string per
line on stdin and writes one JSON array per line.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from llamay.errors import LlamayError
from llamay.native.commands import MODEL_HELP


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tokenize", help="print the token ids of a text (JSON)")
    p.add_argument("-m", "--model", required=True, help=MODEL_HELP)
    p.add_argument("text", nargs="?", help="the text (omit with --batch)")
    p.add_argument("--no-special", action="store_true", help="do not parse special tokens in the text")
    p.add_argument("--no-add-special", action="store_true", help="do not add BOS/EOS (CLS/SEP)")
    p.add_argument("--pieces", action="store_true", help="print each id with its piece")
    p.add_argument("--batch", action="store_true", help="read one JSON string per line on stdin")
    p.set_defaults(func=run)


def load_model_tokenizer(model: str) -> Any:
    """The tokenizer of a `-m` argument (a path or a catalogue name); progress goes to stderr."""
    from llamay.gguf import open_gguf
    from llamay.native.store import resolve_model
    from llamay.tokenizer import load_tokenizer

    path = resolve_model(model, log=lambda *a: print(*a, file=sys.stderr))
    if not path.exists():
        raise LlamayError(f"no such model file: {path}")
    with open_gguf(path) as f:
        return load_tokenizer(f)


def _render(tok: Any, ids: list[int], pieces: bool) -> str:
    if not pieces:
        return json.dumps(ids)
    out = [{"id": i, "piece": tok.token_bytes(i).decode("utf-8", "replace")} for i in ids]
    return json.dumps(out, ensure_ascii=False)


def run(args: argparse.Namespace) -> int:
    if args.batch == (args.text is not None):
        raise LlamayError("give either TEXT or --batch (JSON strings on stdin)")
    tok = load_model_tokenizer(args.model)
    add, parse = not args.no_add_special, not args.no_special
    if not args.batch:
        print(_render(tok, tok.encode(args.text, add, parse), args.pieces))
        return 0
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            text = json.loads(line)
        except json.JSONDecodeError as e:
            raise LlamayError(f"stdin line {n}: not JSON: {e}") from None
        if not isinstance(text, str):
            raise LlamayError(f"stdin line {n}: expected a JSON string, got {type(text).__name__}")
        print(_render(tok, tok.encode(text, add, parse), args.pieces), flush=False)
    return 0
