"""`llamay` command line: one subcommand per module in `llamay.native.commands`.

Each command module exposes `register(subparsers)`, which adds its parser and sets `func`. Modules import
their heavy dependencies (numba, the model) inside `func`, so `llamay --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from llamay import __version__
from llamay.errors import LlamayError

COMMANDS = ("info", "tensor", "pull", "listing", "show", "manage", "ps", "tokenize", "detokenize", "verify", "chat",
            "embed", "run", "bench", "serve", "ray_serve", "web")  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="llamay", description="A GGUF language-model engine.")
    parser.add_argument("--version", action="version", version=f"llamay {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"llamay.native.commands.{name}").register(sub)
    return parser


def serve_on_ray(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`llamay serve --ray ARGS` is `llamay ray ARGS`; an option of `llamay serve` that `llamay ray` does not take
    is refused by name (exit status 2, as argparse does), not dropped."""
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    known = {name: set(sub.choices[name]._option_string_actions) for name in ("serve", "ray")}
    rest = [a for a in argv[1:] if a != "--ray"]
    refused = [a.split("=", 1)[0] for a in rest if a.split("=", 1)[0] in known["serve"] - known["ray"]]
    if refused:
        print(f"llamay serve --ray: error: {', '.join(refused)}: not an option of the Ray application; it takes the "
              "options of `llamay ray` (llamay ray --help)", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    return ["ray", *rest]


SERVER_PROGRAM = "llamay-server"  # run under this name, the program serves: `llamay-server -m M` is `llamay serve -m M`


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Run a command line (default sys.argv); called as `llamay-server` (argv[0], or `prog`) it is `llamay serve`."""
    if argv is None:
        argv, prog = sys.argv[1:], sys.argv[0] if prog is None else prog
    if prog is not None and Path(prog).name.removesuffix(".exe") == SERVER_PROGRAM:
        argv = ["serve", *argv]
    parser = build_parser()
    if argv[:1] == ["serve"] and "--ray" in argv:
        argv = serve_on_ray(parser, argv)
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except LlamayError as e:
        print(f"llamay {args.command}: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `llamay info ... | head`: the reader went away, which is not an error of ours
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
