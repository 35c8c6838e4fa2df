"""The weight types as data: a `Traits` entry per GGMLType (ggml's `type_traits_cpu[]`), and the numba glue through
which one driver per family of kernel (`drivers`) calls the functions of the type it was made for.

A driver is made per type by a factory that closes over the type's `Traits` (`drivers.matmul_q8(traits)`).
Inside it, `tr.block_dot(...)` is a numba method of the entry's type, `TraitsType(Q4_0)`: while numba types the
driver, the method resolves to the entry's own function and is inlined into the driver's IR (`overload_method`,
inline="always"), as a direct call to that function would be; `tr.has_min` and the block offsets are constants.
So the compiled driver is the one that was copied per type by hand before.

Why this mechanism, measured (numba 0.68 on 2 shared cores; "compile": one matmul driver and all it inlines from an
empty cache, against the copied driver of the commit before):
- a closure over the type's dot / unpack dispatchers: numba keys the cache on the pickled cells of a closure, and
  a dispatcher pickles with a uuid made per process, so a second process missed the cache and compiled again
  (first call 21 s, against 0.9 s for the copy loaded from the cache);
- the dispatchers passed as arguments: the same miss (first call 24 s), the signature holding them;
- `numba.literally` on a type id argument: an int from Python is not a literal, so every call typed the function
  again (8.7, 5.2, 2.9 and 3.8 s for four calls);
- this one: the closure holds the Traits, which pickles as its type id, the same bytes in every process
  (tests/native/test_numba_traits.py), so a new process loads the driver from the cache. The machine code has the
  copy's vector instructions, as many and in the same order: Q6_K's and F16's code is the same instruction for
  instruction, Q4_0's and Q4_K's differ in moves and address arithmetic (4628 instructions against 4609, 5358
  against 5367), Q2_K's mins' dot, now a loop of its own, is vectorised otherwise (5671 against 5491); results are
  bit for bit the same. Compile times (new / copy): Q4_0 15.8 / 14.2 s, Q4_K 33.4 / 44.3, Q6_K 18.0 / 16.9,
  Q2_K 21.2 / 17.3. A branch on a constant inside a shared function compiles both sides in numba (it is only
  LLVM that drops one): Q4_K / Q5_K share code through a method of the entry (`tr.block_quants`) instead of a
  branch on Q5_K's fifth bits (Q4_K's driver compiled in 130 to 147 s with the branch, 78 s without, under the
  same load).
The cache key holds only the type id, so a changed kernel must not keep a stale entry: `kernels/__init__.py`
drops the whole cache whenever any source of these kernels changes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import types
from numba.core.imputils import lower_constant
from numba.extending import models, overload_attribute, overload_method, register_model, typeof_impl

from llamay.ggml_types import GGMLType, type_size
from llamay.quants.layout import Block

# activation formats: what a type's matmul rounds x to first (its vec_dot_type), and so which family runs it
FLOAT, Q8, Q8K = "float", "q8", "q8k"


@dataclass(frozen=True, eq=False)
class Traits:
    """One weight type's entry: its layout and flags, and its own functions, which each family's kernels call as
    numba methods of the entry (`tr.block_dot(...)`). By family: the 32-element block types (Q8) give a block's
    integer dot and its quants (`matmul_legacy`), the super-block types (Q8K) a super-block's integer dot (and
    its mins') and its unpacker (`matmul_kquants`), the float types their loaders and their rounding of x
    (`matmul_float`)."""

    type: GGMLType
    act: str  # FLOAT, Q8 or Q8K
    block: Block | None = None  # the block layout (llamay.quants), None for the float types
    signed: bool = False  # unpacked quants are int8 (else uint8)
    strip: object | None = None  # `strips.StripFormat` of the types repacked in strips of eight rows
    block_dot: Callable | None = None  # the block at w[o] · its activation block: Q8 (w, o, x), Q8K (w, o, xq, xb)
    block_quants: Callable | None = None  # its quants one per byte: Q8 (w, o) all 32, Q4_K / Q5_K (w, o, c) chunk c
    block_scale: Callable | None = None  # Q8: the block's scale as float32, (w, o): its fp16 d, MXFP4's E8M0 e
    block_mins: Callable | None = None  # Q8K with mins: (w, o, bsum, gb) -> the mins' dot with the bsums
    min_lanes: bool = False  # Q8K: the mins' dot is eight lanes (Q4_K, Q5_K), else one integer (Q2_K)
    block_unpack: Callable | None = None  # Q8K: a super-block's quants one per byte, its group ints and floats
    load8: Callable | None = None  # FLOAT: 8 weights at a byte offset, as f32x8
    load1: Callable | None = None  # FLOAT: one weight as float32
    rounded: Callable | None = None  # FLOAT: (x, count, xr) -> x as the dots read it: xr rounded, or x itself

    @property
    def has_min(self) -> bool:
        """A constant term per block or group: d·q + m (Q4_1, Q5_1), (d·sc)·q - dmin·min (Q2_K, Q4_K, Q5_K)."""
        return self.block is not None and ("m" in self.block.offset or "dmin" in self.block.offset)

    @property
    def block_bytes(self) -> int:
        return type_size(self.type)

    @property
    def d_at(self) -> int:
        """Byte offset of the block's fp16 scale d."""
        return self.block.offset["d"] if self.block is not None else 0

    @property
    def dmin_at(self) -> int:
        """Byte offset of a super-block's fp16 dmin (0 without one)."""
        return self.block.offset.get("dmin", 0) if self.block is not None else 0

    @property
    def m_at(self) -> int:
        """Byte offset of the block's fp16 min m (0 without one)."""
        return self.block.offset.get("m", 0) if self.block is not None else 0

    @property
    def elem_bytes(self) -> int:
        return type_size(self.type)

    def __reduce__(self):  # what numba's cache key pickles for a driver's closure: the type id, the same everywhere
        return (traits_of, (int(self.type),))


