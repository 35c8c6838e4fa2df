"""What a stored model is beside its GGUF: the layers of its manifest read into one object, and written from it.

`Layers` holds a TEMPLATE (Go, as Ollama keeps it), a SYSTEM prompt, PARAMETERs (Ollama's option names and
types), LICENSEs and preset MESSAGEs. Reading refuses nothing a store may hold (a damaged layer is a BlobError
naming its blob); writing makes each one a blob the way Ollama's `create` does (text as is, parameters and
messages as Go's JSON), so the same Modelfile gives the same digests in both stores.
"""

from __future__ import annotations

import platform
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llamay.errors import LlamayError
from llamay.model_card import parameter_size

from . import gojson
from .blobs import write_bytes
from .manifests import CONFIG, LICENSE, MESSAGES, MODEL, PARAMS, SYSTEM, TEMPLATE, Layer, Manifest, Store

GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
ROLES = ("system", "user", "assistant", "tool")


@dataclass
class Layers:
    template: str | None = None
    system: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    licenses: list[str] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)


def read_layers(store: Store, m: Manifest) -> Layers:
    out = Layers()
    if (x := m.first(TEMPLATE)) is not None:
        out.template = store.read_text(x)
    if (x := m.first(SYSTEM)) is not None:
        out.system = store.read_text(x)
    if (x := m.first(PARAMS)) is not None:
        params = store.read_json(x)
        if not isinstance(params, dict):
            raise LlamayError(f"{store.blob(x.digest)}: a params layer is a JSON object, not {type(params).__name__}")
        out.parameters = params
    out.licenses = [store.read_text(x) for x in m.all(LICENSE)]
    if (x := m.first(MESSAGES)) is not None:
        msgs = store.read_json(x)
        ok = isinstance(msgs, list) and all(isinstance(d, dict) and d.get("role") in ROLES for d in msgs)
        if not ok:
            raise LlamayError(f"{store.blob(x.digest)}: a messages layer is a list of {{role, content}} objects")
        out.messages = [{"role": d["role"], "content": str(d.get("content") or "")} for d in msgs]
    return out


def layer_blobs(store: Store, layers: Layers) -> list[Layer]:
    """Blobs for every layer `layers` has (in the order Ollama's create appends them)."""
    out = []

    def add(media: str, data: bytes) -> None:
        out.append(Layer(media, f"sha256:{write_bytes(store.blobs, data)}", len(data)))

    if layers.template is not None:
        add(TEMPLATE, layers.template.encode())
    if layers.system:
        add(SYSTEM, layers.system.encode())
    for lic in layers.licenses:
        add(LICENSE, lic.encode())
    if layers.parameters:
        add(PARAMS, gojson.dumps(dict(sorted(layers.parameters.items()))))
    if layers.messages:
        add(MESSAGES, gojson.dumps([{"role": d["role"], "content": d["content"]} for d in layers.messages]))
    return out


def config_blob(store: Store, gguf: Path) -> Layer:
    """The config blob Ollama writes beside a GGUF: format, family, parameter size, quantisation, platform."""
    from llamay.gguf import open_gguf

    try:
        with open_gguf(gguf) as f:
            arch = f.architecture
            n_params = sum(t.n_elements for t in f.tensors.values())
            by_bytes: Counter[str] = Counter()
            for t in f.tensors.values():
                by_bytes[t.type.name] += t.nbytes
    except OSError as e:
        raise LlamayError(f"{gguf}: cannot read it: {e.strerror}") from None
    quant = by_bytes.most_common(1)[0][0] if by_bytes else "unknown"
    machine = platform.machine().lower()
    config = {"model_format": "gguf", "model_family": arch, "model_families": [arch],
              "model_type": parameter_size(n_params), "file_type": quant,
              "architecture": GOARCH.get(machine, machine), "os": "linux"}  # fmt: skip
    data = gojson.dumps(config)
    return Layer(CONFIG, f"sha256:{write_bytes(store.blobs, data)}", len(data))


def manifest_of(store: Store, models: tuple[Layer, ...], layers: Layers) -> Manifest:
    """The manifest of a model whose GGUF is `models` (one blob, or a split model's shards in order)."""
    from .shards import view

    first = view(store.root, [store.blob(m.digest) for m in models])
    return Manifest(config_blob(store, first), (*models, *layer_blobs(store, layers)))


def model_layer(m: Manifest, where: str) -> Layer:
    layer = m.first(MODEL)
    if layer is None:
        raise LlamayError(f"{where} has no model layer ({MODEL}): nothing to run")
    return layer
