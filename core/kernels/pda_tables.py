"""The tables under the `pda` op (pda.py, pda_automaton.py): the arena's region directory, the program's
positions, the interned stack nodes, and the keyed entries (open addressing) that closures, states and the masks'
caches are stored in, with their rebuild after the host moved or grew a region.

Every function works on A, the arena (`pda_layout.py`), and returns an id or entry (>= 0), -1 (not found), FULL
(a region is full: A[H_GROW] names it) or LIMIT (A[H_ERR_*]), as pda_automaton.py's.
"""

from __future__ import annotations

from .pda_layout import (
    EXIT,
    FULL,
    H_ERR_AMOUNT,
    H_ERR_LIMIT,
    H_ERR_POS,
    H_GROW,
    H_MAX_DEPTH,
    H_P_ARG,
    H_P_KIND,
    H_REG,
    H_REHASH,
    H_STAMP,
    LIM_DEPTH,
    LIMIT,
    PT_W,
    R_CHASH,
    R_CLOS,
    R_LHASH,
    R_LOCAL,
    R_NHASH,
    R_NODES,
    R_PARTS,
    R_PHASH,
    R_SBHASH,
    R_SBITS,
    R_SEEN,
    R_SHASH,
    R_STATES,
    R_XBITS,
    R_XHASH,
    REG_W,
    ST_W,
)

jit = globals().get("jit") or (lambda f: f)  # numba's njit when native/kernels/pda.py runs this source again
K1, K2, K3, KS = 0x2545F491, 0x1B873593, 0x27D4EB2F, 0x01000193  # hash multipliers (products fit in int64)
_SIGN, _WRAP, _M32 = 1 << 31, 1 << 32, 0xFFFFFFFF


@jit
def off(A, r):
    return A[H_REG + REG_W * r]


@jit
def cap(A, r):
    return A[H_REG + REG_W * r + 1]


@jit
def used(A, r):
    return A[H_REG + REG_W * r + 2]


@jit
def set_used(A, r, n):
    A[H_REG + REG_W * r + 2] = n


@jit
def grow(A, r):
    A[H_GROW] = r
    return FULL


@jit
def limit(A, which, amount, pos):
    A[H_ERR_LIMIT] = which
    A[H_ERR_AMOUNT] = amount
    A[H_ERR_POS] = pos
    return LIMIT


@jit
def hash3(a, b, c):
    h = ((a * K1) ^ (b * K2) ^ (c * K3)) & _M32
    return (h ^ (h >> 15)) & 0x7FFFFFFF


@jit
def has(A, at, b):
    return (A[at + (b >> 5)] >> (b & 31)) & 1


@jit
def set_bit(A, at, t):
    v = A[at + (t >> 5)] | (1 << (t & 31))
    A[at + (t >> 5)] = v - _WRAP if v >= _SIGN else v


# -- the program and nodes --------------------------------------------------------------------------------


@jit
def kind(A, p):
    return A[A[H_P_KIND] + p]


@jit
def arg(A, p):
    return A[A[H_P_ARG] + p]


@jit
def npos(A, x):
    return A[off(A, R_NODES) + 4 * x]


@jit
def nparent(A, x):
    return A[off(A, R_NODES) + 4 * x + 1]


@jit
def ncount(A, x):
    return A[off(A, R_NODES) + 4 * x + 2]


@jit
def ndepth(A, x):
    return A[off(A, R_NODES) + 4 * x + 3]


@jit
def node(A, pos, parent, count):
    """The node (pos, parent, count), interned."""
    ho, hmask, no = off(A, R_NHASH), cap(A, R_NHASH) - 1, off(A, R_NODES)
    h = hash3(pos, parent, count) & hmask
    while A[ho + h] >= 0:
        at = no + 4 * A[ho + h]
        if A[at] == pos and A[at + 1] == parent and A[at + 2] == count:
            return A[ho + h]
        h = (h + 1) & hmask
    n = used(A, R_NODES)
    if n >= cap(A, R_NODES):
        return grow(A, R_NODES)
    if 2 * (n + 1) > hmask + 1:
        return grow(A, R_NHASH)
    depth = A[no + 4 * parent + 3] + 1
    if depth > A[H_MAX_DEPTH]:
        return limit(A, LIM_DEPTH, depth, pos)
    at = no + 4 * n
    A[at], A[at + 1], A[at + 2], A[at + 3] = pos, parent, count, depth
    A[ho + h] = n
    set_used(A, R_NODES, n + 1)
    return n


