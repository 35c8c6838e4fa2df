"""The optional check of tensor values (`load_model(..., check_tensors=True)`, llama.cpp's `--check-tensors`):
a NaN or infinity in a float tensor or in a quantised block's float scale is refused by tensor and position.
Its verdicts are compared with a plain decoding of the same bytes (`struct`), and with llama.cpp's."""

from __future__ import annotations

import math
import random
import struct

import pytest

from llamay.errors import ModelError
from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFFile
from llamay.model import Model
from llamay.model.tensor_check import check_tensor_data
from llamay.quants import BLOCKS
from tests import paths
from tests.gguf.helpers import llamacpp_loads

VALUES = (math.nan, math.inf, -math.inf, 65504.0, 1.0e30, -2.5, 0.0)  # 1e30 is finite in f32, not in f16


def _poked(data: bytes, at: int, code: str, value: float) -> bytes:
    """`data` with one float written at `at` (struct code e/f, or "bf16": the top half of an f32)."""
    buf = bytearray(data)
    if code == "bf16":
        buf[at : at + 2] = struct.pack("<f", value)[2:]
    else:
        try:
            struct.pack_into("<" + code, buf, at, value)
        except OverflowError:  # too large for f16: an infinity, as a converter would round it
            struct.pack_into("<" + code, buf, at, math.copysign(math.inf, value))
    return bytes(buf)


def _finite_as_stored(data: bytes, at: int, code: str) -> bool:
    """The reference: decode the value just written with `struct` and ask math.isfinite."""
    if code == "bf16":
        return math.isfinite(struct.unpack("<f", b"\0\0" + data[at : at + 2])[0])
    return math.isfinite(struct.unpack_from("<" + code, data, at)[0])


def _targets(f: GGUFFile, rng: random.Random):
    """(tensor, byte offset, struct code, description) of one value of each tensor: an element or a block scale
    (of a sample of the tensors: every type the file holds, a few tensors of each)."""
    by_type: dict[GGMLType, list] = {}
    for t in f.tensors.values():
        by_type.setdefault(t.type, []).append(t)
    for t in (x for ts in by_type.values() for x in rng.sample(ts, min(3, len(ts)))):
        block = BLOCKS.get(t.type)
        if t.type in (GGMLType.F32, GGMLType.F16, GGMLType.BF16):
            width = {GGMLType.F32: 4, GGMLType.F16: 2, GGMLType.BF16: 2}[t.type]
            i = rng.randrange(t.n_elements)
            code = {GGMLType.F32: "f", GGMLType.F16: "e", GGMLType.BF16: "bf16"}[t.type]
            yield t, t.data_start + i * width, code, f"element {i}"
        elif block is not None:
            i = rng.randrange(t.nbytes // block.size)
            for name, code in block.fields.items():
                if code in ("e", "f"):
                    yield (
                        t,
                        t.data_start + i * block.size + block.offset[name],
                        code,
                        f"block {i} has a NaN or infinite {name}",
                    )


@pytest.mark.parametrize("type_name", paths.STORIES_TYPES)
def test_verdicts_agree_with_decoding_the_bytes(type_name):
    data = paths.stories(type_name).read_bytes()
    with GGUFFile.from_buffer(data, "clean.gguf") as f:
        check_tensor_data(f)  # the fixture itself is clean
        targets = list(_targets(f, random.Random(type_name)))
    assert targets
    for t, at, code, where in targets:
        for value in VALUES:
            poked = _poked(data, at, code, value)
            with GGUFFile.from_buffer(poked, "poked.gguf") as f:
                if _finite_as_stored(poked, at, code):
                    check_tensor_data(f, [t.name])
                else:
                    with pytest.raises(ModelError, match=rf"^poked\.gguf: tensor '{t.name}' \({t.type.name}\): "):
                        check_tensor_data(f)
                    with pytest.raises(ModelError, match=where.split(" has")[0]):
                        check_tensor_data(f, [t.name])


def test_the_load_checks_when_asked():
    data = paths.stories("q8_0").read_bytes()
    with GGUFFile.from_buffer(data, "x") as f:
        t = f.tensors["blk.1.attn_v.weight"]
    poked = _poked(data, t.data_start, "e", math.nan)  # the first block's scale d
    Model(GGUFFile.from_buffer(poked, "poked.gguf"), "portable")  # not read unless asked
    with pytest.raises(ModelError, match=r"tensor 'blk\.1\.attn_v\.weight' \(Q8_0\): block 0 has a NaN or infinite d"):
        Model(GGUFFile.from_buffer(poked, "poked.gguf"), "portable", check_tensors=True)


@pytest.mark.native_only
@pytest.mark.parametrize(("type_name", "code"), [("f32", "f"), ("q8_0", "e")])
def test_llama_cpp_check_tensors_agrees(type_name, code, tmp_path):
    pytest.importorskip("xllamacpp")
    data = paths.stories(type_name).read_bytes()
    with GGUFFile.from_buffer(data, "x") as f:
        t = f.tensors["blk.2.attn_q.weight"]
    poked = _poked(data, t.data_start + 64 * (4 if code == "f" else 34), code, math.inf)
    assert llamacpp_loads(poked, tmp_path / "poked.gguf")  # no check asked: it loads
    assert not llamacpp_loads(poked, tmp_path / "poked.gguf", check_tensors=True)
    with pytest.raises(ModelError, match=r"blk\.2\.attn_q\.weight"):
        Model(GGUFFile.from_buffer(poked, "poked.gguf"), "portable", check_tensors=True)
