"""Small GGUF files built in memory for reader tests."""

from __future__ import annotations

import struct

from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFArray, GGUFFile, GGUFValueType, GGUFWriter

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
    return GGUFFile.from_buffer(data).data_offset


def edited(path, fields: dict | None = None, tensors=None) -> bytes:
    """The GGUF at `path` rewritten with metadata `fields` set (key: (value, GGUFValueType), or None to drop
    it) and its tensor list passed through `tensors` ([(name, type, shape, bytes)] -> the same), unchecked: a
    tensor may be given a type or shape its bytes do not fit (offsets follow each tensor's actual bytes)."""
    with GGUFFile.open(path) as f:
        w = GGUFWriter.from_file(f)
        w.tensors = [(n, t, s, bytes(d)) for n, t, s, d in w.tensors]
    for key, spec in (fields or {}).items():
        if spec is None:
            del w.fields[key]
        else:
            value, vtype = spec
            w.fields[key] = (vtype, value)
    if tensors is not None:
        w.tensors = tensors(w.tensors)
    return w.to_bytes()


def retyped(name: str, ggml_type: GGMLType):
    """A `tensors` edit for `edited`: the tensor's type changed, its bytes kept."""
    return lambda ts: [(n, ggml_type if n == name else t, s, d) for n, t, s, d in ts]


_LLAMACPP_LOAD = """
import os, sys, xllamacpp
p = xllamacpp.CommonParams()
p.model.path = sys.argv[1]
p.n_ctx, p.n_parallel, p.warmup, p.verbosity = 64, 1, False, -1
p.cpuparams.n_threads = p.cpuparams_batch.n_threads = 1
p.check_tensors = sys.argv[2] == "check"
try:
    server = xllamacpp.Server(p)
    print("loaded", flush=True)
except RuntimeError:
    print("refused", flush=True)
os._exit(0)  # the server's destructor can hang: the answer is printed, leave without it
"""


def llamacpp_loads(data: bytes, path, *, check_tensors: bool = False) -> bool:
    """Whether llama.cpp (xllamacpp's server) loads these bytes, written to `path` (with `--check-tensors`: every
    value validated): the reference for files it refuses. Asked in a child process, which prints the answer and
    leaves without tearing the server down."""
    import subprocess
    import sys

    path.write_bytes(data)
    r = subprocess.run(
        [sys.executable, "-c", _LLAMACPP_LOAD, str(path), "check" if check_tensors else "-"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    answer = r.stdout.split()
    if answer not in (["loaded"], ["refused"]):
        raise AssertionError(f"llama.cpp gave no answer (exit {r.returncode}): {r.stdout[-300:]} {r.stderr[-500:]}")
    return answer == ["loaded"]