def traits_of(t: int) -> Traits:
    """The entry of a type id (what a pickled Traits loads as)."""
    from .table import TRAITS  # the table imports the families, which import this module

    return TRAITS[GGMLType(t)]


class TraitsType(types.Type):
    """The numba type of one entry: its methods are the entry's functions, its attributes its constants."""

    def __init__(self, traits: Traits) -> None:
        self.traits = traits
        super().__init__(name=f"Traits({traits.type.name})")


@typeof_impl.register(Traits)
def _typeof_traits(val: Traits, c) -> TraitsType:
    return TraitsType(val)


register_model(TraitsType)(models.OpaqueModel)


@lower_constant(TraitsType)
def _traits_constant(context, builder, ty, pyval):
    return context.get_dummy_value()  # nothing at run time: every use resolved while typing


def _forwarder(fn: Callable, arity: int) -> Callable:
    """`(tr, a0, .., a{arity-1}) -> fn(a0, ..)`: the implementation of a method, or `fn(tr, a0, ..)` for a function
    whose first parameter is `tr` (one shared by several types, which calls their own functions in turn). Written
    out with its arguments because numba cannot inline a call with *args, and `fn` (an inline="always" kernel)
    must be inlined."""
    params = ", ".join(f"a{i}" for i in range(arity))
    py_func = getattr(fn, "py_func", None)
    takes_tr = py_func is not None and next(iter(inspect.signature(py_func).parameters), None) == "tr"
    scope = {"fn": fn}
    call = f"fn(tr, {params})" if takes_tr else f"fn({params})"
    exec(f"def method(tr, {params}):\n    return {call}", scope)  # a fixed text: no input reaches it
    return scope["method"]


def _method(name: str) -> None:
    @overload_method(TraitsType, name, inline="always", strict=False)
    def typer(tr, *args):
        fn = getattr(tr.traits, name)
        return None if fn is None else _forwarder(fn, len(args))


def _constant(name: str) -> None:
    @overload_attribute(TraitsType, name, inline="always")
    def typer(tr):
        value = getattr(tr.traits, name)
        return lambda tr: value


for _name in ("block_dot", "block_quants", "block_scale", "block_mins", "block_unpack", "load8", "load1", "rounded"):
    _method(_name)
for _name in ("has_min", "min_lanes", "block_bytes", "d_at", "dmin_at", "m_at", "elem_bytes"):
    _constant(_name)


@overload_method(TraitsType, "quants", inline="always")
def _quants(tr, q):
    """The panel scratch q (uint8) as the type's unpacked quants: int8 for the signed types."""
    if tr.traits.signed:
        return lambda tr, q: q.view(np.int8)
    return lambda tr, q: q
