"""Small GGUF files built in memory for reader tests."""

from __future__ import annotations

import struct

from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFArray, GGUFValueType, GGUFWriter

V = GGUFValueType


def tiny_gguf(alignment: int | None = None, version: int = 3) -> bytes:
    """A valid file with every metadata value type, a nested array and two tensors."""
    w = GGUFWriter(alignment=alignment, version=version)
    w.add("general.architecture", "llama")
    w.add("t.u8", 200, V.UINT8)
    w.add("t.i8", -5, V.INT8)
    w.add("t.u16", 60000, V.UINT16)
    w.add("t.i16", -30000, V.INT16)
    w.add("t.u32", 4_000_000_000, V.UINT32)
    w.add("t.i32", -2_000_000_000, V.INT32)
    w.add("t.f32", 1.5, V.FLOAT32)
    w.add("t.bool", True, V.BOOL)
    w.add("t.str", "héllo ☃")
    w.add("t.u64", 2**63 + 7, V.UINT64)
    w.add("t.i64", -(2**62), V.INT64)
    w.add("t.f64", 0.1, V.FLOAT64)
    w.add("t.arr_i32", GGUFArray(V.INT32, [1, -2, 3]))
    w.add("t.arr_str", GGUFArray(V.STRING, ["a", "", "ccc"]))
    w.add("t.arr_bool", GGUFArray(V.BOOL, [True, False, True]))
    w.add("t.nested", GGUFArray(V.ARRAY, [GGUFArray(V.UINT8, [1, 2]), GGUFArray(V.UINT8, [])]))
    w.add("t.empty", GGUFArray(V.FLOAT32, []))
    w.add_tensor("a.weight", GGMLType.F32, (4, 2), struct.pack("<8f", *range(8)))
    w.add_tensor("b.weight", GGMLType.Q8_0, (32,), b"\x00\x3c" + bytes(range(32)))
    return w.to_bytes()


def header_end(data: bytes) -> int:
    """Offset where the tensor data section starts (end of the parsed header, aligned)."""
    from llamay.gguf import GGUFFile

    return GGUFFile.from_buffer(data).data_offset
