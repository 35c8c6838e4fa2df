"""Block structs of ggml (`ggml-common.h`) as named fields: their struct codes, offsets and size.

A `Block` is declared field by field, in storage order, with `struct` codes: `Block(GGMLType.Q4_K, d="e",
dmin="e", scales="12s", qs="128s")`. It knows each field's byte offset (`Q4_K.offset["qs"] == 16`), checks at
import that its size equals the type size in `ggml_types.BLOCK_LAYOUT`, and iterates the blocks of a buffer
with one compiled `struct.Struct` (all little-endian, no padding, as ggml packs them).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from ..ggml_types import GGMLType, block_size, type_size
from ..platform import LITTLE_ENDIAN

# The decoders reinterpret bytes as native arrays ('f', 'H', 'I'): GGUF is little-endian, so is every target.
if not LITTLE_ENDIAN:
    raise ImportError("llamay.quants assumes a little-endian host")


class Block:
    """One ggml block struct: named fields with struct codes, in storage order."""

    def __init__(self, ggml_type: GGMLType, **fields: str) -> None:
        self.type = ggml_type
        self.fields = dict(fields)
        self.offset: dict[str, int] = {}
        at = 0
        for name, code in fields.items():
            self.offset[name] = at
            at += struct.calcsize("<" + code)
        self.struct = struct.Struct("<" + "".join(fields.values()))
        self.size = self.struct.size
        self.elements = block_size(ggml_type)
        if self.size != type_size(ggml_type):
            raise AssertionError(f"{ggml_type.name}: fields take {self.size} bytes, ggml says {type_size(ggml_type)}")

    def iter_unpack(self, raw: bytes) -> Iterator[tuple]:
        """The fields of each block of `raw` (a whole number of blocks), in storage order."""
        return self.struct.iter_unpack(raw)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}@{self.offset[name]}" for name in self.fields)
        return f"Block({self.type.name}: {fields}; {self.size} bytes / {self.elements} elements)"
