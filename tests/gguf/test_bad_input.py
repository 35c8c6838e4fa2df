"""Malformed GGUF files: one clear GGUFError naming the problem and where, never anything else."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llamay.errors import GGUFError, LlamayError, UnsupportedTypeError
from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFFile, GGUFValueType
from tests.gguf.helpers import header_end, tiny_gguf

V = GGUFValueType


def s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, vtype: GGUFValueType, payload: bytes) -> bytes:
    return s(key) + struct.pack("<I", vtype) + payload


def tinfo(name: str, dims: tuple[int, ...], type_id: int, offset: int) -> bytes:
    return s(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, type_id, offset)


def raw(kvs: list[bytes], tensors: list[bytes] = (), data: bytes = b"", version: int = 3) -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs)) + b"".join(kvs) + b"".join(tensors)
    pad = (-len(head)) % 32 if tensors else 0
    return head + bytes(pad) + data


ARCH = kv("general.architecture", V.STRING, s("llama"))


def parse(data: bytes) -> GGUFFile:
    return GGUFFile.from_buffer(data, "bad.gguf")


def test_a_valid_raw_file_parses():
    f = parse(raw([ARCH], [tinfo("w", (8,), GGMLType.F32, 0)], bytes(32)))
    assert f.tensors["w"].nbytes == 32


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (b"", r"bad magic"),
        (b"GGML" + bytes(20), r"offset 0: bad magic b'GGML'"),
        (b"GGUF" + struct.pack("<I", 1) + bytes(16), r"unsupported GGUF version 1"),
        (b"GGUF" + struct.pack("<I", 4) + bytes(16), r"unsupported GGUF version 4"),
        (b"GGUF" + struct.pack(">I", 3) + bytes(16), r"big-endian GGUF"),
        (b"GGUF" + struct.pack("<I", 3), r"offset 8: tensor count needs 8 bytes"),
        (raw([kv("k", V.STRING, struct.pack("<Q", 1 << 40))]), r"key 'k': string length 1099511627776 runs past"),
        (raw([s("k") + struct.pack("<I", 99)]), r"key 'k': unknown metadata value type 99"),
        (
            raw([kv("k", V.ARRAY, struct.pack("<IQ", V.UINT32, 1 << 50))]),
            r"key 'k': array count 1125899906842624 runs past",
        ),
        (raw([kv("a", V.UINT8, b"\x01"), kv("a", V.UINT8, b"\x02")]), r"duplicate metadata key 'a' \(first defined"),
        (
            raw([kv("general.alignment", V.UINT32, struct.pack("<I", 48))]),
            r"'general.alignment' must be a UINT32 power",
        ),
        (raw([kv("general.alignment", V.UINT64, struct.pack("<Q", 64))]), r"must be a UINT32 power of two, got UINT64"),
        (
            raw([ARCH], [tinfo("w", (16,), GGMLType.F32, 0)], bytes(32)),
            r"tensor 'w': F32 \[16\] data \[.*\) lies outside",
        ),
        (raw([ARCH], [tinfo("w", (8,), GGMLType.F32, 64)], bytes(96)), r"tensor 'w': data offset 64, expected 0"),
        (raw([ARCH], [tinfo("w", (8,), GGMLType.F32, 4)], bytes(64)), r"tensor 'w': data offset 4 is not aligned"),
        (
            raw([ARCH], [tinfo("w", (8,), GGMLType.F32, 0), tinfo("w", (8,), GGMLType.F32, 32)], bytes(64)),
            r"tensor 'w': duplicate tensor name",
        ),
        (
            raw([ARCH], [tinfo("a", (16,), GGMLType.F32, 0), tinfo("b", (8,), GGMLType.F32, 32)], bytes(64)),
            r"tensor 'b': data offset 32 overlaps tensor 'a' \(F32 \[16\] takes 64 bytes from offset 0\); expected 64",
        ),
        (raw([ARCH], [tinfo("w", (8, 1, 1, 1, 1), GGMLType.F32, 0)], bytes(32)), r"5 dimensions"),
        (raw([ARCH], [tinfo("w", (0,), GGMLType.F32, 0)], bytes(32)), r"bad dimension 0"),
        (raw([ARCH], [tinfo("w", (16,), GGMLType.Q4_0, 0)], bytes(32)), r"not a multiple of its block size 32"),
        (raw([ARCH], [tinfo("w", (8,), GGMLType.F32, 0)]), r"lies outside the file"),
        (
            raw([ARCH], [tinfo("x" * 64, (8,), GGMLType.F32, 0)], bytes(32)),
            r"name of 64 bytes \(ggml allows at most 63",
        ),
        (
            raw([ARCH], [struct.pack("<Q", 2) + b"\xff\xfe" + struct.pack("<IQIQ", 1, 8, GGMLType.F32, 0)], bytes(32)),
            r"name of tensor 0 is not valid UTF-8 \(byte 0: b'\\xff\\xfe'\)",
        ),
        (
            raw([struct.pack("<Q", 1) + b"\xc3" + struct.pack("<IB", V.UINT8, 1)]),
            r"key of metadata entry 0 is not valid",
        ),
        (
            raw([ARCH], [tinfo("w", (1 << 32, 1 << 32), GGMLType.F32, 0)], bytes(32)),
            r"tensor 'w': shape \[4294967296, 4294967296\] holds 18446744073709551616 elements, more than ggml can",
        ),
        (b"GGUF" + struct.pack("<IQQ", 3, 1 << 40, 0), r"tensor count 1099511627776 runs past"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 40), r"metadata count 1099511627776 runs past"),
    ],
)
def test_bad_files_are_refused_with_where(data, pattern):
    with pytest.raises(GGUFError, match=pattern) as e:
        parse(data)
    assert str(e.value).startswith("bad.gguf: ")


def test_unknown_tensor_type_is_named():
    with pytest.raises(UnsupportedTypeError, match=r"tensor 'w'.*unknown ggml tensor type id 77; known types: F32=0"):
        parse(raw([ARCH], [tinfo("w", (8,), 77, 0)], bytes(32)))


def test_every_truncation_is_a_clear_error():
    data = tiny_gguf()
    full = parse(data)
    data_end = max(t.data_start + t.nbytes for t in full.tensors.values())
    for n in range(data_end):  # any cut before the last tensor byte (the padding after it is optional)
        with pytest.raises(GGUFError, match=r"^bad\.gguf: "):
            parse(data[:n])


def test_nesting_is_bounded():
    payload = b""
    for _ in range(20):
        payload = struct.pack("<IQ", V.ARRAY, 1) + payload
    inner = struct.pack("<IQ", V.UINT8, 0)
    with pytest.raises(GGUFError, match="nested more than"):
        parse(raw([kv("deep", V.ARRAY, payload[12:] + inner)]))


def test_empty_file_on_disk(tmp_path):
    p = tmp_path / "empty.gguf"
    p.write_bytes(b"")
    from llamay.gguf import open_gguf

    with pytest.raises(GGUFError, match=r"empty.gguf: offset 0: the file is empty"):
        open_gguf(p)
    with pytest.raises(GGUFError, match=r"cannot open"):
        open_gguf(tmp_path / "missing.gguf")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=8),
    cut=st.one_of(st.none(), st.integers(0, 10_000)),
)
def test_fuzz_mutated_headers(edits, cut):
    """Random byte edits and cuts of a valid file: it parses or fails with a LlamayError, nothing else."""
    data = bytearray(tiny_gguf())
    end = header_end(bytes(data))
    for pos, value in edits:
        data[pos % end] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    try:
        f = parse(bytes(data))
    except LlamayError:
        return
    for t in f.tensors.values():  # whatever parsed must be readable in bounds
        assert f.tensor_data(t).nbytes == t.nbytes
