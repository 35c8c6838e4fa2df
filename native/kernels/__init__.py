"""numba kernels of the native backend (`llamay.native.numba_backend`), by family:

- `simd`: short LLVM vectors as numba values (loads, stores, fp16, float arithmetic); `quantops`: integer
  operations on quants (unpacking blocks, the W4A8 `dot4`, int32 lanes of super-block scales);
- `activations`: activation rows rounded / quantised to a weight type's vec_dot_type, bit-exact;
- `matmul_legacy`, `matmul_kquants`, `matmul_float`: each weight type's own kernels (row dots, unpackers,
  loaders) and its entry of the traits table (`traits`, merged in `table`); `drivers`: one matmul and one
  get_rows per family, made for a type from its entry; `panels`: the batched (prefill) tiles; `strips`: the
  32-element types repacked in strips of eight rows;
- `attention`: paged-KV attention; `elementwise`: norms, rope, activations, small row kernels.

Every kernel is `@njit(cache=True, fastmath=False)`; `blocks` holds the block layouts as plain ints.

numba's cache keys a compiled kernel on its own source file only, while a kernel here inlines code from its
siblings (`simd`, `quantops`, `activations`, `panels`): an edit to one of those would leave stale machine code in the
others' cache entries. So the cache next to these sources is dropped whenever any of them changes.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_HERE = Path(__file__).parent
_STAMP = "llamay-kernels.sha256"


def _drop_stale_cache() -> None:
    cache = _HERE / "__pycache__"
    digest = hashlib.sha256()
    for src in sorted(_HERE.glob("*.py")):
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    stamp = cache / _STAMP
    try:
        if stamp.read_text() == digest.hexdigest():
            return
    except OSError:
        pass
    try:
        cache.mkdir(exist_ok=True)
        for f in cache.iterdir():
            if f.suffix in (".nbi", ".nbc"):
                f.unlink(missing_ok=True)
        tmp = cache / f"{_STAMP}.{os.getpid()}"
        tmp.write_text(digest.hexdigest())
        tmp.replace(stamp)
    except OSError:  # a read-only install: numba caches elsewhere (NUMBA_CACHE_DIR or the user's cache)
        pass


_drop_stale_cache()
