"""The one place that decides which platform llamay runs on (Pyodide in a browser/Node, or native CPython)."""

from __future__ import annotations

import sys

# micropip's test: Pyodide's core module is loaded before any user code runs.
IS_PYODIDE = "_pyodide_core" in sys.modules or sys.platform == "emscripten"
LITTLE_ENDIAN = sys.byteorder == "little"
