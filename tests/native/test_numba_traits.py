"""The numba backend's traits table (`native/kernels/traits.py`, `table.py`): one entry per weight type, its
layout from llamay.quants, and one driver per family made from it, cached on disk like every other kernel."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llamay.ggml_types import GGMLType
from llamay.quants import BLOCKS

pytestmark = pytest.mark.native_only
numba = pytest.importorskip("numba")

from numba.core.caching import FunctionCache  # noqa: E402
from numba.core.serialize import dumps  # noqa: E402

from llamay.native.kernels.table import KERNELS, TRAITS  # noqa: E402
from llamay.native.numba_backend import NumbaBackend  # noqa: E402


def test_the_backend_runs_the_types_of_the_table():
    assert NumbaBackend.runnable_types == frozenset(TRAITS) == frozenset(KERNELS)
    for t, tr in TRAITS.items():
        assert tr.type == t
        if tr.block is not None:
            assert tr.block is BLOCKS[t], t.name  # the layout is llamay.quants' declaration
            assert tr.has_min == ("m" in tr.block.offset or "dmin" in tr.block.offset), t.name


def test_every_driver_is_cached_and_strict():
    for t, k in KERNELS.items():
        for kernel in (k.matmul, k.get_rows):
            assert isinstance(kernel._cache, FunctionCache), f"{t.name}: not compiled with cache=True"
            assert not kernel.targetoptions.get("fastmath"), f"{t.name} uses fastmath"


def test_an_entry_pickles_the_same_in_every_process():
    """numba keys a driver's cache on the pickled cells of its closure, which hold the type's entry: bytes that
    changed from one process to the next would recompile every driver in every new process."""
    here = {t.name: dumps(tr).hex() for t, tr in TRAITS.items()}
    code = (
        "import json\n"
        "from numba.core.serialize import dumps\n"
        "from llamay.native.kernels.table import TRAITS\n"
        "print(json.dumps({t.name: dumps(tr).hex() for t, tr in TRAITS.items()}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == here
    assert len(set(here.values())) == len(here)  # and different for each type


def test_a_pickled_entry_loads_as_its_entry():
    import pickle

    assert pickle.loads(pickle.dumps(TRAITS[GGMLType.Q4_K])) is TRAITS[GGMLType.Q4_K]
