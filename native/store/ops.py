"""Changing llamay's store: create (from a Modelfile), import (a GGUF under a name), cp, rm, prune.

Every change writes its blobs first and its manifest last (atomically), under the store's shared lock; blobs
a change leaves unnamed (an overwritten manifest's, a removed model's) go at once if no other manifest names
them. Ollama's store is never written: a model copied or created from one of its models gets its blobs
linked (or copied) into llamay's store, checked against their digests on the way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from llamay.errors import LlamayError
from llamay.modelfile import Modelfile, parse

from .blobs import BlobError, BlobWriter, hash_file, link_in, parse_digest
from .catalogue import exit_on_fatal_signals, remove_leftovers
from .layers import Layers, manifest_of
from .manifests import MODEL, Layer, Store
from .names import Name
from .options import NO_EFFECT
from .progress import Progress
from .resolve import find_stored, llamay_store, ollama_store, resolve
from .shards import remove_dangling

Log = Callable[[str], object]
GGUF_MAGIC = b"GGUF"


def import_gguf(store: Store, path: Path) -> tuple[Layer, ...]:
    """`path` (a GGUF, or the first shard of a split one) as model blobs, one per file: checked to be a GGUF whose
    header parses (a split set: every shard present and of the same model), copied while hashed."""
    from llamay.gguf import GGUFFile, open_gguf, split_count
    from llamay.gguf.split import shard_paths

    try:
        with open(path, "rb") as f:
            if f.read(len(GGUF_MAGIC)) != GGUF_MAGIC:
                raise LlamayError(f"{path}: not a GGUF file (it does not start with {GGUF_MAGIC!r})")
        with GGUFFile.open(path) as g:  # a header that does not parse is refused here, by name
            files = [Path(p) for p in shard_paths(g)] if split_count(g) > 1 else [path]
        if len(files) > 1:
            with open_gguf(path):  # every shard there, each of this model, in its place (named if not)
                pass
        return tuple(_copy_in(store, f) for f in files)
    except OSError as e:
        raise LlamayError(f"{path}: cannot read it: {e.strerror}") from None


def _copy_in(store: Store, path: Path) -> Layer:
    size = path.stat().st_size
    with open(path, "rb") as src, BlobWriter(store.blobs) as w:
        bar = Progress(f"copying {path.name}", size)
        try:
            w.copy_from(src, bar)
        finally:
            bar.close()
        digest = w.finish()
    return Layer(MODEL, f"sha256:{digest}", size)


def stored_gguf(store: Store, digest: str) -> Layer:
    """The model layer of a blob already in the store: it must be there, and a whole GGUF whose header parses."""
    from llamay.gguf import GGUFFile, split_count

    path = store.blob(f"sha256:{parse_digest(digest)}")
    if not path.is_file():
        raise BlobError(f"no blob {digest} in llamay's store ({store.blobs}): upload it first (POST /api/blobs/...)")
    with open(path, "rb") as f:
        if f.read(len(GGUF_MAGIC)) != GGUF_MAGIC:
            raise LlamayError(f"blob {digest}: not a GGUF file (it does not start with {GGUF_MAGIC!r})")
    with GGUFFile.open(path) as g:
        if split_count(g) > 1:
            raise LlamayError(f"blob {digest}: one shard of a split GGUF model (key 'split.count'): merge it first")
    return Layer(MODEL, f"sha256:{parse_digest(digest)}", path.stat().st_size)


def bring_blob(store: Store, other: Store, layer: Layer) -> None:
    """`layer`'s blob from another store into `store`: hashed (it must be its digest), linked or copied."""
    if store.blob(layer.digest).is_file():
        return
    src = other.blob(layer.digest)
    hexa = parse_digest(layer.digest)
    if hash_file(src) != hexa:
        raise BlobError(f"{src}: its bytes are not its digest {layer.digest} (damaged)")
    if not link_in(store.blobs, src, hexa):
        with open(src, "rb") as f, BlobWriter(store.blobs, expect=hexa) as w:
            w.copy_from(f)
            w.finish()


def base_of(store: Store, mf: Modelfile, folder: Path | None, log: Log) -> tuple[tuple[Layer, ...], Layers]:
    """FROM: a GGUF file (relative to the Modelfile's folder) imported, or a stored model's model layers (a split
    model's shards) and other layers; `folder` None: a stored model only (a server's clients name no files)."""
    if folder is None:
        found = find_stored(mf.base)
        if found is None:
            raise LlamayError(f"from: no stored model is named {mf.base!r} (a GGUF is uploaded: POST /api/blobs, "
                              "then `files`)")  # fmt: skip
    else:
        path = Path(mf.base).expanduser()
        path = path if path.is_absolute() else folder / path
        if path.is_file():
            return import_gguf(store, path), Layers()
    try:
        base = resolve(mf.base, log=log) if folder is not None else found
    except LlamayError as e:
        raise LlamayError(f"FROM {mf.base}: {e}") from None
    if base.source == "file":
        return import_gguf(store, base.path), Layers()
    assert base.manifest is not None
    other = store if base.source == store.kind else ollama_store()
    models = tuple(other.read_manifest(base.manifest).all(MODEL))
    if other is not store:
        for layer in models:
            bring_blob(store, other, layer)
    return models, base.layers


