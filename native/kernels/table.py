"""The numba backend's traits table, keyed by GGMLType (each family module declares its types' entries), and each
type's kernels, made once from its entry by its family's drivers (compiled on first call, cached on disk)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llamay.ggml_types import GGMLType

from . import matmul_float, matmul_kquants, matmul_legacy
from .drivers import GET_ROWS, MATMUL
from .traits import Traits

TRAITS: dict[GGMLType, Traits] = {**matmul_float.TRAITS, **matmul_legacy.TRAITS, **matmul_kquants.TRAITS}


@dataclass(frozen=True)
class TypeKernels:
    traits: Traits
    matmul: Callable  # (out, w, row_bytes, n_out, x, n, n_in, *scratch of its activation format)
    get_rows: Callable  # (out, w, row_bytes, ids, n, n_in, *scratch of its activation format)


KERNELS: dict[GGMLType, TypeKernels] = {
    t: TypeKernels(tr, MATMUL[tr.act](tr), GET_ROWS[tr.act](tr)) for t, tr in TRAITS.items()
}
