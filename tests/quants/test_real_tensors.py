"""Dequantizers on real model tensors, bit for bit against gguf-py: a few rows of every tensor of the types the
registry models hold, and every tensor of the stories260K fixtures."""

from __future__ import annotations

import pytest

from llamay.ggml_types import GGMLType, row_bytes
from llamay.gguf import open_gguf
from llamay.quants import dequantize
from tests import paths
from tests.quants.helpers import first_difference

pytestmark = pytest.mark.native_only

MAX_TENSORS = 16  # per file and type, spread over the layers: the pure-Python decoder is slow


@pytest.fixture(scope="module")
def gguf_rows():
    """gguf-py's decoder, as raw float32 bytes."""
    np = pytest.importorskip("numpy")
    gguf = pytest.importorskip("gguf")
    from gguf.quants import dequantize as reference

    def decode(t: GGMLType, raw: bytes) -> bytes:
        values = reference(np.frombuffer(raw, dtype=np.uint8), gguf.GGMLQuantizationType(int(t)))
        return values.astype(np.float32).tobytes()

    return decode


def _first_middle_last(n_rows: int) -> list[int]:
    return sorted({0, n_rows // 2, n_rows - 1})


def _spread(items: list, n: int) -> list:
    if len(items) <= n:
        return items
    return [items[i * (len(items) - 1) // (n - 1)] for i in range(n)]


def _check_rows(path, t: GGMLType, gguf_rows, rows_of) -> int:
    """Compares the chosen rows of every chosen tensor of type `t`; returns how many rows were compared."""
    compared = 0
    with open_gguf(path) as f:
        tensors = _spread([info for info in f.tensors.values() if info.type == t], MAX_TENSORS)
        assert tensors, f"{path.name} has no {t.name} tensor"
        for info in tensors:
            width = info.shape[0]
            stride = row_bytes(t, width)
            data = f.tensor_data(info)
            for row in rows_of(info.n_rows):
                raw = bytes(data[row * stride : (row + 1) * stride])
                mine = dequantize(t, raw, width).tobytes()
                ref = gguf_rows(t, raw)
                assert mine == ref, f"{info.name} row {row}: {first_difference(mine, ref)}"
                compared += 1
    return compared


@pytest.mark.parametrize(
    ("model", "t"),
    [
        (paths.GEMMA3, GGMLType.Q4_K),
        (paths.GEMMA3, GGMLType.Q5_0),
        (paths.GEMMA3, GGMLType.Q6_K),
        (paths.GEMMA3, GGMLType.Q8_0),
        (paths.SMOLLM2, GGMLType.Q4_1),
        (paths.SMOLLM2, GGMLType.Q8_0),
    ],
    ids=lambda v: v.name if isinstance(v, GGMLType) else v.split("-")[0],
)
def test_registry_model_rows_match_gguf_py(gguf_rows, model, t):
    assert _check_rows(paths.registry_model(model), t, gguf_rows, _first_middle_last) > 0


@pytest.mark.parametrize("type_name", paths.STORIES_TYPES)
def test_stories260k_tensors_match_gguf_py(gguf_rows, type_name):
    path = paths.stories(type_name)
    with open_gguf(path) as f:
        types = {info.type for info in f.tensors.values()}
    for t in types:  # the quantized files keep their norms and ffn_down in F32
        assert _check_rows(path, t, gguf_rows, range) > 0
