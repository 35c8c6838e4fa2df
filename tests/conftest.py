"""Suite-wide rules per target. Under Pyodide (Node or a browser) there is no numpy, gguf-py, llama.cpp or
subprocess: tests marked `native_only` are skipped there, by marker, before they import anything."""

from __future__ import annotations

import pytest

from llamay.platform import IS_PYODIDE


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not IS_PYODIDE:
        return
    skip = pytest.mark.skip(reason="native-only reference (gguf-py, llama.cpp, numpy, a subprocess): not under Pyodide")
    for item in items:
        if item.get_closest_marker("native_only"):
            item.add_marker(skip)
