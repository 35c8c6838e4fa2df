"""The kernel ops are declared once (`llamay.kernels.ops`): the interface and every backend declare each op's
method with its parameters in the declared order, and the wasm side's tables are made from the declaration."""

from __future__ import annotations

import inspect

import pytest

from llamay.kernels import BACKENDS
from llamay.kernels.interface import Backend
from llamay.kernels.ops import BY_NAME, KINDS, OPS, op, parse_export
from tests.backends import require_backend

# the interface's methods that are not kernel ops (memory, the flush point, weights)
MEMORY = {"alloc_f32", "alloc_i32", "write_f32", "write_i32", "read_f32", "copy", "sync", "bind"}


def _methods(cls) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(fn, eval_str=False)
        for name, fn in inspect.getmembers(cls, callable)
        if not name.startswith("_") and name not in MEMORY and name not in {"set_threads"}
    }


def test_the_interface_declares_the_ops_in_order_with_their_kinds():
    methods = {n: s for n, s in _methods(Backend).items()}
    assert list(BY_NAME) == [n for n in vars(Backend) if n in methods]  # the same ops, in the same order
    for o in OPS:
        params = list(methods[o.name].parameters.values())[1:]
        assert [(p.name, p.annotation) for p in params] == [(p.name, p.kind) for p in o.params], o.name
        assert methods[o.name].return_annotation == o.result, o.name


@pytest.mark.parametrize("name", list(BACKENDS))
def test_every_backend_runs_every_op_with_the_declared_parameters(name):
    be = require_backend(name)
    for o in OPS:
        method = getattr(type(be), o.name, None)
        assert method is not None, f"{name} lacks {o.name}"
        params = list(inspect.signature(method).parameters)[1:]
        assert params == [p.name for p in o.params], f"{name}.{o.name}"


def test_a_declaration_is_checked():
    with pytest.raises(ValueError, match="unknown kind"):
        op("scale", "x: Buf, s: double, count: int", None)
    with pytest.raises(ValueError, match="named llamay_add"):
        op("scale", "x: Buf, count: int", "void llamay_add(float *x, int32_t count)")
    with pytest.raises(ValueError, match="not one a command word holds"):
        parse_export("void llamay_f(int64_t n)").letters  # noqa: B018
    assert {p.kind for o in OPS for p in o.params} <= KINDS


def test_export_letters_follow_the_c_types():
    ex = parse_export("void llamay_rope(float *x, const int32_t *pos, int32_t n, float theta, double scale)")
    assert ex.letters == ("v", "iiifd")
    assert [p.name for p in ex.params] == ["x", "pos", "n", "theta", "scale"]
    assert parse_export("int32_t llamay_argmax(const float *x, int32_t n)").letters == ("i", "ii")
