"""/api/show of a stored model, read from its store (it need not be loaded): its layers (license, template,
system prompt, parameters, messages), the Modelfile they make, the details of its config blob and its GGUF's
metadata as `model_info` (arrays of more than five items shown empty unless `verbose`, as Ollama does)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from llamay.errors import LlamayError

from .errors import ApiError

SHORT_ARRAY = 5  # longer metadata arrays (the vocabulary, merges) are shown as [] without `verbose`


def stored_show(name: str, verbose: bool) -> dict[str, Any] | None:
    """The show answer of stored model `name`, or None when neither store has it (blocking: on a thread)."""
    from llamay.gguf import Keys, open_gguf
    from llamay.native.commands.show import modelfile, param_lines
    from llamay.native.store.resolve import find_stored

    try:
        r = find_stored(name)
        if r is None:
            return None
        with open_gguf(r.path) as f:
            meta = f.metadata
    except (LlamayError, OSError) as e:
        raise ApiError(500, f"{name}: {e}", param="model", code="model_unreadable") from None
    info = {k: ([] if isinstance(v, list) and len(v) > SHORT_ARRAY and not verbose else v) for k, v in meta.items()}
    info = {k: v for k, v in info.items() if not isinstance(v, bytes)}
    layers = r.layers
    template = layers.template if layers.template is not None else meta.get(Keys.CHAT_TEMPLATE) or ""
    caps = ["completion", "tools"]  # every model calls tools: its template's syntax, else the generic format
    out: dict[str, Any] = {
        "license": "\n".join(layers.licenses),
        "modelfile": modelfile(r),
        "parameters": "\n".join(param_lines(layers.parameters)),
        "template": template,
        "details": _details(r),
        "model_info": info,
        "capabilities": caps,
        "modified_at": datetime.fromtimestamp(r.manifest.stat().st_mtime, UTC).isoformat().replace("+00:00", "Z"),
        "llamay": {"chat_template": r.chat_template[1], "store": r.source},
    }
    if layers.system:
        out["system"] = layers.system
    if layers.messages:
        out["messages"] = layers.messages
    return out


def _details(r: Any) -> dict[str, Any]:
    from llamay.native.store.resolve import llamay_store, ollama_store

    return config_details(llamay_store() if r.source == "llamay" else ollama_store(), r.manifest)


def config_details(store: Any, manifest: Any) -> dict[str, Any]:
    """Ollama's `details` of a stored model, from its config blob (left empty where it says nothing)."""
    from llamay.native.store.manifests import StoreError

    d: dict[str, Any] = {"parent_model": "", "format": "gguf", "family": "", "families": None, "parameter_size": "",
                         "quantization_level": ""}  # fmt: skip
    try:
        config = json.loads(store.read_blob(store.read_manifest(manifest).config))
    except (StoreError, OSError, ValueError):
        return d
    if isinstance(config, dict):
        d.update(format=config.get("model_format", "gguf"), family=config.get("model_family", ""),
                 families=config.get("model_families"), parameter_size=config.get("model_type", ""),
                 quantization_level=config.get("file_type", ""))  # fmt: skip
    return d
