"""The GGUF writer: byte-identical round trips of real files, and files gguf-py wrote."""

from __future__ import annotations

import hashlib

import pytest

from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFFile, GGUFWriter, open_gguf
from tests import paths
from tests.gguf.helpers import tiny_gguf
from tests.gguf.test_reader import FIXTURE_FILES


class _Hasher:
    def __init__(self) -> None:
        self.h = hashlib.sha256()

    def write(self, b) -> None:
        self.h.update(b)


def _sha256_of_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_round_trip_is_byte_identical(path):
    with open_gguf(path) as f:
        assert GGUFWriter.from_file(f).to_bytes() == path.read_bytes()


@pytest.mark.parametrize("name", [paths.SMOLLM2, paths.GEMMA3])
def test_registry_models_round_trip(name):
    path = paths.registry_model(name)
    with open_gguf(path) as f:
        out = _Hasher()
        GGUFWriter.from_file(f).write_to(out)
    assert out.h.hexdigest() == _sha256_of_file(path)


@pytest.mark.parametrize("version", [2, 3])
def test_tiny_round_trip(version):
    data = tiny_gguf(alignment=128, version=version)
    assert GGUFWriter.from_file(GGUFFile.from_buffer(data)).to_bytes() == data


@pytest.mark.native_only
def test_round_trip_of_a_file_gguf_py_wrote(tmp_path):
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    p = tmp_path / "ref.gguf"
    w = gguf.GGUFWriter(p, "llama")
    w.add_uint32("llama.block_count", 1)
    w.add_array("x.ints", [1, 2, 3])
    w.add_array("x.strs", ["α", "β"])
    w.add_float64("x.f64", 2.5)
    w.add_tensor("t0.weight", np.arange(12, dtype=np.float32).reshape(3, 4))
    w.add_tensor("t1.weight", np.ones((5,), dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with open_gguf(p) as f:
        assert f.tensors["t0.weight"].shape == (4, 3)
        assert GGUFWriter.from_file(f).to_bytes() == p.read_bytes()


def test_write_is_atomic(tmp_path):
    w = GGUFWriter()
    w.add("general.architecture", "llama")
    w.add_tensor("x", GGMLType.F32, (2,), bytes(8))
    target = tmp_path / "out.gguf"
    w.write(target)
    assert GGUFFile.from_buffer(target.read_bytes()).tensors["x"].nbytes == 8
    assert not (tmp_path / "out.gguf.partial").exists()


def test_writer_refuses_inconsistent_tensors():
    w = GGUFWriter()
    with pytest.raises(ValueError, match="bytes given"):
        w.add_tensor("x", GGMLType.F32, (3,), bytes(8))
    with pytest.raises(ValueError, match="block size"):
        w.add_tensor("x", GGMLType.Q4_0, (16,), bytes(9))
    w.add("k", 1)
    with pytest.raises(ValueError, match="duplicate metadata key"):
        w.add("k", 2)
