"""The GGUF reader against gguf-py on real files, and on files with every value type."""

from __future__ import annotations

import mmap
import struct

import pytest

from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFFile, GGUFValueType, open_gguf
from tests import paths
from tests.gguf.helpers import tiny_gguf

FIXTURE_FILES = sorted(paths.MODELS.glob("*/*.gguf")) + sorted(paths.VOCAB.glob("*.gguf"))


def test_every_value_type_reads_back():
    f = GGUFFile.from_buffer(tiny_gguf())
    m = f.metadata
    assert m["t.u8"] == 200 and m["t.i8"] == -5 and m["t.u16"] == 60000 and m["t.i16"] == -30000
    assert m["t.u32"] == 4_000_000_000 and m["t.i32"] == -2_000_000_000
    assert m["t.u64"] == 2**63 + 7 and m["t.i64"] == -(2**62)
    assert m["t.f32"] == 1.5 and m["t.f64"] == 0.1 and m["t.bool"] is True
    assert m["t.str"] == "héllo ☃"
    assert m["t.arr_i32"] == [1, -2, 3] and m["t.arr_str"] == ["a", "", "ccc"]
    assert m["t.arr_bool"] == [True, False, True]
    assert m["t.nested"] == [[1, 2], []] and m["t.nested"][0].item_type == GGUFValueType.UINT8
    assert m["t.empty"] == [] and f.fields["t.empty"].value.item_type == GGUFValueType.FLOAT32
    assert f.fields["t.u64"].type == GGUFValueType.UINT64
    a = f.tensors["a.weight"]
    assert (a.type, a.shape, a.nbytes, a.n_rows) == (GGMLType.F32, (4, 2), 32, 2)
    assert struct.unpack("<8f", f.tensor_data("a.weight")) == tuple(float(i) for i in range(8))
    b = f.tensors["b.weight"]
    assert b.offset % f.alignment == 0 and b.nbytes == 34


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("alignment", [None, 1, 64, 256])
def test_versions_and_alignment(version, alignment):
    f = GGUFFile.from_buffer(tiny_gguf(alignment=alignment, version=version))
    assert f.version == version
    assert f.alignment == (alignment or 32)
    assert f.data_offset % f.alignment == 0
    for t in f.tensors.values():
        assert t.data_start % f.alignment == 0


def test_open_memory_maps_natively(tmp_path):
    p = tmp_path / "t.gguf"
    p.write_bytes(tiny_gguf())
    with open_gguf(p, use_mmap=True) as f:
        view = f.tensor_data("a.weight")
        assert isinstance(view.obj, mmap.mmap)  # zero copy: a view of the map, not a copy of the bytes
        assert view.nbytes == 32
        del view
    with open_gguf(p, use_mmap=False) as f:  # the no-mmap path Pyodide takes
        assert f.tensor_data("a.weight").nbytes == 32


@pytest.mark.native_only
@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_fixtures_match_gguf_py(path):
    gguf = pytest.importorskip("gguf")
    ref = gguf.GGUFReader(path)
    with open_gguf(path) as f:
        fields = [k for k in ref.fields if not k.startswith("GGUF.")]
        assert list(f.fields) == fields
        for k in fields:
            rf = ref.fields[k]
            assert f.fields[k].type == rf.types[0], k
            ours = f.fields[k].value
            theirs = rf.contents()
            if isinstance(theirs, float):
                assert ours == pytest.approx(theirs, rel=0, abs=0), k
            else:
                assert ours == theirs, k
        assert len(f.tensors) == len(ref.tensors)
        for rt in ref.tensors:
            t = f.tensors[rt.name]
            assert t.type == rt.tensor_type
            assert list(t.shape) == [int(x) for x in rt.shape]
            assert t.data_start == rt.data_offset
            assert t.nbytes == rt.n_bytes
            assert bytes(f.tensor_data(t)[:64]) == rt.data.tobytes()[:64]


@pytest.mark.native_only
@pytest.mark.parametrize("name", [paths.SMOLLM2, paths.GEMMA3])
def test_registry_models_match_gguf_py(name):
    gguf = pytest.importorskip("gguf")
    path = paths.registry_model(name)
    ref = gguf.GGUFReader(path)
    with open_gguf(path) as f:
        assert [t.name for t in ref.tensors] == list(f.tensors)
        for rt in ref.tensors:
            t = f.tensors[rt.name]
            assert (t.type, t.data_start, t.nbytes) == (rt.tensor_type, rt.data_offset, rt.n_bytes)
        assert f.get("tokenizer.ggml.tokens") == ref.fields["tokenizer.ggml.tokens"].contents()


@pytest.mark.native_only
def test_gguf_py_reads_what_we_write_with_every_type(tmp_path):
    gguf = pytest.importorskip("gguf")
    p = tmp_path / "t.gguf"
    p.write_bytes(tiny_gguf(alignment=64))
    ref = gguf.GGUFReader(p)
    assert ref.alignment == 64
    assert ref.fields["t.str"].contents() == "héllo ☃"
    assert ref.fields["t.u64"].contents() == 2**63 + 7
    assert ref.fields["t.arr_str"].contents() == ["a", "", "ccc"]
    assert [t.name for t in ref.tensors] == ["a.weight", "b.weight"]
    assert ref.tensors[0].data.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
