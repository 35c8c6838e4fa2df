"""Split GGUF files for tests: written by gguf-py's GGUFWriter (the independent reference, natively), or by
llamay's own writer laid out the same way (under Pyodide, where gguf-py cannot run, and for broken sets)."""

from __future__ import annotations

import os
from pathlib import Path

from llamay.gguf import GGUFArray, GGUFFile, GGUFValueType, GGUFWriter, split_path

V = GGUFValueType


def _chunks(items: list, n_shards: int) -> list[list]:
    per = -(-len(items) // n_shards)
    return [items[i : i + per] for i in range(0, len(items), per)]


def split_with_gguf_py(whole: str | os.PathLike[str], prefix: str | os.PathLike[str], n_shards: int) -> list[Path]:
    """`whole` rewritten by gguf-py as shards of at most ceil(n/n_shards) tensors: `prefix`-0000i-of-0000N.gguf."""
    import gguf
    import numpy as np

    with GGUFFile.open(whole) as f:
        per = -(-len(f.tensors) // n_shards)
        w = gguf.GGUFWriter(os.fspath(prefix) + ".gguf", f.architecture, split_max_tensors=per)
        for field in f.fields.values():
            if field.key == "general.architecture":
                continue  # gguf-py's writer adds it first
            value = field.value
            if isinstance(value, GGUFArray):
                w.add_key_value(field.key, list(value), gguf.GGUFValueType.ARRAY, gguf.GGUFValueType(value.item_type))
            else:
                w.add_key_value(field.key, value, gguf.GGUFValueType(field.type))
        for t in sorted(f.tensors.values(), key=lambda t: t.index):
            row_bytes = t.nbytes // t.n_rows
            data = np.frombuffer(bytes(f.tensor_data(t)), np.uint8).reshape(*reversed(t.shape[1:]), row_bytes)
            w.add_tensor(t.name, data, raw_dtype=gguf.GGMLQuantizationType(int(t.type)))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
    paths = [Path(split_path(os.fspath(prefix), i, n_shards)) for i in range(n_shards)]
    assert all(p.exists() for p in paths), paths
    return paths


def split_shards(whole: str | os.PathLike[str], n_shards: int) -> list[GGUFWriter]:
    """The shards of `whole` as llamay writers, laid out as gguf-py lays them out: the model's metadata in the
    first, the split keys last in each, the tensors in order, at most ceil(n/n_shards) per shard."""
    with GGUFFile.open(whole) as f:
        ordered = sorted(f.tensors.values(), key=lambda t: t.index)
        tensors = [(t.name, t.type, t.shape, bytes(f.tensor_data(t))) for t in ordered]
        fields = [(fd.key, fd.value, fd.type) for fd in f.fields.values()]
    parts = _chunks(tensors, n_shards)
    writers = []
    for i, part in enumerate(parts):
        w = GGUFWriter()
        for key, value, vtype in fields if i == 0 else ():
            w.add(key, value, vtype)
        w.add("split.no", i, V.UINT16)
        w.add("split.count", len(parts), V.UINT16)
        w.add("split.tensors.count", len(tensors), V.INT32)
        for name, t, shape, data in part:
            w.add_tensor(name, t, shape, data)
        writers.append(w)
    return writers


def write_shards(writers: list[GGUFWriter], prefix: str | os.PathLike[str]) -> list[Path]:
    paths = [Path(split_path(os.fspath(prefix), i, len(writers))) for i in range(len(writers))]
    for w, p in zip(writers, paths, strict=True):
        w.write(p)
    return paths


def split_with_llamay(whole: str | os.PathLike[str], prefix: str | os.PathLike[str], n_shards: int) -> list[Path]:
    return write_shards(split_shards(whole, n_shards), prefix)
