"""`llamay.load(source)`: a GGUF from a path, from bytes, or (natively) a stored or Ollama name.

Natively a name resolves as `-m` does for every command (`llamay.native.store.resolve`: a file, llamay's store,
the catalogue, Ollama's store) and a stored model's TEMPLATE, SYSTEM, MESSAGE and PARAMETER layers apply. Under
Pyodide there is no store and no download: the page fetches the file into Pyodide's file system (or into
memory) and passes the path (or the bytes). The kernel backend is the fastest one here (numba natively, the
wasm kernels in the browser, else portable), as everywhere else; `backend=` or `LLAMAY_BACKEND` choose.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from ..gguf import GGUFFile, open_gguf
from ..kernels import Backend
from ..model import Model as CoreModel
from ..model.tensor_check import check_tensor_data
from ..platform import IS_PYODIDE
from .errors import ModelSourceError
from .model import Defaults, Model

Source = str | os.PathLike[str] | bytes | bytearray | memoryview


def load(
    source: Source,
    *,
    backend: Backend | str | None = None,
    n_ctx: int | None = None,
    pull: bool = True,
    check_tensors: bool = False,
) -> Model:
    """Open a model. `n_ctx`: the context of `complete`/`chat` (default: the stored model's num_ctx, else the
    training context up to 4096). `pull`: a catalogue name not stored yet is downloaded (natively, like `-m`).
    `check_tensors`: also read every weight (NaN, infinities) before the first use."""
    if isinstance(source, bytes | bytearray | memoryview):
        model = _wrap(GGUFFile.from_buffer(source, "<bytes>"), backend, n_ctx)
    elif not isinstance(source, str | os.PathLike):
        raise ModelSourceError(f"llamay.load takes a path, a model name or the bytes of a GGUF, not {source!r}")
    else:
        ref = os.fspath(source)
        if "://" in ref:
            raise ModelSourceError(
                f"llamay.load does not download {ref}: fetch it first (in the browser: into Pyodide's file "
                "system, or as bytes) and pass the path or the bytes"
            )
        path = Path(ref).expanduser()
        if path.is_file():
            model = _wrap(open_gguf(path), backend, n_ctx)
        elif IS_PYODIDE:
            raise ModelSourceError(f"no such model file: {path} (under Pyodide, fetch it into the file system first)")
        else:
            model = _stored(ref, backend, n_ctx, pull)
    if check_tensors:
        try:
            check_tensor_data(model.core.file)
        except BaseException:
            model.close()
            raise
    return model


def _wrap(f: GGUFFile, backend: Any, n_ctx: int | None) -> Model:
    try:
        return Model(CoreModel(f, backend), n_ctx=n_ctx)
    except BaseException:
        f.close()
        raise


def _stored(ref: str, backend: Any, n_ctx: int | None, pull: bool) -> Model:
    """A name of llamay's store, the catalogue or Ollama's store (native only), its layers applied."""
    try:
        from ..native.store import resolve
    except ImportError as e:  # an install without the native extras
        raise ModelSourceError(f"{ref!r} is not a file, and model names need llamay's native store: {e}") from None

    r = resolve(ref, pull=pull, log=lambda msg: print(msg, file=sys.stderr))
    opts = r.options
    defaults = Defaults(dict(opts.sampler), tuple(opts.stop), opts.num_predict, opts.num_ctx)
    return Model(r.load(backend), r.name, defaults, n_ctx)
