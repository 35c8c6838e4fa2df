"""`llamay run` as a user runs it: the prompt echoed, then the continuation streamed; `llamay bench` wiring on a
tiny model (speed itself is for the benchmark, not for tests)."""

from __future__ import annotations

import pytest

from llamay.kernels import available_backends
from llamay.native.cli import main
from tests import paths

pytestmark = pytest.mark.native_only

BACKENDS = [b for b in ("numba", "portable") if b in available_backends()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_greedy_stories(backend, capsys):
    args = ["run", "-m", str(paths.stories("f32")), "-p", "Once upon a time", "-n", "20", "--temp", "0"]
    assert main([*args, "--backend", backend, "-t", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("Once upon a time, there was a little girl named Lily.")
    assert "20 generated" in captured.err


def test_run_sampling_is_seeded(capsys):
    args = ["run", "-m", str(paths.stories("q8_0")), "-p", "Lily and Ben", "-n", "12", "--seed", "7"]
    outs = []
    for _ in range(2):
        assert main(args) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and outs[0].startswith("Lily and Ben")


def test_run_refuses_a_prompt_longer_than_the_context(capsys):
    args = ["run", "-m", str(paths.stories("f32")), "-p", "Once upon a time " * 20, "-c", "16"]
    assert main(args) == 1
    assert "context" in capsys.readouterr().err


@pytest.mark.skipif("numba" not in available_backends(), reason="needs the numba backend")
def test_bench_prints_a_table(capsys):
    assert main(["bench", "-m", str(paths.stories("q4_0")), "-p", "16", "-n", "4", "-r", "1", "-t", "1"]) == 0
    out = capsys.readouterr().out
    assert "prompt 16 tokens, 4 generated" in out
    assert any(line.split()[:2] == ["1", "llamay"] for line in out.splitlines())
    assert "peak RSS (llamay)" in out
