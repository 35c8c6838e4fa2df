"""One HTTP request run through an in-process ASGI app (the replica's llamay server), its response yielded as
a head (status, headers) and then body chunks as the app writes them: streaming (SSE, NDJSON) is kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any


async def run_asgi(app: Any, req: dict[str, Any]) -> AsyncIterator[Any]:
    """`req`: method, path, query (bytes), headers (list of [name, value] bytes), body (bytes). Yields
    {"status", "headers"} once, then bytes. Closing the iterator (the client went away) disconnects the app."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": req["method"],
             "scheme": "http", "path": req["path"], "raw_path": req["path"].encode(), "query_string": req["query"],
             "root_path": "", "headers": [(bytes(k), bytes(v)) for k, v in req["headers"]],
             "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 80)}  # fmt: skip
    out: asyncio.Queue[Any] = asyncio.Queue()
    gone = asyncio.Event()
    sent_body = False

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": req["body"], "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        await out.put(message)

    async def serve() -> None:
        try:
            await app(scope, receive, send)
        finally:
            await out.put(None)

    task = asyncio.get_running_loop().create_task(serve())
    try:
        while (m := await out.get()) is not None:
            if m["type"] == "http.response.start":
                yield {"status": m["status"], "headers": [(bytes(k), bytes(v)) for k, v in m.get("headers", [])]}
            elif m["type"] == "http.response.body":
                if m.get("body"):
                    yield bytes(m["body"])
                if not m.get("more_body", False):
                    break
        await task
    finally:
        gone.set()  # the app sees the client leave: its stream ends and releases what it holds
        if not task.done():
            await asyncio.wait([task], timeout=5)
