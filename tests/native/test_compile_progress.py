"""compile_progress: a kernel numba has to compile is reported (family, count, summary); one it has already
compiled is not (numba announces compiling only on a cache miss, so a warm start prints nothing)."""

from __future__ import annotations

import pytest

numba = pytest.importorskip("numba")

from llamay.native.compile_progress import compile_progress  # noqa: E402


def kernel(module: str):
    """A new jitted function that numba believes lives in `module` (a fresh one: never compiled yet)."""
    ns = {"__name__": module}
    exec("def add_one(x):\n    return x + 1\n", ns)
    return numba.njit(ns["add_one"])


def test_a_compile_is_reported_and_a_compiled_kernel_is_silent():
    f = kernel("llamay.native.kernels.fake_family")
    lines: list[str] = []
    with compile_progress(lines.append, every=0) as p:
        assert f(1) == 2
    assert p.done == 1
    assert "now fake_family" in lines[0] and lines[-1].startswith("llamay: compiled 1 kernels in ")
    lines.clear()
    with compile_progress(lines.append, every=0) as p:
        assert f(2) == 3  # same signature: compiled already
    assert lines == [] and p.done == 0


def test_functions_outside_the_kernels_are_not_counted():
    f = kernel("somewhere.else")
    lines: list[str] = []
    with compile_progress(lines.append, every=0) as p:
        f(1.5)
    assert p.done == 0 and not any("compiled" in line for line in lines)


def test_a_long_compile_keeps_reporting_and_an_idle_one_does_not():
    """One kernel may compile for many seconds: the ticker prints while it runs, and stops when it is done."""
    import time
    from types import SimpleNamespace

    py_func = SimpleNamespace(__module__="llamay.native.kernels.slow_family")
    fake = SimpleNamespace(data={"dispatcher": SimpleNamespace(py_func=py_func)})  # numba's event, as it reads it
    lines: list[str] = []
    with compile_progress(lines.append, every=0.05) as p:
        p.on_start(fake)
        time.sleep(0.4)
        p.on_end(fake)
        during = len(lines)
        time.sleep(0.3)
        after = len(lines)
    assert during >= 3 and all("now slow_family" in line for line in lines[:during]), lines
    assert after == during and lines[-1].startswith("llamay: compiled 1 kernels")
