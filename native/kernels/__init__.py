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


def drop_stale_cache(cache: Path, sources: list[Path], stamp_name: str, prefix: str = "") -> None:
    """Drop numba's cache entries in `cache` (those whose name starts with `prefix`) unless `sources` are what
    they were when the stamp was written."""
    digest = hashlib.sha256()
    for src in sorted(sources):
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    stamp = cache / stamp_name
    try:
        if stamp.read_text() == digest.hexdigest():
            return
    except OSError:
        pass
    try:
        cache.mkdir(exist_ok=True)
        for f in cache.iterdir():
            if f.suffix in (".nbi", ".nbc") and f.name.startswith(prefix):
                f.unlink(missing_ok=True)
        tmp = cache / f"{stamp_name}.{os.getpid()}"
        tmp.write_text(digest.hexdigest())
        tmp.replace(stamp)
    except OSError:  # a read-only install: numba caches elsewhere (NUMBA_CACHE_DIR or the user's cache)
        pass


drop_stale_cache(_HERE / "__pycache__", list(_HERE.glob("*.py")), _STAMP)
