"""Where each field of a GGUF file lies: a walk over a valid file's bytes, written apart from the reader under
test, that names every header field, key, value, array count and tensor-index entry with its byte span (so the
fuzzer can aim its mutations at one field of one kind)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from llamay.gguf.constants import SCALAR_FORMAT, GGUFValueType

V = GGUFValueType
SPANS_PER_ARRAY = 32  # items listed at each end of an array (the vocabularies hold 100,000s)


@dataclass(frozen=True)
class Span:
    start: int
    size: int
    kind: str  # magic, version, n_tensors, n_kv, str_len, str, vtype, scalar, arr_type, arr_count, n_dims, dim,
    # ggml_type, offset, data
    label: str  # the key or tensor it belongs to
    vtype: GGUFValueType | None = None  # of a scalar value


@dataclass
class Layout:
    spans: list[Span]
    alignment: int
    data_start: int
    tensors: list[tuple[str, int, int]]  # (name, index entry start, its type-field start), in index order

    def of(self, *kinds: str) -> list[Span]:
        return [s for s in self.spans if s.kind in kinds]


class _Walk:
    def __init__(self, data: bytes) -> None:
        self.d = data
        self.pos = 0
        self.spans: list[Span] = []

    def take(self, fmt: str, kind: str, label: str, vtype: GGUFValueType | None = None) -> int | float:
        n = struct.calcsize("<" + fmt)
        (v,) = struct.unpack_from("<" + fmt, self.d, self.pos)
        self.spans.append(Span(self.pos, n, kind, label, vtype))
        self.pos += n
        return v

    def string(self, label: str) -> str:
        n = self.take("Q", "str_len", label)
        self.spans.append(Span(self.pos, n, "str", label))
        s = self.d[self.pos : self.pos + n].decode("utf-8", "surrogateescape")
        self.pos += n
        return s

    def value(self, vtype: GGUFValueType, label: str) -> object:
        if vtype == V.STRING:
            return self.string(label)
        if vtype == V.ARRAY:
            item = V(self.take("I", "arr_type", label))
            count = self.take("Q", "arr_count", label)
            values = []
            for i in range(count):
                n = len(self.spans)
                values.append(self.value(item, label))
                if SPANS_PER_ARRAY <= i < count - SPANS_PER_ARRAY:
                    del self.spans[n:]  # the middle of a long array: walked, not listed
            return values
        return self.take(SCALAR_FORMAT[vtype], "scalar", label, vtype)


def layout(data: bytes) -> Layout:
    """The spans of a valid GGUF file."""
    w = _Walk(data)
    w.take("4s", "magic", "header")
    w.take("I", "version", "header")
    n_tensors = w.take("Q", "n_tensors", "header")
    n_kv = w.take("Q", "n_kv", "header")
    alignment = 32
    for _ in range(n_kv):
        key = w.string("key")
        vtype = V(w.take("I", "vtype", key))
        value = w.value(vtype, key)
        if key == "general.alignment":
            alignment = value
    tensors = []
    for _ in range(n_tensors):
        at = w.pos
        name = w.string("tensor")
        n_dims = w.take("I", "n_dims", name)
        for _ in range(n_dims):
            w.take("Q", "dim", name)
        type_at = w.pos
        w.take("I", "ggml_type", name)
        w.take("Q", "offset", name)
        tensors.append((name, at, type_at))
    data_start = (w.pos + alignment - 1) // alignment * alignment
    if n_tensors:
        w.spans.append(Span(data_start, len(data) - data_start, "data", "data"))
    return Layout(w.spans, alignment, data_start, tensors)