def merged(base: Layers, mf: Modelfile) -> Layers:
    """Ollama's rules: TEMPLATE and SYSTEM replace the base's, PARAMETERs override it name by name, LICENSEs add
    to it, MESSAGEs replace it (when given)."""
    return Layers(
        template=mf.template if mf.template is not None else base.template,
        system=mf.system if mf.system is not None else base.system,
        parameters={**base.parameters, **mf.parameters},
        licenses=[*base.licenses, *mf.licenses],
        messages=list(mf.messages) if mf.messages else list(base.messages),
    )


def warnings(layers: Layers) -> list[str]:
    """What llamay will not do of what the layers ask (said at create time, and by `show`)."""
    from llamay.tokenizer.chat import ChatTemplate, ChatTemplateError
    from llamay.tokenizer.go_template import GoTemplateError, UnsupportedTemplate
    from llamay.tokenizer.ollama_template import translate

    out = [f"PARAMETER {k} has no effect in llamay: {why}" for k, why in NO_EFFECT.items() if k in layers.parameters]
    if layers.template is not None:
        try:
            ChatTemplate(translate(layers.template, "TEMPLATE").jinja, name="TEMPLATE")
        except UnsupportedTemplate as e:
            out.append(f"llamay will use the GGUF's own template: {e}")
        except (GoTemplateError, ChatTemplateError) as e:
            raise LlamayError(f"the TEMPLATE is not a valid Go template: {e}") from None
    return out


def create(name: str, text: str, folder: Path, log: Log = print) -> Path:
    """The model `name` built from a Modelfile's text (FROM relative to `folder`); its manifest's path."""
    return build(name, parse(text), folder, log)


def build(name: str, mf: Modelfile, folder: Path | None, log: Log = print, model_blob: str | None = None) -> Path:
    """The model `name` built from a Modelfile (FROM relative to `folder`; None: FROM a stored model only), or
    with `model_blob` (a digest) as its GGUF: a blob already in the store (uploaded), checked to be a whole GGUF;
    its manifest's path."""
    target = Name.parse(name)
    store = llamay_store()
    store.clean()
    with exit_on_fatal_signals(), store.lock():  # SIGTERM or SIGHUP: temporary files go, as on any error
        if model_blob is not None:
            models, base = (stored_gguf(store, model_blob),), Layers()
        else:
            models, base = base_of(store, mf, folder, log)
        layers = merged(base, mf)
        for w in warnings(layers):
            log(f"llamay: warning: {w}")
        path = store.write_manifest(target, manifest_of(store, models, layers))
    prune(store, log, quiet=True)
    log(f"llamay: created {target.short}")
    return path


def copy(src: str, dst: str, log: Log = print) -> Path:
    """`dst` naming what `src` names (a stored model of either store); its manifest's path."""
    target = Name.parse(dst)
    store = llamay_store()
    origin = resolve(src, pull=False, log=log)
    if origin.manifest is None:
        raise LlamayError(f"{src} is a file, not a stored model: `llamay import {src} {dst}` stores it")
    store.clean()
    with exit_on_fatal_signals(), store.lock():
        other = store if origin.source == store.kind else ollama_store()
        m = other.read_manifest(origin.manifest)
        if other is not store:
            for layer in (m.config, *m.layers):
                bring_blob(store, other, layer)
        path = store.write_manifest(target, m)
    prune(store, log, quiet=True)
    log(f"llamay: copied {origin.name} to {target.short}")
    return path


def remove(name: str, log: Log = print) -> None:
    store = llamay_store()
    n = Name.parse(name)
    path = store.manifest_path(n)
    if path is None:
        theirs = ollama_store().manifest_path(n)
        if theirs is not None:
            raise LlamayError(f"{n.short} is in Ollama's store ({theirs}): llamay does not change it (ollama rm)")
        raise LlamayError(f"no model named {n.short} in llamay's store ({store.root}); `llamay list` shows them")
    store.remove_manifest(path)
    log(f"llamay: deleted {n.short}")
    prune(store, log, quiet=True)


def prune(store: Store, log: Log = print, quiet: bool = False) -> int:
    """Remove the blobs no manifest names, and what killed pulls left; how many blobs."""
    remove_leftovers(store.root, log)
    removed, done = store.gc()
    remove_dangling(store.root)  # the split models' views whose shards went
    if removed and not quiet:
        log(f"llamay: removed {len(removed)} unused blob(s) from {store.blobs}")
    if not done:
        log(
            "llamay: another llamay is writing to the store or loading a model: unused blobs are kept until the next "
            "prune"
        )
    return len(removed)
