"""Where the tests find their data: ../shared/fixtures and the registry-model store (`llamay pull --all`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(os.environ.get("LLAMAY_FIXTURES", REPO.parent / "shared" / "fixtures"))
MODELS = FIXTURES / "models"
VOCAB = FIXTURES / "vocab"
STORIES = MODELS / "stories260K"
STORIES_TYPES = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0")
MINILM = MODELS / "all-minilm-l6-v2" / "all-MiniLM-L6-v2-f16.gguf"
REGISTRY_CACHE = Path(os.environ.get("LLAMAY_MODELS_DIR", Path.home() / ".cache" / "llamay" / "models"))
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = "gemma-3-270m-q4_k_m.gguf"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def stories(type_name: str = "f32") -> Path:
    return STORIES / f"stories260K-{type_name}.gguf"


def registry_model(name: str) -> Path:
    """A registry model (by its file name) from the store: its blob once pulled, else the old layout's file;
    skipped locally when absent, an error under CI (it must be fetched)."""
    path = REGISTRY_CACHE / name
    try:
        from llamay.native.store import CATALOGUE, llamay_store
    except ImportError:  # under Pyodide: the old layout's folder only
        CATALOGUE = {}
    for e in CATALOGUE.values():
        blob = llamay_store().blob(f"sha256:{e.sha256}")
        if e.file == name and blob.is_file() and blob.stat().st_size == e.size:
            path = blob
    if not path.exists():
        msg = f"{path} is missing: run `llamay pull --all`"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return path
