"""wasm/scalar_c.py: the pda op's Python source translated to C (the C kernel itself is tested against the
Python engine in tests/kernels/test_pda.py); here, what it refuses and how it keeps Python's meaning."""

from __future__ import annotations

import ast

import pytest

from llamay.wasm.scalar_c import Refused, _Function, translate


def c_of(src: str, consts: dict[str, int] | None = None) -> str:
    fn = ast.parse(src).body[0]
    return _Function(fn, consts or {}, {fn.name}).text()


@pytest.mark.parametrize(
    ("src", "what"),
    [
        ("def f(A):\n    try:\n        pass\n    except Exception:\n        pass\n", "Try"),
        ("def f(A, n):\n    for x in [1, 2]:\n        n += x\n    return n\n", "for loop"),
        ("def f(A, n):\n    return n / 2\n", "Div"),
        ("def f(A, n):\n    return UNKNOWN + n\n", "'UNKNOWN'"),
        ("def f(A):\n    A = 3\n", "assigning a buffer"),
    ],
)
def test_what_is_outside_the_subset_is_refused_by_name(src, what):
    with pytest.raises(Refused, match=what):
        c_of(src)


def test_python_meaning_kept():
    """Bounds of a range read once and the loop variable's last value kept; a tuple assignment reads every
    value first; // rounds down."""
    text = c_of("def f(A, n):\n    j = -1\n    for j in range(A[0]):\n        A[0] = 0\n    a, b = n, j\n"
                "    b, a = a, b\n    return a // -2\n")  # fmt: skip
    assert "int64_t e1_ = (int64_t)A[INT64_C(0)]" in text and "j = i1_;" in text
    assert "int64_t t2_ = n;" in text and "int64_t t4_ = a;" in text and "pda_floordiv(a, (-INT64_C(2)))" in text


def test_the_pda_modules_translate():
    text = translate()
    assert "static int64_t pda_pda(int32_t *V, int32_t *A)" in text and "pda_walk(" in text
