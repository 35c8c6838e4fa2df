"""Byte offsets and sizes of the block structs, as plain ints numba can freeze into the kernels.

Made from the `Block` declarations in `llamay.quants` (one source of truth for every layout), for each block type:
`<TYPE>_SIZE`, its size, and `<TYPE>_<FIELD>`, the byte offset of a field: `Q4_1_M` is where field `m` of a Q4_1
block starts, `Q4_1_SIZE` the block's size, `IQ4_XS_SCALES_H` where its `scales_h` starts. A new block type has
its constants here as soon as llamay.quants declares it.
"""

from __future__ import annotations

from llamay.quants import BLOCKS


def _constants() -> dict[str, int]:
    out = {}
    for t, block in BLOCKS.items():
        out[f"{t.name}_SIZE"] = block.size
        out.update({f"{t.name}_{field.upper()}": at for field, at in block.offset.items()})
    return out


globals().update(_constants())