# -- keyed entries (LOCAL, XBITS, SBITS, CLOS): open addressing on their first one or two words -----------


@jit
def find(A, rh, re, w, k1, k2, two):
    ho, hmask, eo = off(A, rh), cap(A, rh) - 1, off(A, re)
    h = hash3(k1, k2, rh) & hmask
    while A[ho + h] >= 0:
        at = eo + w * A[ho + h]
        if A[at] == k1 and (not two or A[at + 1] == k2):
            return A[ho + h]
        h = (h + 1) & hmask
    return -1


@jit
def room(A, rh, re):
    """FULL unless one more entry fits in entries region `re` and its table `rh`."""
    n = used(A, re)
    if n >= cap(A, re):
        return grow(A, re)
    if 2 * (n + 1) > cap(A, rh):
        return grow(A, rh)
    return 0


@jit
def add(A, rh, re, w, k1, k2):
    """A new entry keyed k1 (, k2) (after `room`): its index; the caller fills its other words."""
    ho, hmask = off(A, rh), cap(A, rh) - 1
    h = hash3(k1, k2, rh) & hmask
    while A[ho + h] >= 0:
        h = (h + 1) & hmask
    n = used(A, re)
    at = off(A, re) + w * n
    A[at] = k1
    if w > 1:
        A[at + 1] = k2
    A[ho + h] = n
    set_used(A, re, n + 1)
    return n


@jit
def list_hash(A, at, n):
    h = 0x811C9DC5
    for j in range(n):
        h = ((h ^ A[at + j]) * KS) & _M32
    return (h ^ (h >> 15)) & 0x7FFFFFFF


@jit
def rehash_table(A, rh, re):
    """Rebuild hash table `rh` from the entries of region `re` (after the host grew it)."""
    ho, hmask = off(A, rh), cap(A, rh) - 1
    for h in range(hmask + 1):
        A[ho + h] = -1
    eo = off(A, re)
    for e in range(used(A, re)):
        if rh == R_NHASH:
            if e <= EXIT:
                continue
            h = hash3(A[eo + 4 * e], A[eo + 4 * e + 1], A[eo + 4 * e + 2])
        elif rh == R_SHASH:
            h = A[eo + ST_W * e + 3]
        elif rh == R_PHASH:
            h = A[eo + PT_W * e + 2]
        elif rh in (R_CHASH, R_XHASH):
            h = hash3(A[eo + 4 * e], A[eo + 4 * e + 1], rh)
        else:
            h = hash3(A[eo + (6 if rh == R_LHASH else 3) * e], 0, rh)
        h &= hmask
        while A[ho + h] >= 0:
            h = (h + 1) & hmask
        A[ho + h] = e


@jit
def rehash(A):
    """Rebuild the hash tables the host moved or grew, their bits in A[H_REHASH] (from their entries: none in a
    new arena)."""
    flags = A[H_REHASH]
    A[H_REHASH] = 0
    if flags >> R_NHASH & 1:
        rehash_table(A, R_NHASH, R_NODES)
    if flags >> R_CHASH & 1:
        rehash_table(A, R_CHASH, R_CLOS)
    if flags >> R_SHASH & 1:
        rehash_table(A, R_SHASH, R_STATES)
    if flags >> R_LHASH & 1:
        rehash_table(A, R_LHASH, R_LOCAL)
    if flags >> R_XHASH & 1:
        rehash_table(A, R_XHASH, R_XBITS)
    if flags >> R_SBHASH & 1:
        rehash_table(A, R_SBHASH, R_SBITS)
    if flags >> R_PHASH & 1:
        rehash_table(A, R_PHASH, R_PARTS)
    if flags >> R_SEEN & 1:  # scratch: its stamps cleared
        so = off(A, R_SEEN)
        for h in range(cap(A, R_SEEN)):
            A[so + 3 * h + 2] = 0
        A[H_STAMP] = 0
