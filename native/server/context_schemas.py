"""Request and response models of llamay's own context and snapshot routes (`contexts.py`): a named
conversation kept on the server, forked, snapshotted to disk and restored."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from llamay.sampling.request import MAX_PREDICT as MAX_TOKENS  # a static cap; the real limit is the context

from .limits import MAX_MESSAGES
from .schemas import NAME_PATTERN, ChatMessage, Completion, Int, Sampling, Usage, _Lenient


class ContextCreate(Sampling):
    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["prompt"]}, {"required": ["messages"]}]})
    name: str = Field(pattern=NAME_PATTERN)
    prompt: str = Field(None, description="text to start from (with the model's BOS)")  # type: ignore[assignment]
    messages: list[ChatMessage] = Field(  # type: ignore[assignment]
        None, min_length=1, max_length=MAX_MESSAGES, description="or a chat, rendered with the model's template"
    )
    n: Int = Field(1, ge=1, le=1, description="a context has one continuation")
    max_tokens: Int = Field(0, ge=0, le=MAX_TOKENS, description="tokens to generate after the prompt (0: none)")


class ContextContinue(Sampling):
    prompt: str = Field("", description="text appended to the context before generating")
    n: Int = Field(1, ge=1, le=1, description="a context continues one way at a time (fork it for more)")
    max_tokens: Int | None = Field(None, ge=1, le=MAX_TOKENS)
    stream: bool = False
    update: bool = Field(True, description="the context grows by the prompt and the reply")


class ContextFork(_Lenient):
    name: str = Field(pattern=NAME_PATTERN, description="the new context's name")


class ContextRestore(_Lenient):
    snapshot: str = Field(pattern=r"^[0-9a-f]{8,64}$")


class ContextInfo(BaseModel):
    name: str
    n_tokens: int
    created: int
    text: str | None = Field(None, description="what the creating or continuing request generated")
    usage: Usage | None = None


class ContextCompletion(Completion):
    context: dict[str, Any] = Field(description="the context after this request (its name and token count)")


class ContextList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ContextInfo]


class SnapshotInfo(BaseModel):
    snapshot: str
    context: str | None = Field(description="the context it was taken of (None: unreadable here, see `error`)")
    n_tokens: int | None = Field(description="the context's tokens")
    bytes: int
    created: int
    error: str | None = Field(None, description="why the file cannot be restored here (another model or format)")


class SnapshotList(BaseModel):
    object: Literal["list"] = "list"
    data: list[SnapshotInfo]
    count: int
    bytes: int
    max_count: int = Field(description="the quota: --max-snapshots")
    max_bytes: int = Field(description="the quota: --max-snapshot-bytes")


class ContextDeleted(BaseModel):
    name: str
    deleted: Literal[True] = True


class SnapshotDeleted(BaseModel):
    snapshot: str
    deleted: Literal[True] = True
