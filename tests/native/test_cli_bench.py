"""`llamay bench` wiring on a tiny model (speed itself is for the benchmark, not for tests)."""

from __future__ import annotations

import pytest

from llamay.kernels import available_backends
from llamay.native.cli import main
from tests import paths

pytestmark = pytest.mark.native_only


@pytest.mark.skipif("numba" not in available_backends(), reason="needs the numba backend")
def test_bench_prints_a_table(capsys):
    assert main(["bench", "-m", str(paths.stories("q4_0")), "-p", "16", "-n", "4", "-r", "1", "-t", "1"]) == 0
    out = capsys.readouterr().out
    assert "prompt 16 tokens, 4 generated" in out
    assert any(line.split()[:2] == ["1", "llamay"] for line in out.splitlines())
    assert "peak RSS (llamay)" in out
