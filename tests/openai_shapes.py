"""The shapes of OpenAI's responses, checked by the `openai` package's own types (strict pydantic validation, an
independent reference): the server (native/server/openai_routes.py, Python) and the browser's JS API
(web/src/llamay.mjs) each build these objects, on their side of the worker boundary, so one check holds both to the
same shape instead of one builder shared across two languages (docs/architecture.md, "One request-to-sampler path").
"""

from __future__ import annotations

from functools import cache
from typing import Any, Literal

import pytest

# the object field of each shape, to the openai type that describes it
_TYPES = {
    "chat.completion": ("openai.types.chat", "ChatCompletion"),
    "chat.completion.chunk": ("openai.types.chat", "ChatCompletionChunk"),
    "text_completion": ("openai.types", "Completion"),
    "embeddings": ("openai.types", "CreateEmbeddingResponse"),
    "model": ("openai.types", "Model"),
    "response": ("openai.types.responses", "Response"),
}


def check_openai_shape(obj: dict[str, Any], kind: str | None = None, *, streamed: bool = False) -> None:
    """Raise (pydantic's ValidationError, which names the field) unless `obj` validates as OpenAI's `kind`
    (default: its `object` field; an embeddings list says "list", so name it). `streamed`: a chunk of a streamed
    text completion, whose finish_reason is null until the last one (as OpenAI streams it; the SDK's Completion
    type describes only whole answers)."""
    import importlib

    pytest.importorskip("openai")
    kind = kind or obj["object"]
    if streamed and kind == "text_completion":
        _streamed_completion().model_validate(obj)
        return
    module, name = _TYPES[kind]
    getattr(importlib.import_module(module), name).model_validate(obj)


@cache
def _streamed_completion() -> type:
    """openai's Completion with each choice's finish_reason also allowed to be null (and nothing else changed)."""
    from openai.types import Completion, CompletionChoice

    class StreamedChoice(CompletionChoice):
        finish_reason: Literal["stop", "length", "content_filter"] | None

    class StreamedCompletion(Completion):
        choices: list[StreamedChoice]

    return StreamedCompletion


def check_response_event(event: dict[str, Any]) -> None:
    """Raise unless `event` validates as one of the Responses API's stream events (its `type` picks which)."""
    pytest.importorskip("openai")
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    TypeAdapter(ResponseStreamEvent).validate_python(event)
