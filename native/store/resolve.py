"""What a `-m` argument names, for every command (and, later, a server answering for stored models by name).

`resolve(ref)` looks, in this order:
  1. no `-m`: the default catalogue model (pulled on first use);
  2. an existing file: that GGUF (a path that looks like one, `./x.gguf`, `/x`, `~/x`, and is missing: an error);
  3. a name in llamay's store (LLAMAY_MODELS, default ~/.cache/llamay): `smollm2`, `smollm2:latest`, `me/m:q8`;
  4. a catalogue name not yet stored: pulled into llamay's store, then 3;
  5. a name in Ollama's store (OLLAMA_MODELS, default ~/.ollama/models), read in place: the blob is memory-mapped
     where it lies, never copied.
Names follow Ollama's rules and defaults (names.py), so `llama3.2:1b` means the same in both stores; llamay's
wins when both have it. The result, `Resolved`, carries the GGUF's path and the model's layers, and applies
them to a loaded model: TEMPLATE (translated from Go to Jinja, else the GGUF's own, and it says which), SYSTEM
and MESSAGE (added to every chat), PARAMETER (`options`: the sampling defaults).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from llamay.errors import LlamayError

from . import catalogue
from .layers import Layers, model_layer, read_layers
from .manifests import MEDIA, Store, StoreError, home_store
from .names import Name
from .options import Options
from .shards import view

DEFAULT_ROOT = Path.home() / ".cache" / "llamay"
OLLAMA_DEFAULT = Path.home() / ".ollama" / "models"
ADAPTER = MEDIA + "adapter"
Log = catalogue.Log


class ModelNotFound(LlamayError):
    """A `-m` that names no file and no model of either store or the catalogue."""


def llamay_store() -> Store:
    return home_store("LLAMAY_MODELS", DEFAULT_ROOT, "llamay", writable=True)


def ollama_store() -> Store:
    return home_store("OLLAMA_MODELS", OLLAMA_DEFAULT, "Ollama", writable=False)


def stores() -> tuple[Store, Store]:
    return llamay_store(), ollama_store()


def looks_like_path(ref: str) -> bool:
    return ref.startswith(("/", "./", "../", "~", os.sep)) or ref.endswith(".gguf")


@dataclass
class Resolved:
    """A model ready to load: its GGUF (`path`) and what its manifest adds (`layers`)."""

    name: str  # as the user sees it: smollm2:latest, llama3.2:1b, or the file's path
    path: Path
    source: str  # "file", "llamay" or "Ollama"
    layers: Layers = field(default_factory=Layers)
    digest: str | None = None  # the (first) model layer's
    manifest: Path | None = None
    shards: tuple[Path, ...] = ()  # a split model's blobs, in order (`path` is then the first of their view)

    @cached_property
    def options(self) -> Options:
        return Options.from_parameters(self.layers.parameters)

    @cached_property
    def chat_template(self) -> tuple[str | None, str]:
        """(Jinja to render chats with, or None for the GGUF's own; which template it is, in words)."""
        from llamay.tokenizer.chat import ChatTemplate, ChatTemplateError
        from llamay.tokenizer.go_template import GoTemplateError
        from llamay.tokenizer.ollama_template import translate

        go = self.layers.template
        if go is None:
            return None, "the GGUF's own (tokenizer.chat_template)"
        try:
            t = translate(go, f"{self.name}'s TEMPLATE layer")
            ChatTemplate(t.jinja, name=f"{self.name}'s TEMPLATE layer")  # compiles: deep nesting fails here
        except (GoTemplateError, ChatTemplateError) as e:
            return None, f"the GGUF's own: the TEMPLATE layer could not be translated ({e})"
        form = "the whole conversation" if t.form == "messages" else "once per turn (.System/.Prompt/.Response)"
        return t.jinja, f"the TEMPLATE layer (Go), translated to Jinja ({form})"

    def apply(self, model: Any) -> None:
        """Make a loaded model's tokenizer render chats as this stored model asks."""
        from llamay.tokenizer import ChatPreset

        jinja, _which = self.chat_template
        preset = ChatPreset(self.layers.system or None, tuple(self.layers.messages))
        model.tokenizer.use_chat_template(jinja, f"{self.name}'s TEMPLATE layer", preset)

    @contextlib.contextmanager
    def held(self) -> Iterator[Path]:
        """The GGUF's path, kept from garbage collection for the block: llamay's store's lock, shared (as writers
        hold it), so `prune`, `rm` and the rest remove no blob meanwhile. Hold it while opening the file; once
        it is open (mapped) a later `rm` cannot take the bytes from under the reader (POSIX keeps an open file's
        data). Ollama's store is never collected by llamay: nothing to hold. A blob removed between resolving and
        holding is an error naming it."""
        if self.source != "llamay":
            yield self.path
            return
        with llamay_store().lock():
            for blob in self.shards or (self.path,):
                if not blob.is_file():
                    raise ModelNotFound(f"{self.name}: its model blob {blob} was removed meanwhile")
            yield self.path

    def load(self, backend: Any = None) -> Any:
        """The Model (llamay.model), its layers applied (loaded while `held`)."""
        from llamay.model import load_model

        with self.held() as path:
            model = load_model(path, backend)
        try:
            self.apply(model)
        except BaseException:
            model.close()
            raise
        return model


def from_manifest(store: Store, name: Name, path_of_manifest: Path) -> Resolved:
    m = store.read_manifest(path_of_manifest)
    where = f"{name.short} ({store.kind}'s store, {path_of_manifest})"
    if m.first(ADAPTER) is not None:
        raise LlamayError(f"{where} has a LoRA adapter layer, which llamay does not apply")
    layer = model_layer(m, where)
    blobs = [store.blob(x.digest) for x in m.all(layer.media_type)]  # several: a split model's shards, in order
    for blob in blobs:
        if not blob.is_file():
            raise LlamayError(f"{where}: its model blob {blob} is missing")
    path = view(llamay_store().root, blobs) if len(blobs) > 1 else blobs[0]
    return Resolved(name.short, path, store.kind, read_layers(store, m), layer.digest, path_of_manifest,
                    tuple(blobs) if len(blobs) > 1 else ())  # fmt: skip


def find_stored(ref: str) -> Resolved | None:
    """The model `ref` names in llamay's store, else in Ollama's, else None."""
    try:
        name = Name.parse(ref)
    except LlamayError:
        return None
    for store in stores():
        path = store.manifest_path(name)
        if path is not None:
            return from_manifest(store, name, path)
    return None


def resolve(ref: str | None, *, pull: bool = True, log: Log = print) -> Resolved:
    """What `ref` (a `-m` argument) names, in the order of this module's docstring."""
    if ref is None:
        ref = catalogue.DEFAULT_MODEL
    path = Path(ref).expanduser()
    if path.is_file():
        return Resolved(ref, path, "file")
    if looks_like_path(ref):
        raise ModelNotFound(f"no such model file: {path}")
    llamay = llamay_store()
    try:
        name = Name.parse(ref)
    except LlamayError as e:
        raise ModelNotFound(f"{ref!r} is not a file, and {e}") from None
    found = llamay.manifest_path(name)
    if found is not None:
        return from_manifest(llamay, name, found)
    e = catalogue.find(ref)
    if e is not None and pull:
        catalogue.pull(llamay, e.name, log)
        return from_manifest(llamay, e.model_name, llamay.manifests / e.model_name.path)
    ollama = ollama_store()
    found = ollama.manifest_path(name)
    if found is not None:
        return from_manifest(ollama, name, found)
    if e is not None:
        raise ModelNotFound(f"{ref} is in the catalogue but not pulled yet: `llamay pull {e.name}` fetches it")
    raise ModelNotFound(
        f"no model named {ref!r}: not a file, not in llamay's store ({llamay.root}), the catalogue "
        f"({', '.join(catalogue.CATALOGUE)}) or Ollama's store ({ollama.root}); `llamay list` shows what there is"
    )


@dataclass(frozen=True)
class Listed:
    """One line of `llamay list`."""

    name: Name
    store: Store
    manifest: Path
    digest: str  # of the manifest file (Ollama's ID)
    size: int  # bytes of its blobs
    modified: float
    problems: tuple[str, ...] = ()  # what is wrong with its blobs (missing, damaged)


def listing(verify: bool = False) -> list[Listed]:
    """Every model of llamay's store, then every one of Ollama's; `verify` hashes their blobs."""
    import hashlib

    out = []
    for store in stores():
        for name, path in store.names():
            try:
                data = path.read_bytes()
                m = store.read_manifest(path)
                problems = tuple(store.problems(m, verify))
                size = m.size
            except (StoreError, OSError) as e:
                data, problems, size = b"", (str(e),), 0
            digest = hashlib.sha256(data).hexdigest()
            out.append(Listed(name, store, path, digest, size, path.stat().st_mtime, problems))
    return out


def resolve_model(model: str | None, log: Log = print) -> Path:
    """The GGUF path a `-m` argument names (for callers that need the file only)."""
    return resolve(model, log=log).path
