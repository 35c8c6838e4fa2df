"""A tensor type the chosen backend has no kernels for is refused at load, by tensor and type, with the types
that backend runs; the same file loads on a backend that has them."""

from __future__ import annotations

import re
from array import array

import pytest

from llamay import platform
from llamay.errors import UnsupportedTypeError
from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFFile, GGUFWriter
from llamay.model import load_model
from tests.backends import require_backend
from tests.models.tiny import build_tiny

WIDENED = "blk.0.attn_q.weight"


def _with_a_type(tmp_path, ggml_type: GGMLType):
    """The tiny llama with one matrix stored as `ggml_type` (F64: a type only the portable backend runs)."""
    assert ggml_type == GGMLType.F64
    src = GGUFFile.from_buffer(build_tiny("llama").to_bytes(), "src.gguf")
    w = GGUFWriter()
    for fld in src.fields.values():
        w.add(fld.key, fld.value, fld.type)
    for t in sorted(src.tensors.values(), key=lambda t: t.index):
        data = bytes(src.tensor_data(t))
        if t.name == WIDENED:
            values = array("f", data)
            if not platform.LITTLE_ENDIAN:
                values.byteswap()
            wide = array("d", values)
            if not platform.LITTLE_ENDIAN:
                wide.byteswap()
            w.add_tensor(t.name, GGMLType.F64, t.shape, wide.tobytes())
        else:
            w.add_tensor(t.name, t.type, t.shape, data)
    path = tmp_path / "tiny-llama-f64.gguf"
    w.write(path)
    return path


@pytest.mark.parametrize("backend_name", ["numba", "wasm"])
def test_a_type_without_kernels_on_the_backend_is_refused_by_name(backend_name, tmp_path):
    be = require_backend(backend_name)
    assert GGMLType.F64 not in be.runnable_types
    path = _with_a_type(tmp_path, GGMLType.F64)
    runs = ", ".join(sorted(t.name for t in be.runnable_types))
    want = rf"tensor '{re.escape(WIDENED)}' is F64, .*\(runnable types: {runs}\)"
    with pytest.raises(UnsupportedTypeError, match=want):
        load_model(path, backend_name)


def test_the_same_file_runs_where_the_type_has_kernels(tmp_path):
    path = _with_a_type(tmp_path, GGMLType.F64)
    with load_model(path, "portable") as m:
        assert m.weights.layers[0].attn.q.type == GGMLType.F64
