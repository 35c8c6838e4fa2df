"""Random but well-formed inputs for kernel tests: float rows, and weight bytes of every ggml type."""

from __future__ import annotations

import random
import struct
from array import array

from llamay.ggml_types import GGMLType, block_size, type_size
from llamay.quants import BLOCKS, SUPPORTED_QUANTIZE, quantize

# weight types the kernels are tested on (a backend is tested on those it lists as runnable)
MATMUL_TYPES = (
    GGMLType.F32, GGMLType.F16, GGMLType.BF16,
    GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q5_0, GGMLType.Q5_1, GGMLType.Q8_0,
    GGMLType.Q2_K, GGMLType.Q3_K, GGMLType.Q4_K, GGMLType.Q5_K, GGMLType.Q6_K,
    GGMLType.IQ4_NL, GGMLType.IQ4_XS, GGMLType.IQ2_XXS, GGMLType.IQ2_XS, GGMLType.IQ2_S,
    GGMLType.IQ3_XXS, GGMLType.IQ3_S, GGMLType.IQ1_S, GGMLType.IQ1_M,
    GGMLType.TQ1_0, GGMLType.TQ2_0, GGMLType.MXFP4, GGMLType.Q1_0,
)  # fmt: skip


def floats(rng: random.Random, n: int, scale: float = 1.0) -> array:
    return array("f", (rng.gauss(0.0, scale) for _ in range(n)))


def _iq1m_scales(rng: random.Random) -> bytes:
    """IQ1_M packs its fp16 scale in the top nibbles of four uint16s: keep it a small normal number."""
    d_bits = 0x1C00 | rng.randrange(0x400)  # exponent 7: about 0.004..0.008
    words = [(rng.randrange(1 << 12)) | (((d_bits >> (4 * i)) & 0xF) << 12) for i in range(4)]
    return struct.pack("<4H", *words)


def weight_bytes(rng: random.Random, t: GGMLType, n_in: int, n_out: int) -> bytes:
    """n_out rows of n_in elements of type t: quantised from random floats where llamay can quantise t,
    else random bytes with every scale field replaced by a small finite value."""
    n = n_in * n_out
    if t in SUPPORTED_QUANTIZE and t != GGMLType.Q8_K:
        return quantize(t, floats(rng, n, 0.1))
    block = BLOCKS[t]
    out = bytearray(rng.randbytes(n // block_size(t) * type_size(t)))
    for b in range(0, len(out), block.size):
        for name, code in block.fields.items():
            at = b + block.offset[name]
            if code == "e":
                out[at : at + 2] = struct.pack("<e", rng.uniform(0.002, 0.02) * rng.choice((1, -1)))
            elif code == "f":
                out[at : at + 4] = struct.pack("<f", rng.uniform(0.002, 0.02))
        if t == GGMLType.IQ1_M:
            at = b + block.offset["scales"]
            out[at : at + 8] = _iq1m_scales(rng)
        if t == GGMLType.MXFP4:
            out[b] = 127 + rng.randrange(-6, 2)  # E8M0 exponent near 1
    return bytes(out)
