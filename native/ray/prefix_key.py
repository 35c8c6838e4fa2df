"""The routing key of a request: a hash of the start of its prompt, so that requests sharing a prefix (a chat's
earlier turns, a common system prompt) get the same key. Only the first `chars` characters are read: the work is
bounded whatever the request holds, and cheap enough for the ingress's event loop."""

from __future__ import annotations

import hashlib
import json
from typing import Any

PREFIX_CHARS = 512  # about the first hundred tokens: two or three KV pages
CHAT_PATHS = ("/v1/chat/completions", "/api/chat", "/v1/responses")


def prefix_text(path: str, body: dict[str, Any], chars: int = PREFIX_CHARS) -> str | None:
    """The first `chars` characters of what the model will read first (the chat's leading messages, or the
    prompt), or None when the body has nothing to route by (a GET, a tokenize, a malformed body)."""
    if not isinstance(body, dict):
        return None
    messages = body.get("messages", body.get("input")) if path in CHAT_PATHS else None
    parts: list[str] = []
    size = 0
    if isinstance(messages, list):
        for m in messages:
            if size >= chars:
                break
            if not isinstance(m, dict):
                return None
            content = m.get("content")
            text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)[: chars - size]
            parts.append(f"{m.get('role')}\x00{text[: chars - size]}\x00")
            size += len(parts[-1])
    else:
        prompt = body.get("prompt", body.get("content"))
        if isinstance(prompt, list):  # a batch, or token ids: the first one
            prompt = json.dumps(prompt[:chars])
        if not isinstance(prompt, str):
            return None
        parts.append(prompt[:chars])
    model = body.get("model")
    return f"{model if isinstance(model, str) else ''}\x00{''.join(parts)[:chars]}"


def prefix_key(path: str, body: dict[str, Any], chars: int = PREFIX_CHARS) -> str | None:
    """A short hex digest of `prefix_text`, or None."""
    text = prefix_text(path, body, chars)
    return None if text is None else hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
