"""The routing key of a request: a hash of the start of its prompt, so that requests sharing a prefix get the
same key. A chat is keyed by its leading messages up to and including the first user message (its system prompt
and opening question): they stay the same as the chat grows, so every turn of one chat gets one key. A plain
prompt is keyed by its first `chars` characters. At most `chars` characters are read: the work is bounded
whatever the request holds, and cheap enough for the ingress's event loop."""

from __future__ import annotations

import hashlib
import json
from typing import Any

PREFIX_CHARS = 512  # about the first hundred tokens: two or three KV pages
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions", "/api/chat", "/v1/responses")
LEADING_ROLES = ("system", "developer")  # what comes before a chat's first user message


def _text(content: Any, room: int) -> str:
    if isinstance(content, str):
        return content[:room]
    return json.dumps(content, sort_keys=True)[:room]  # parts (text, images): their JSON (off the event loop)


def _leading_messages(messages: list[Any], chars: int) -> str | None:
    parts: list[str] = []
    size = 0
    for m in messages[:chars]:  # each message adds at least one character: at most `chars` of them are read
        if size >= chars:
            break
        if not isinstance(m, dict):
            return None
        role = m.get("role")
        parts.append(f"{role}\x00{_text(m.get('content'), chars - size)}\x00")
        size += len(parts[-1])
        if role not in LEADING_ROLES:
            break  # the first user message ends the chat's leading part
    return "".join(parts)


def prefix_text(path: str, body: Any, chars: int = PREFIX_CHARS) -> str | None:
    """The first `chars` characters of the request's leading part (see the module's doc), or None when the body has
    nothing to route by (a GET, a tokenize, a malformed body)."""
    if not isinstance(body, dict):
        return None
    messages = body.get("messages", body.get("input")) if path in CHAT_PATHS else None
    if isinstance(messages, list):
        text = _leading_messages(messages, chars)
        if isinstance(body.get("instructions"), str):  # /v1/responses: its system prompt
            text = f"system\x00{body['instructions'][:chars]}\x00{text or ''}"
    else:
        prompt = body.get("prompt", body.get("content", messages))
        if isinstance(prompt, list):  # a batch, or token ids: the first one
            prompt = prompt[0] if prompt and isinstance(prompt[0], str) else json.dumps(prompt[:chars])
        if not isinstance(prompt, str):
            return None
        system = body.get("system")  # Ollama's /api/generate
        text = (f"system\x00{system[:chars]}\x00" if isinstance(system, str) else "") + prompt[:chars]
    if text is None:
        return None
    model = body.get("model")
    return f"{model if isinstance(model, str) else ''}\x00{text[:chars]}"


def prefix_key(path: str, body: Any, chars: int = PREFIX_CHARS) -> str | None:
    """A short hex digest of `prefix_text`, or None."""
    text = prefix_text(path, body, chars)
    return None if text is None else hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
