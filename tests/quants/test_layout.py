"""Block structs: every block type has one, its size is ggml's, and its field offsets are the C struct's."""

from __future__ import annotations

import pytest

from llamay.ggml_types import FLOAT_TYPES, INT_TYPES, GGMLType, block_size, type_size
from llamay.quants import BLOCKS

BLOCK_TYPES = [t for t in GGMLType if t not in FLOAT_TYPES | INT_TYPES]


def test_every_block_type_has_a_block_struct():
    assert set(BLOCKS) == set(BLOCK_TYPES)


@pytest.mark.parametrize("t", BLOCK_TYPES, ids=lambda t: t.name)
def test_block_size_is_ggmls(t):
    block = BLOCKS[t]
    assert block.size == type_size(t) and block.elements == block_size(t)
    offsets = list(block.offset.values())
    assert offsets[0] == 0 and offsets == sorted(offsets)


@pytest.mark.parametrize(
    ("t", "offsets"),
    [
        (GGMLType.Q4_0, {"d": 0, "qs": 2}),
        (GGMLType.Q5_1, {"d": 0, "m": 2, "qh": 4, "qs": 8}),
        (GGMLType.Q8_1, {"d": 0, "s": 2, "qs": 4}),
        (GGMLType.Q2_K, {"scales": 0, "qs": 16, "d": 80, "dmin": 82}),
        (GGMLType.Q3_K, {"hmask": 0, "qs": 32, "scales": 96, "d": 108}),
        (GGMLType.Q4_K, {"d": 0, "dmin": 2, "scales": 4, "qs": 16}),
        (GGMLType.Q5_K, {"d": 0, "dmin": 2, "scales": 4, "qh": 16, "qs": 48}),
        (GGMLType.Q6_K, {"ql": 0, "qh": 128, "scales": 192, "d": 208}),
        (GGMLType.Q8_K, {"d": 0, "qs": 4, "bsums": 260}),
        (GGMLType.IQ3_S, {"d": 0, "qs": 2, "qh": 66, "signs": 74, "scales": 106}),
        (GGMLType.IQ4_XS, {"d": 0, "scales_h": 2, "scales_l": 4, "qs": 8}),
        (GGMLType.TQ1_0, {"qs": 0, "qh": 48, "d": 52}),
        (GGMLType.NVFP4, {"d": 0, "qs": 4}),
    ],
    ids=lambda v: v.name if isinstance(v, GGMLType) else None,
)
def test_field_offsets_are_the_c_structs(t, offsets):
    assert BLOCKS[t].offset == offsets
