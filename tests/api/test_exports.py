"""The package root exports the library lazily: `import llamay` loads no engine (the CLI and the browser worker
import it first), the first use of a name does, and an unknown name is an AttributeError naming it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import llamay
import llamay.api


def test_every_exported_name_is_the_libraries():
    for name in llamay.__all__:
        assert getattr(llamay, name) is not None
    assert llamay.load is llamay.api.load and llamay.Model is llamay.api.Model
    assert llamay.constraints.json_schema is llamay.constraints.spec.json_schema
    assert issubclass(llamay.ContextClosedError, llamay.LlamayError)
    assert set(llamay.__all__) <= set(dir(llamay))
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        llamay.nothing  # noqa: B018


@pytest.mark.native_only
def test_importing_the_package_loads_no_engine():
    code = "import sys, llamay; print(sorted(m for m in sys.modules if m.startswith('llamay')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['llamay', 'llamay.errors']"
