"""Tensor regions: every tensor's bytes are exactly what its type and shape take, back to back in index order
(each padded to the alignment), the last one within the file and followed by its padding at most — as llama.cpp
lays them out and checks them (`tensor ... has offset X, expected Y`)."""

from __future__ import annotations

import pytest

from llamay.errors import GGUFError
from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFFile
from tests import paths
from tests.gguf.helpers import edited, llamacpp_loads, retyped

STORIES = paths.stories("f32")
LAST = "blk.4.ffn_up.weight"  # the last tensor of the stories files


def parse(data: bytes) -> GGUFFile:
    return GGUFFile.from_buffer(data, "edited.gguf")


def test_a_retyped_tensor_no_longer_fills_its_region():
    # F32 [64, 64] takes 16384 bytes; read as F16 it takes 8192, and its region still holds 16384
    data = edited(STORIES, tensors=retyped("blk.0.attn_q.weight", GGMLType.F16))
    with pytest.raises(
        GGUFError,
        match=r"^edited\.gguf: offset \d+: tensor 'blk\.0\.attn_k\.weight': data offset \d+, expected \d+: tensor "
        r"'blk\.0\.attn_q\.weight' \(F16 \[64, 64\]\) takes 8192 bytes but its region holds 16384: the region is not "
        r"the size its type and shape require",
    ):
        parse(data)


def test_a_tensor_grown_by_its_type_overlaps_the_next():
    f16 = paths.stories("f16")
    with GGUFFile.open(f16) as f:
        name = next(t.name for t in sorted(f.tensors.values(), key=lambda t: t.index) if t.type == GGMLType.F16)
    data = edited(f16, tensors=retyped(name, GGMLType.F32))
    with pytest.raises(GGUFError, match=rf"overlaps tensor '{name}' \(F32 \[64, \d+\] takes \d+ bytes"):
        parse(data)


def test_the_last_tensor_retyped_leaves_bytes_it_does_not_cover():
    data = edited(STORIES, tensors=retyped(LAST, GGMLType.F16))
    with pytest.raises(
        GGUFError,
        match=rf"tensor '{LAST}': F16 \[64, 172\] takes 22016 bytes, but its region runs 22016 bytes to the end of "
        r"the file \(at most 0 bytes of padding may follow\)",
    ):
        parse(data)


def test_the_last_tensor_grown_past_the_end():
    data = edited(STORIES, tensors=lambda ts: [(n, t, (64, 344) if n == LAST else s, d) for n, t, s, d in ts])
    with pytest.raises(GGUFError, match=rf"tensor '{LAST}': F32 \[64, 344\] data \[\d+, \d+\) lies outside the file"):
        parse(data)


def test_padding_after_the_last_tensor_is_optional():
    for type_name in ("q4_0", "q8_0"):  # these end with a tensor whose size is not a multiple of 32
        data = paths.stories(type_name).read_bytes()
        f = parse(data)
        last = max(f.tensors.values(), key=lambda t: t.index)
        end = last.data_start + last.nbytes
        assert end < len(data)  # the fixture pads it
        assert parse(data[:end]).tensors[last.name].nbytes == last.nbytes
        pad = len(data) - end
        with pytest.raises(GGUFError, match=rf"runs {pad + 32} bytes to the end of the file \(at most {pad} bytes"):
            parse(data + bytes(32))


@pytest.mark.native_only
@pytest.mark.parametrize(
    "edit",
    [retyped("blk.0.attn_q.weight", GGMLType.F16), retyped("blk.2.ffn_gate.weight", GGMLType.Q8_0)],
    ids=["f32-as-f16", "f32-as-q8_0"],
)
def test_llama_cpp_refuses_a_retyped_tensor_too(edit, tmp_path):
    pytest.importorskip("xllamacpp")
    assert llamacpp_loads(STORIES.read_bytes(), tmp_path / "original.gguf")  # the harness loads the original
    data = edited(STORIES, tensors=edit)
    assert not llamacpp_loads(data, tmp_path / "retyped.gguf")
    with pytest.raises(GGUFError, match="the region is not the size its type and shape require"):
        parse(data)
