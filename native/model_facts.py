"""What each model `llamay web` lists is (`/models/index.json`): its architecture, parameters, quantisation, kind
(chat, text or embedding) and context, read from the GGUF's header (`llamay.model_card.summary`), or why it
cannot be read. Kept per file version (path, size, modification time), so a listing reads each file once."""

from __future__ import annotations

import threading
from pathlib import Path

FACTS_KEPT = 256  # file versions remembered; a folder with more is read again as the listing is asked for

_lock = threading.Lock()
_kept: dict[tuple[str, str, int, int], dict] = {}


def model_facts(path: Path, name: str) -> dict:
    """`summary` of the GGUF at `path` (a real path), or {"error": why} for a file that is no usable GGUF; messages
    name the file by `name` (as served), never by its path on this machine."""
    try:
        st = path.stat()
    except OSError as e:
        return {"error": f"{name}: cannot read it: {e.strerror}"}
    key = (str(path), name, st.st_size, st.st_mtime_ns)
    with _lock:
        if key in _kept:
            return _kept[key]
    facts = _read(path, name)
    with _lock:
        if len(_kept) >= FACTS_KEPT:
            _kept.pop(next(iter(_kept)))
        _kept[key] = facts
    return facts


def _read(path: Path, name: str) -> dict:
    from llamay.errors import LlamayError
    from llamay.gguf import open_gguf
    from llamay.model_card import summary

    try:
        with open_gguf(path) as f:
            return summary(f)
    except LlamayError as e:
        return {"error": str(e).replace(str(path), name)}
    except OSError as e:
        return {"error": f"{name}: cannot read it: {e.strerror}"}
