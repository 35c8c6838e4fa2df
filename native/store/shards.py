"""Split models (llama.cpp's `NAME-00001-of-0000N.gguf` sets) in the store.

A split model's shards are the model layers of its manifest, in order, each a blob named by its digest like
every blob. The loader finds a first shard's siblings by llama.cpp's naming rule, so a split model is opened
through a *view*: a folder `.shards/<key>/` in llamay's store holding `model-0000i-of-0000N.gguf`, symbolic links
to the blobs, made when the model is resolved (a dotfolder: nothing lists or serves it). A view is derived data:
remade when missing or stale, and `prune` removes the views whose blobs are gone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from llamay.gguf.split import split_path

FOLDER = ".shards"
PREFIX = "model"  # the views' shard names: model-00001-of-00003.gguf ...
KEY_HEX = 16


def view(root: Path, blobs: list[Path]) -> Path:
    """The path to open a model whose GGUF is `blobs` (one blob: itself; shards: the first link of their view)."""
    if len(blobs) == 1:
        return blobs[0]
    names = [split_path(PREFIX, i, len(blobs)) for i in range(len(blobs))]
    key = hashlib.sha256("\n".join(str(b.resolve()) for b in blobs).encode()).hexdigest()[:KEY_HEX]
    base = root / FOLDER
    folder = base / key
    if not _intact(folder, names, blobs):
        base.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".new-", dir=base))
        try:
            for name, blob in zip(names, blobs, strict=True):
                (tmp / name).symlink_to(blob.resolve())
            shutil.rmtree(folder, ignore_errors=True)
            with contextlib.suppress(OSError):  # another process made it meanwhile: theirs is the same
                os.rename(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder / names[0]


def _intact(folder: Path, names: list[str], blobs: list[Path]) -> bool:
    try:
        return all(os.readlink(folder / n) == str(b.resolve()) for n, b in zip(names, blobs, strict=True))
    except OSError:
        return False


def remove_dangling(root: Path) -> list[Path]:
    """Remove the views some of whose blobs are gone (after `rm` and `prune`); what was removed."""
    base = root / FOLDER
    removed = []
    if base.is_dir():
        for folder in base.iterdir():
            if folder.name.startswith(".new-"):  # a view being made
                continue
            links = list(folder.iterdir()) if folder.is_dir() else []
            if not links or not all(p.exists() for p in links):  # exists() follows the link
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
    return removed
