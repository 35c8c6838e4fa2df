"""Model names as Ollama parses them (types/model/name.go): `[host/][namespace/]model[:tag]`.

The defaults are Ollama's (host registry.ollama.ai, namespace library, tag latest), so a name means the same
manifest path in llamay's store and in Ollama's: manifests/<host>/<namespace>/<model>/<tag>. Each part is
1-80 characters (a host up to 350) of letters, digits, `_`, `-` and `.`, starting with a letter, digit or `_`
(no `.` in a namespace; `:` only in a host, for its port). Names compare without regard to case.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llamay.errors import LlamayError

DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
PART_LIMITS = {"host": 350, "namespace": 80, "model": 80, "tag": 80}
WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class NameError_(LlamayError):
    """A string that is not a valid model name (which part, and why)."""


def _valid(kind: str, s: str) -> str | None:
    """Why `s` is not a valid `kind` part, or None."""
    if not 1 <= len(s) <= PART_LIMITS[kind]:
        return f"its {kind} must have 1 to {PART_LIMITS[kind]} characters"
    if s[0] not in WORD:
        return f"its {kind} {s!r} must start with a letter, digit or _"
    for ch in s[1:]:
        if ch in WORD or ch in "_-" or (ch == "." and kind != "namespace") or (ch == ":" and kind == "host"):
            continue
        return f"its {kind} {s!r} may not contain {ch!r}"
    return None


@dataclass(frozen=True)
class Name:
    host: str
    namespace: str
    model: str
    tag: str

    @classmethod
    def parse(cls, s: str) -> Name:
        """`s` with Ollama's defaults filled in; NameError_ says which part is invalid."""
        rest, tag = s, DEFAULT_TAG
        if rest.rfind(":") > rest.rfind("/"):
            rest, tag = rest.rsplit(":", 1)
        parts = rest.split("/")
        if len(parts) > 3:
            raise NameError_(f"{s!r} is not a model name: at most host/namespace/model[:tag]")
        host, namespace = DEFAULT_HOST, DEFAULT_NAMESPACE
        if len(parts) == 3:
            host, namespace, model = parts
            host = host.split("://", 1)[-1]
        elif len(parts) == 2:
            namespace, model = parts
        else:
            (model,) = parts
        name = cls(host, namespace, model, tag)
        for kind in ("host", "namespace", "model", "tag"):
            why = _valid(kind, getattr(name, kind))
            if why:
                raise NameError_(f"{s!r} is not a model name: {why}")
        return name

    @property
    def path(self) -> Path:
        """Where its manifest lies under manifests/."""
        return Path(self.host, self.namespace, self.model, self.tag)

    @property
    def short(self) -> str:
        """Ollama's shortest display: the defaults left out (the tag always shown)."""
        if self.host.lower() != DEFAULT_HOST:
            return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"
        if self.namespace.lower() != DEFAULT_NAMESPACE:
            return f"{self.namespace}/{self.model}:{self.tag}"
        return f"{self.model}:{self.tag}"

    def __str__(self) -> str:
        return f"{self.host}/{self.namespace}/{self.model}:{self.tag}"

    def folded(self) -> tuple[str, ...]:
        return (self.host.lower(), self.namespace.lower(), self.model.lower(), self.tag.lower())
