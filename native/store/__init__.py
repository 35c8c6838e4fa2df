"""The model store: llamay's own (written) and Ollama's (read), one layout, one resolver.

    blobs.py      content-addressed blobs: written hashed, synced, renamed under their digest; stale temps
    manifests.py  a store folder: manifests (Ollama's format and paths), the lock, integrity, garbage collection
    names.py      model names, Ollama's rules and defaults
    layers.py     a manifest's layers (template, system, params, license, messages) read and written
    catalogue.py  the registry-hosted models and `pull`; the old plain-file layout adopted
    resolve.py    what `-m` names (path, stored name, Ollama name), and the models listed
    ops.py        create, import, cp, rm, prune
    options.py    PARAMETERs as llamay's sampling defaults
    progress.py   the progress bar

What a server needs to answer for stored models by name is `listing()` (every model of both stores),
`resolve(name, pull=False)` (a `Resolved`: GGUF path, layers, `options`, `chat_template`) and
`Resolved.load(backend)` (the Model, its layers applied, opened while `Resolved.held()` keeps its blob from
garbage collection); `ModelNotFound` is the unknown name.
"""

from .catalogue import CATALOGUE, DEFAULT_MODEL, CatalogueEntry, Stored, check, entry, legacy_dir, remove_leftovers
from .resolve import ModelNotFound, Resolved, listing, llamay_store, ollama_store, resolve, resolve_model


def pull(name: str, log=print, verify: bool = False):
    """The GGUF of catalogue model `name` in llamay's store (fetched first if needed): its blob's path."""
    from .catalogue import pull as _pull

    return _pull(llamay_store(), name, log, verify)


def models_dir():
    """The root of llamay's store (LLAMAY_MODELS)."""
    return llamay_store().root


def served_models() -> dict:
    """{name:tag: model blob} of every intact stored model (llamay's first, then Ollama's): what `llamay web`
    serves at /models/."""
    from .manifests import MODEL

    out = {}
    for x in listing():
        if x.problems or x.name.short in out:
            continue
        m = x.store.read_manifest(x.manifest)
        layer = m.first(MODEL)
        if layer is not None and len(m.all(MODEL)) == 1:  # a split model's shards are not one file to serve
            out[x.name.short] = x.store.blob(layer.digest)
    return out


__all__ = [
    "CATALOGUE",
    "DEFAULT_MODEL",
    "CatalogueEntry",
    "ModelNotFound",
    "Resolved",
    "Stored",
    "check",
    "entry",
    "legacy_dir",
    "listing",
    "llamay_store",
    "models_dir",
    "ollama_store",
    "pull",
    "remove_leftovers",
    "resolve",
    "resolve_model",
    "served_models",
]
