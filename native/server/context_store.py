"""The named contexts a server holds (see `contexts.py` for what a context is and its routes)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, bad_request
from .scheduler import Pin

MAX_CONTEXTS = 64


@dataclass
class Context:
    name: str
    tokens: list[int]  # what the context stands for; its pin's KV covers a prefix-compatible run of them
    pin: Pin
    created: int

    def info(self, text: str | None = None, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"name": self.name, "n_tokens": len(self.tokens), "created": self.created, "text": text,
                "usage": usage}  # fmt: skip


class ContextStore:
    """Contexts by name (touched on the event loop only); names being created or restored are reserved."""

    def __init__(self) -> None:
        self.items: dict[str, Context] = {}
        self.busy: set[str] = set()

    def __len__(self) -> int:
        return len(self.items)

    def get(self, name: str) -> Context:
        ctx = self.items.get(name)
        if ctx is None:
            raise ApiError(404, f"no context named {name!r}", param="name", code="context_not_found")
        return ctx

    @contextlib.contextmanager
    def reserve(self, name: str, replace: bool = False) -> Iterator[None]:
        if name in self.busy or (name in self.items and not replace):
            raise ApiError(409, f"a context named {name!r} already exists", param="name", code="context_exists")
        # names being created count too: creates running at once must not pass the bound together
        if len(self.items.keys() | self.busy) >= MAX_CONTEXTS and name not in self.items:
            raise bad_request(f"the server holds at most {MAX_CONTEXTS} contexts; delete some", "name")
        self.busy.add(name)
        try:
            yield
        finally:
            self.busy.discard(name)

    def put(self, ctx: Context) -> None:
        old = self.items.get(ctx.name)
        self.items[ctx.name] = ctx
        if old is not None:
            old.pin.let_go()

    def drop(self, name: str) -> None:
        self.get(name)
        self.items.pop(name).pin.let_go()
