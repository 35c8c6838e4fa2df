"""The grammar automaton and its token masks (op `pda`), compiled by numba from the reference's own source (one
scalar source, `llamay.kernels.pda`, `pda_walk`, `pda_automaton` and `pda_tables`): each module's text is run again
as a module of the package `pda_jit` here, with `jit` set to numba's njit, so that its relative imports find the
compiled siblings (and numba's on-disk cache, beside the sources, finds them again in the next process; it is dropped
when any of them changes, as the other kernels' is: `drop_stale_cache`)."""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from pathlib import Path

from numba import njit

from llamay.kernels import pda_layout

from . import drop_stale_cache

PACKAGE = __name__ + "_jit"
_SOURCES = ("pda_layout", "pda_tables", "pda_automaton", "pda_walk", "pda")


def _compiled(name: str) -> types.ModuleType:
    ref = importlib.import_module(f"llamay.kernels.{name}")
    mod = types.ModuleType(f"{PACKAGE}.{name}")
    mod.__package__ = PACKAGE
    # no reference counting: the op allocates nothing, and counting the arrays passed to each of its small
    # functions was a fifth of its time
    mod.jit = njit(cache=True, _nrt=False)
    sys.modules[mod.__name__] = mod  # numba's cache finds a function's module by name
    exec(compile(inspect.getsource(ref), inspect.getfile(ref), "exec"), mod.__dict__)
    return mod


if PACKAGE not in sys.modules:
    _ref_dir = Path(inspect.getfile(pda_layout)).parent
    drop_stale_cache(_ref_dir / "__pycache__", [_ref_dir / f"{n}.py" for n in _SOURCES], "llamay-pda.sha256", "pda")
    _package = types.ModuleType(PACKAGE)
    _package.__path__ = []
    sys.modules[PACKAGE] = _package
    sys.modules[f"{PACKAGE}.pda_layout"] = pda_layout
    for _name in _SOURCES[1:]:  # (in order: each imports the ones before it)
        _compiled(_name)
pda = sys.modules[f"{PACKAGE}.pda"].pda
