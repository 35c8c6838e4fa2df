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


def _ignore(_signum: int, _frame: object) -> None:
    pass


def pytest_configure(config: pytest.Config) -> None:
    """Tests send Ctrl-C (SIGINT) and SIGHUP to the commands they start. A suite started in the background
    (`cmd &`, nohup) inherits those signals ignored, and an ignored signal stays ignored across exec, so the
    commands would never see them. A handler that does nothing keeps this process as it was, and a handled
    signal is reset to its default in every command started."""
    if IS_PYODIDE:
        return
    import signal

    for sig in (signal.SIGINT, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, _ignore)
