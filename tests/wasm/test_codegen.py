"""The C side made from the Python declarations (wasm/codegen.py): each export's definition in wasm/src takes
the parameters its declaration in `llamay.kernels.ops` gives, by name and type and in order (a swap of two
int32_t would compile); the module runs exactly the types `runtime.RUNNABLE` lists; the generated dispatch
numbers the ops as `runtime.OPS`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llamay.ggml_types import GGMLType
from llamay.kernels.ops import OPS, parse_export

pytestmark = pytest.mark.native_only
wasmtime = pytest.importorskip("wasmtime")

from llamay.wasm import codegen, runtime  # noqa: E402
from llamay.wasm.runtime_wasmtime import WasmtimeRuntime  # noqa: E402

SRC = Path(codegen.__file__).resolve().parent / "src"
DEFINITION = re.compile(r"^EXPORT (\w+ llamay_\w+\([^)]*\))\s*\{", re.M)


def _definitions() -> dict[str, str]:
    """export name -> its definition's prototype, white space folded"""
    out = {}
    for path in SRC.glob("*.c"):
        for m in DEFINITION.finditer(path.read_text()):
            proto = re.sub(r"\s+", " ", m[1]).replace("( ", "(")
            out[parse_export(proto).name] = proto
    return out


def test_each_export_is_defined_as_declared():
    defs = _definitions()
    for o in OPS:
        if o.export is not None:
            assert o.export.name in defs, f"no definition of {o.export.name} in wasm/src"
            got = parse_export(defs[o.export.name])
            assert got.result == o.export.result, o.name
            assert [(p.name, p.kind) for p in got.params] == [(p.name, p.kind) for p in o.export.params], o.name


def test_the_dispatch_numbers_the_ops_as_the_runtime():
    header = codegen.ops_header()
    codes = re.findall(r"LLAMAY_OP_(\w+)(?: = 1)?,?\n", header.split("enum {", 1)[1].split("};", 1)[0])
    assert [f"llamay_{c.lower()}" for c in codes] == list(runtime.OPS)
    assert list(runtime.OPS.values()) == list(range(1, len(runtime.OPS) + 1))


@pytest.mark.parametrize("variant", [runtime.PLAIN, runtime.RELAXED])
def test_the_module_runs_exactly_the_runnable_types(variant):
    rt = WasmtimeRuntime(variant)
    assert {t for t in GGMLType if rt.fn["llamay_supports"](int(t))} == runtime.RUNNABLE
    assert rt.fn["llamay_supports"](-1) == 0 and rt.fn["llamay_supports"](1000) == 0
    assert rt.fn["llamay_block_sizeof"](1000) == -1
    assert rt.fn["llamay_exec"](rt.alloc(8)) == -100  # op 0: none
