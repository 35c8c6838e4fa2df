"""`llamay detokenize -m MODEL IDS...`: the text of token ids.

IDS are integers, as separate arguments or one JSON array. `--special` renders control tokens (`<|im_end|>`);
`--batch` reads one JSON array of ids per line on stdin and writes one JSON string per line.
"""

from __future__ import annotations

import argparse
import json
import sys

from llamay.errors import LlamayError
from llamay.native.commands import MODEL_HELP

from .tokenize import load_model_tokenizer


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("detokenize", help="print the text of token ids")
    p.add_argument("-m", "--model", required=True, help=MODEL_HELP)
    p.add_argument("ids", nargs="*", help="token ids: integers, or one JSON array")
    p.add_argument("--special", action="store_true", help="render control tokens as their text")
    p.add_argument("--batch", action="store_true", help="read one JSON array of ids per line on stdin")
    p.set_defaults(func=run)


def parse_ids(words: list[str]) -> list[int]:
    text = " ".join(words).strip()
    try:
        ids = json.loads(text) if text.startswith("[") else [int(w) for w in text.replace(",", " ").split()]
    except ValueError:
        raise LlamayError(f"token ids must be integers or a JSON array of integers, got {text!r}") from None
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise LlamayError(f"token ids must be integers, got {text!r}")
    return ids


def run(args: argparse.Namespace) -> int:
    if args.batch == bool(args.ids):
        raise LlamayError("give either IDS or --batch (JSON arrays on stdin)")
    tok = load_model_tokenizer(args.model)
    if not args.batch:
        print(tok.decode(parse_ids(args.ids), special=args.special))
        return 0
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            ids = parse_ids([line])
        except LlamayError as e:
            raise LlamayError(f"stdin line {n}: {e}") from None
        print(json.dumps(tok.decode(ids, special=args.special), ensure_ascii=False))
    return 0
