"""Byte-level unpacking helpers shared by the block codecs: nibbles, 2-bit crumbs and single bits, as whole-byte
operations (`bytes.translate`, `bytes.join`, big-integer OR) so that no decoder touches one bit at a time."""

from __future__ import annotations

LOW_NIBBLE = bytes(b & 0xF for b in range(256))  # translate table: byte -> its low 4 bits
HIGH_NIBBLE = bytes(b >> 4 for b in range(256))  # translate table: byte -> its high 4 bits
# CRUMB[s]: translate table byte -> bits 2s..2s+1 (the s-th 2-bit field, low first)
CRUMB: tuple[bytes, ...] = tuple(bytes((b >> (2 * s)) & 3 for b in range(256)) for s in range(4))
# BIT[j]: translate table byte -> its bit j (0 or 1)
BIT: tuple[bytes, ...] = tuple(bytes((b >> j) & 1 for b in range(256)) for j in range(8))
# _BITS_OF[b]: the 8 bits of byte b, least significant first, one per byte
_BITS_OF: tuple[bytes, ...] = tuple(bytes((b >> j) & 1 for j in range(8)) for b in range(256))


def nibbles(qs: bytes) -> bytes:
    """ggml's usual 4-bit packing: byte j holds element j in its low nibble and element j + len(qs) in its high."""
    return qs.translate(LOW_NIBBLE) + qs.translate(HIGH_NIBBLE)


def bits_lsb_first(raw: bytes) -> bytes:
    """Every bit of `raw` as one byte (0 or 1): bit j of byte i becomes byte 8 * i + j."""
    return b"".join(map(_BITS_OF.__getitem__, raw))


def or_bytes(a: bytes, b: bytes) -> bytes:
    """Bytewise OR of two equal-length byte strings (one big-integer OR instead of a Python loop)."""
    return (int.from_bytes(a, "little") | int.from_bytes(b, "little")).to_bytes(len(a), "little")


def shift_bytes(raw: bytes, k: int) -> bytes:
    """Each byte shifted left by `k` (the caller guarantees no byte overflows)."""
    return (int.from_bytes(raw, "little") << k).to_bytes(len(raw) + 1, "little")[: len(raw)]
