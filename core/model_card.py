"""What `llamay info` reports about a GGUF file, as plain data (the CLI formats it as text or JSON)."""

from __future__ import annotations

from collections import Counter
from enum import Enum
from typing import Any

from .arch import bind_weights, get_architecture
from .errors import LlamayError
from .gguf import GGUFFile, Keys
from .gguf.constants import FILE_TYPE_GUESSED, FILE_TYPES
from .gguf.reader import GGUFArray
from .tokenizer.vocab import check_vocab

TOKENIZER_KINDS = {
    "gpt2": "byte-level BPE (GPT-2 style)",
    "llama": "SentencePiece BPE with byte fallback",
    "bert": "WordPiece (BERT)",
    "t5": "SentencePiece unigram",
    "rwkv": "RWKV trie",
    "plamo2": "PLaMo-2 (Aho-Corasick)",
    "none": "none",
}
ARRAY_PREVIEW = 4  # items shown of a long metadata array


def summarise_value(value: Any, max_str: int = 120) -> Any:
    """A metadata value made short enough to print: long arrays keep their type, count and a few items."""
    if isinstance(value, GGUFArray):
        if len(value) <= ARRAY_PREVIEW * 2:
            return [summarise_value(v, max_str) for v in value]
        head = [summarise_value(v, 40) for v in value[:ARRAY_PREVIEW]]
        return {"type": value.item_type.name, "count": len(value), "first": head}
    if isinstance(value, str) and len(value) > max_str:
        return value[:max_str] + f"... ({len(value)} chars)"
    return value


def tensor_audit(f: GGUFFile) -> dict[str, Any]:
    """Bind the file's weights as its architecture would (the checks of a load: hyper-parameters, layers against
    the block count, shapes, the vocabulary) and list every tensor left unread."""
    if not f.tensors:
        return {"status": "vocab-only", "message": "no tensors: a vocabulary-only file", "unread": []}
    try:
        cfg, _weights, binder = bind_weights(f)
        check_vocab(f)
    except LlamayError as e:
        return {"status": "refused", "message": str(e), "unread": []}
    unread = [t.name for t in binder.unread()]
    status = "clean" if not unread else "unread-tensors"
    message = (
        f"all {len(binder.read)} tensors are bound by {cfg.arch!r}"
        if not unread
        else f"{len(unread)} of {len(f.tensors)} tensors would go unread by {cfg.arch!r} (a load refuses the file)"
    )
    return {"status": status, "message": message, "bound": len(binder.read), "unread": unread}


IDENTITY_KEYS = ("general.basename", "general.name")  # what a model calls itself, most specific first


def identity(f: GGUFFile) -> dict[str, str]:
    """What the model identifies itself as when `general.architecture` names only the block it runs on
    (`llama` for Mistral, TinyLlama, Falcon3): `general.basename` or `general.name`, unless it starts with the
    architecture's name (Llama 3.2 on `llama`, Qwen2.5 on `qwen2`)."""
    arch = (f.architecture or "").lower()
    for key in IDENTITY_KEYS:
        value = f.get(key)
        if isinstance(value, str) and value.strip():
            if arch and value.lower().replace("-", "").replace(" ", "").startswith(arch.replace("-", "")):
                return {}
            return {"identifies_as": value.strip(), "identified_by": key}
    return {}


def describe(f: GGUFFile) -> dict[str, Any]:
    arch_name = f.architecture
    try:
        arch = get_architecture(arch_name)
        arch_info: dict[str, Any] = {"name": arch_name, "supported": True, "summary": arch.summary}
        try:
            cfg = arch.config(f, arch_name)
            arch_info["hyperparameters"] = _jsonable(cfg.as_dict())
        except LlamayError as e:
            arch_info["error"] = str(e)
    except LlamayError as e:
        arch_info = {"name": arch_name, "supported": False, "error": str(e)}
    arch_info.update(identity(f))
    tok_model = f.get(Keys.TOKENIZER_MODEL)
    tokens = f.get(Keys.TOKENS)
    by_type = Counter(t.type.name for t in f.tensors.values())
    split = hasattr(f, "shards")
    return {
        "file": f.name,
        "size": f.size,
        **({"shards": [s.name for s in f.shards]} if split else {}),  # a split model's files, in order
        "gguf_version": f.version,
        "alignment": f.alignment,
        "data_offset": f.data_offset,
        "architecture": arch_info,
        "tokenizer": {
            "model": tok_model,
            "kind": TOKENIZER_KINDS.get(tok_model, "unknown") if tok_model else None,
            "pre": f.get(Keys.TOKENIZER_PRE),
            "tokens": len(tokens) if tokens is not None else 0,
            "chat_template": f.get(Keys.CHAT_TEMPLATE) is not None,
        },
        "metadata": {k: {"type": fld.type.name, "value": summarise_value(fld.value)} for k, fld in f.fields.items()},
        "tensors": [
            {"name": t.name, "type": t.type.name, "shape": list(t.shape), "bytes": t.nbytes, "offset": t.data_start}
            | ({"shard": t.shard} if split else {})  # the offset is within that shard
            for t in sorted(f.tensors.values(), key=lambda t: t.index)
        ],
        "tensor_types": dict(sorted(by_type.items())),
        "tensor_bytes": sum(t.nbytes for t in f.tensors.values()),
        "audit": tensor_audit(f),
    }


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Enum):
        return v.value
    return v


def parameter_size(n: int) -> str:
    """A parameter count as Ollama shows it: 135M, 1.2B, 260K."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}".replace(".0", "")
    return str(n)


def summary(f: GGUFFile) -> dict[str, Any]:
    """What a model is, in a line a model picker shows: architecture, parameter count, the quantisation
    (`general.file_type` by llama.cpp's name; without it, the tensor type holding the most bytes), the trained
    context, and its kind: "chat" (a chat template), "text" (a decoder without one: it continues text) or
    "embedding" (an encoder)."""
    arch_name = f.architecture
    n_params = sum(t.n_elements for t in f.tensors.values())
    by_bytes: Counter[str] = Counter()
    for t in f.tensors.values():
        by_bytes[t.type.name] += t.nbytes
    out: dict[str, Any] = {
        "title": f.get(Keys.NAME),
        "architecture": arch_name,
        "supported": True,
        "parameters": n_params,
        "parameter_size": parameter_size(n_params),
        "quantization": quantization(f.get(Keys.FILE_TYPE), by_bytes),
        "context_length": None,
        "kind": "chat" if f.get(Keys.CHAT_TEMPLATE) is not None else "text",
    }
    try:
        cfg = get_architecture(arch_name).config(f, arch_name)
    except LlamayError as e:
        return out | {"supported": False, "error": str(e)}
    out["context_length"] = cfg.n_ctx_train
    if not cfg.causal:
        out["kind"] = "embedding"
    return out


def quantization(file_type: Any, by_bytes: Counter[str]) -> str | None:
    """The name of a file's quantisation: its `general.file_type`, else its commonest tensor type by bytes."""
    if isinstance(file_type, int):
        name = FILE_TYPES.get(file_type & ~FILE_TYPE_GUESSED)
        if name is not None:
            return name
    return by_bytes.most_common(1)[0][0] if by_bytes else None
