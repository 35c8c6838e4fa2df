"""`llamay create`, `import`, `cp`, `rm` and `prune`: changing llamay's store (Ollama's is only read)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from llamay.errors import LlamayError


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("create", help="create a model from a Modelfile (Ollama's syntax)")
    p.add_argument("name", help="the new model's name, e.g. mario or me/mario:v1")
    p.add_argument("-f", "--file", default="Modelfile", help="the Modelfile (default ./Modelfile; - for stdin)")
    p.set_defaults(func=run_create)
    p = sub.add_parser("import", help="store a GGUF file under a name")
    p.add_argument("file", help="the GGUF file")
    p.add_argument("name", help="its name in the store")
    p.set_defaults(func=run_import)
    p = sub.add_parser("cp", help="copy a stored model (of either store) to a new name")
    p.add_argument("source")
    p.add_argument("destination")
    p.set_defaults(func=run_cp)
    p = sub.add_parser("rm", help="remove models from llamay's store (and the blobs nothing else uses)")
    p.add_argument("names", nargs="+")
    p.set_defaults(func=run_rm)
    p = sub.add_parser("prune", help="remove the blobs of llamay's store that no model uses")
    p.set_defaults(func=run_prune)


def run_create(args: argparse.Namespace) -> int:
    from llamay.native.store.ops import create

    if args.file == "-":
        text, folder = sys.stdin.read(), Path.cwd()
    else:
        path = Path(args.file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise LlamayError(f"cannot read the Modelfile {path}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise LlamayError(f"{path}: not UTF-8 text at byte {e.start}") from None
        folder = path.resolve().parent
    create(args.name, text, folder, log=say)
    return 0


def run_import(args: argparse.Namespace) -> int:
    from llamay.native.store.ops import create

    path = Path(args.file).expanduser().resolve()
    if not path.is_file():
        raise LlamayError(f"no such file: {path}")
    create(args.name, f"FROM {path}\n", path.parent, log=say)
    return 0


def run_cp(args: argparse.Namespace) -> int:
    from llamay.native.store.ops import copy

    copy(args.source, args.destination, log=say)
    return 0


def run_rm(args: argparse.Namespace) -> int:
    from llamay.native.store.ops import remove

    for name in args.names:
        remove(name, log=say)
    return 0


def run_prune(args: argparse.Namespace) -> int:
    from llamay.native.store import llamay_store
    from llamay.native.store.ops import prune

    n = prune(llamay_store(), log=say)
    print(f"{n} unused blob(s) removed")
    return 0
