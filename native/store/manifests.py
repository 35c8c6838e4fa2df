"""A store folder in Ollama's layout: `blobs/sha256-<hex>` and `manifests/<host>/<namespace>/<model>/<tag>`.

A manifest is Ollama's (a Docker image manifest, schema 2): a config blob (application/vnd.docker.container.
image.v1+json: format, family, parameter size, quantisation) and layers, each a blob with a media type: the
GGUF (application/vnd.ollama.image.model), a Go chat template (.template), a system prompt (.system), sampling
parameters as JSON (.params), licenses (.license, one layer each) and preset messages as JSON (.messages).
llamay's store (LLAMAY_MODELS) is written; Ollama's (OLLAMA_MODELS) is only read: the same code reads both.

Writers hold the store's lock shared from their first blob to their manifest; garbage collection takes it
exclusively, so it never removes a blob a manifest being written is about to name.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llamay.errors import LlamayError

from . import gojson
from .blobs import PREFIX, TEMP, BlobError, parse_digest, problem, remove_stale, write_atomic
from .names import Name

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG = "application/vnd.docker.container.image.v1+json"
MEDIA = "application/vnd.ollama.image."
KINDS = ("model", "template", "system", "params", "license", "messages")
MODEL, TEMPLATE, SYSTEM, PARAMS, LICENSE, MESSAGES = (MEDIA + k for k in KINDS)
KNOWN = (MODEL, TEMPLATE, SYSTEM, PARAMS, LICENSE, MESSAGES)
LOCK = ".lock"
MANIFEST_LIMIT = 1 << 20  # bytes a manifest may have (Ollama's are a few hundred)
TEXT_LIMIT = 16 << 20  # bytes a template, system, params, license or messages layer may have


class StoreError(LlamayError):
    """A store folder or manifest that cannot be read or written as asked (which file, and why)."""


@dataclass(frozen=True)
class Layer:
    media_type: str
    digest: str  # sha256:<hex>
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


@dataclass(frozen=True)
class Manifest:
    config: Layer
    layers: tuple[Layer, ...]

    def to_bytes(self) -> bytes:
        body = {"schemaVersion": 2, "mediaType": MANIFEST_V2, "config": self.config.to_json(),
                "layers": [x.to_json() for x in self.layers]}  # fmt: skip
        return gojson.dumps(body).rstrip(b"\n")  # Ollama marshals manifests without the newline

    @classmethod
    def from_bytes(cls, data: bytes, where: Path) -> Manifest:
        try:
            doc = json.loads(data)
            config = _layer(doc["config"])
            layers = tuple(_layer(x) for x in doc["layers"])
        except (ValueError, KeyError, TypeError) as e:
            raise StoreError(f"{where}: not a manifest ({type(e).__name__}: {e})") from None
        return cls(config, layers)

    def first(self, media_type: str) -> Layer | None:
        return next((x for x in self.layers if x.media_type == media_type), None)

    def all(self, media_type: str) -> list[Layer]:
        return [x for x in self.layers if x.media_type == media_type]

    @property
    def size(self) -> int:
        return self.config.size + sum(x.size for x in self.layers)


def _layer(d: Any) -> Layer:
    if not isinstance(d, dict) or not isinstance(d.get("size"), int) or not isinstance(d.get("mediaType"), str):
        raise TypeError(f"a layer must have mediaType, digest and size, got {d!r}"[:200])
    parse_digest(str(d.get("digest")))
    return Layer(d["mediaType"], d["digest"], d["size"])


class Store:
    """One store folder (`root`), read-only unless `writable`; `kind` names it to the user."""

    def __init__(self, root: Path, kind: str, writable: bool) -> None:
        self.root, self.kind, self.writable = Path(root), kind, writable
        self.blobs, self.manifests = self.root / "blobs", self.root / "manifests"

    # -- reading --

    def blob(self, digest: str) -> Path:
        return self.blobs / f"{PREFIX}{parse_digest(digest)}"

    def manifest_path(self, name: Name) -> Path | None:
        """The manifest file of `name`: its own path, else one whose path equals it but for case."""
        exact = self.manifests / name.path
        if exact.is_file():
            return exact
        folded = name.folded()
        return next((p for n, p in self.names() if n.folded() == folded), None)

    def names(self) -> Iterator[tuple[Name, Path]]:
        """Every (name, manifest file) in the store (files that are not four levels deep are not manifests)."""
        if not self.manifests.is_dir():
            return
        for p in sorted(self.manifests.glob("*/*/*/*")):
            if p.is_file() and not p.name.startswith((".", TEMP)):
                host, ns, model, tag = p.relative_to(self.manifests).parts
                yield Name(host, ns, model, tag), p

    def read_manifest(self, path: Path) -> Manifest:
        try:
            if path.stat().st_size > MANIFEST_LIMIT:
                raise StoreError(f"{path}: a manifest of {path.stat().st_size:,} bytes (at most {MANIFEST_LIMIT:,})")
            return Manifest.from_bytes(path.read_bytes(), path)
        except OSError as e:
            raise StoreError(f"{path}: cannot read the manifest: {e.strerror}") from None

    def read_blob(self, layer: Layer) -> bytes:
        path = self.blob(layer.digest)
        try:
            size = path.stat().st_size
            if size > TEXT_LIMIT:
                raise BlobError(f"{path}: a {layer.media_type} layer of {size:,} bytes (at most {TEXT_LIMIT:,})")
            data = path.read_bytes()
        except FileNotFoundError:
            raise BlobError(f"{path}: the blob of a {layer.media_type} layer is missing") from None
        if len(data) != layer.size:
            raise BlobError(f"{path}: {len(data):,} bytes where the manifest says {layer.size:,} (damaged)")
        return data

    def read_text(self, layer: Layer) -> str:
        try:
            return self.read_blob(layer).decode("utf-8")
        except UnicodeDecodeError as e:
            raise BlobError(f"{self.blob(layer.digest)}: not UTF-8 text at byte {e.start}") from None

    def read_json(self, layer: Layer) -> Any:
        try:
            return json.loads(self.read_blob(layer))
        except ValueError as e:
            raise BlobError(f"{self.blob(layer.digest)}: not JSON ({e})") from None

    def problems(self, m: Manifest, verify: bool = False) -> list[str]:
        """What is wrong with a manifest's blobs: missing, of another size, or (verify) of another digest."""
        out = []
        for layer in (m.config, *m.layers):
            path = self.blob(layer.digest)
            if (why := problem(path, layer.size, parse_digest(layer.digest), verify)) is not None:
                out.append(f"{path.name} ({layer.media_type}): {why}")
        return out

    # -- writing (llamay's store only) --

    def _writable(self) -> None:
        if not self.writable:
            raise StoreError(f"{self.root} is {self.kind}'s store: llamay only reads it")

    @contextlib.contextmanager
    def lock(self, exclusive: bool = False, wait: bool = True) -> Iterator[bool]:
        """The store's lock (shared: writers; exclusive: garbage collection). Yields False when `wait` is off
        and the lock is held."""
        self._writable()
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / LOCK, "a") as f:
            mode = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if wait else fcntl.LOCK_NB)
            try:
                fcntl.flock(f, mode)
            except BlockingIOError:
                yield False
                return
            yield True

    def write_manifest(self, name: Name, m: Manifest) -> Path:
        self._writable()
        for layer in (m.config, *m.layers):
            if not self.blob(layer.digest).is_file():
                raise StoreError(f"{name.short}: its {layer.media_type} blob {layer.digest} is not in the store")
        path = self.manifests / name.path
        old = self.manifest_path(name)
        write_atomic(path, m.to_bytes())
        if old is not None and old != path:  # the same name in another case: one manifest stays
            old.unlink(missing_ok=True)
        return path

    def remove_manifest(self, path: Path) -> None:
        self._writable()
        path.unlink()
        for folder in list(path.parents)[:3]:  # tag's model, namespace and host folders, once empty
            with contextlib.suppress(OSError):
                folder.rmdir()

    def clean(self) -> list[Path]:
        """Remove what killed writers left (their temporary files)."""
        if not self.writable:
            return []
        return remove_stale(self.blobs) + remove_stale(self.manifests, recursive=True)

    def gc(self) -> tuple[list[Path], bool]:
        """Remove every blob no manifest names (and stale temporary files). (removed, done): not done when a
        writer holds the store (its blobs may not be named yet); the next collection will do it."""
        with self.lock(exclusive=True, wait=False) as got:
            if not got:
                return [], False
            removed = self.clean()
            used: set[str] = set()
            for _name, path in self.names():
                try:
                    m = self.read_manifest(path)
                except StoreError:
                    return removed, False  # an unreadable manifest might name anything: remove nothing
                used.update(parse_digest(x.digest) for x in (m.config, *m.layers))
            if self.blobs.is_dir():
                for p in sorted(self.blobs.iterdir()):
                    if p.name.startswith(PREFIX) and p.name[len(PREFIX) :] not in used:
                        p.unlink()
                        removed.append(p)
            return removed, True


def home_store(env: str, default: Path, kind: str, writable: bool) -> Store:
    value = os.environ.get(env)
    return Store(Path(value).expanduser() if value else default, kind, writable)
