"""Where the tests find their data: ../shared/fixtures and the registry-model store (`llamay pull --all`)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(os.environ.get("LLAMAY_FIXTURES", REPO.parent / "shared" / "fixtures"))
MODELS = FIXTURES / "models"
VOCAB = FIXTURES / "vocab"
STORIES = MODELS / "stories260K"
STORIES_TYPES = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0")
MINILM = MODELS / "all-minilm-l6-v2" / "all-MiniLM-L6-v2-f16.gguf"
REGISTRY_CACHE = Path(os.environ.get("LLAMAY_MODELS_DIR", Path.home() / ".cache" / "llamay" / "models"))  # old layout
STORE = Path(os.environ.get("LLAMAY_MODELS", Path.home() / ".cache" / "llamay"))  # `llamay pull` puts blobs here
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = "gemma-3-270m-q4_k_m.gguf"
# the catalogue's digests (tests/native/test_store.py checks they agree): a registry model's blob, found without
# importing the native store (the tests run under Pyodide too)
REGISTRY_SHA256 = {
    SMOLLM2: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    GEMMA3: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
}
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def stories(type_name: str = "f32") -> Path:
    return STORIES / f"stories260K-{type_name}.gguf"


def registry_path(name: str) -> Path | None:
    """A registry model (by its file name): the old layout's file, else its blob in the store, else None."""
    for path in (REGISTRY_CACHE / name, STORE / "blobs" / f"sha256-{REGISTRY_SHA256[name]}"):
        if path.is_file():
            return path
    return None


def registry_model(name: str) -> Path:
    """A registry model under its file name (tests name models by file): the old layout's file, or the store's
    blob hard-linked under that name in a temporary folder; skipped locally when absent, an error under CI (it
    must be fetched)."""
    path = registry_path(name)
    if path is None:
        msg = f"{REGISTRY_CACHE / name} is missing: run `llamay pull --all`"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    if path.name == name or sys.platform == "emscripten":  # under Pyodide a copy would fill its memory
        return path
    named = Path(tempfile.gettempdir()) / f"llamay-registry-models-{os.getuid()}" / name
    if not (named.is_file() and named.stat().st_ino == path.stat().st_ino):
        named.parent.mkdir(exist_ok=True)
        temp = named.with_name(f".{name}.{os.getpid()}")
        try:
            os.link(path, temp)
        except OSError:
            shutil.copyfile(path, temp)
        os.replace(temp, named)
    return named


def web_py_module():
    """web/py/llamay_web.py, the browser worker's Python side: a web asset (not in the wheel), stdlib-only at
    import, so its Session runs natively too."""
    path = REPO / "web" / "py" / "llamay_web.py"
    if not path.exists():
        pytest.skip("web/py is not in this checkout")
    spec = importlib.util.spec_from_file_location("llamay_web_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
