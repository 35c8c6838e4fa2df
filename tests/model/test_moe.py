"""The mixture-of-experts models against llama.cpp (tiny random-weight files, F32 and Q8_0; goldens by
scripts/goldens/gen_llamacpp_goldens.py), the engine's invariants on them (`llamay verify`: batched prefill ==
token-by-token decode, batched sequences == alone, prefix reuse == cold), and the grouping of rows by expert."""

from __future__ import annotations

import hashlib

import pytest

from llamay.generate import prefill
from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFFile
from llamay.kernels import get_backend
from llamay.model import Model, load_model
from llamay.model.forward import forward
from llamay.verify import verify
from tests.model.test_goldens import (
    NEAR_TIE_FLOAT,
    NEAR_TIE_QUANT,
    TINY_TOL,
    TOL_QUANT,
    _logprobs,
    compare_case,
    golden,
)
from tests.models.tiny import MOE_ARCHES, MOE_VARIANTS, write_tiny

VARIANTS = [(a, GGMLType.F32) for a in MOE_ARCHES] + list(MOE_VARIANTS)


def _name(arch: str, t: GGMLType) -> str:
    return f"tiny-{arch}" + ("" if t == GGMLType.F32 else f"-{t.name.lower()}")


@pytest.mark.parametrize(("arch", "t"), VARIANTS, ids=lambda v: getattr(v, "name", v))
def test_matches_llamacpp(backend_name, arch, t, tmp_path):
    g = golden(_name(arch, t))
    path = tmp_path / f"{_name(arch, t)}.gguf"
    write_tiny(arch, path, seed=g["model"]["seed"], ggml_type=t)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == g["model"]["sha256"]
    exact = t == GGMLType.F32
    tol, near_tie = (TINY_TOL, NEAR_TIE_FLOAT) if exact else (TOL_QUANT, NEAR_TIE_QUANT)
    with load_model(path, backend_name) as m:
        for case in g["cases"]:
            st = m.new_state(n_ctx=len(case["prompt_ids"]) + 1)
            prefill(m, st, case["prompt_ids"])
            lp = _logprobs(m, st)
            worst = max(abs(a - b) for a, b in zip(lp, case["last_logprobs"], strict=True))
            assert worst <= tol, f"{arch} {t.name}: full log-softmax differs by {worst:.4f}"
            compare_case(m, case, tol, near_tie)


@pytest.mark.parametrize(("arch", "t"), VARIANTS, ids=lambda v: getattr(v, "name", v))
def test_verify_invariants(backend_name, arch, t, tmp_path):
    path = tmp_path / f"{_name(arch, t)}.gguf"
    write_tiny(arch, path, ggml_type=t)
    with GGUFFile.open(path) as f:
        checks = verify(f, [backend_name], n_tokens=12, n_tokens_portable=6, log=lambda s: None)
    failed = [c for c in checks if not c.passed]
    assert checks and not failed, failed


class Spy:
    """The portable backend, recording every matmul's weight name and row count."""

    def __init__(self) -> None:
        self.be = get_backend("portable")
        self.calls: list[tuple[str, int]] = []

    def __getattr__(self, name):
        return getattr(self.be, name)

    def matmul(self, out, w, x, n):
        self.calls.append((w.name, n))
        self.be.matmul(out, w, x, n)

    def moe_experts(self, *args):  # portable's, its matmuls through this spy
        type(self.be).moe_experts(self, *args)


def test_rows_are_grouped_by_expert_and_decode_reads_only_the_chosen(tmp_path):
    path = tmp_path / "tiny-qwen3moe.gguf"
    write_tiny("qwen3moe", path)
    spy = Spy()
    with Model(GGUFFile.open(path), spy) as m:
        cfg = m.cfg
        st = m.new_state(n_ctx=32)
        prompt = list(range(1, 17))
        forward(m, st, prompt)
        experts = [(name, n) for name, n in spy.calls if "_exps" in name]
        for il in range(cfg.n_layer):
            mine = [(name, n) for name, n in experts if name.startswith(f"blk.{il}.")]
            gate = [(name, n) for name, n in mine if "gate_exps" in name]
            # one matmul per expert some token chose, over all the rows it got
            assert len({name for name, _ in gate}) == len(gate) <= cfg.n_expert
            assert sum(n for _, n in gate) == len(prompt) * cfg.n_expert_used
        spy.calls.clear()
        forward(m, st, [5])
        gate = [(name, n) for name, n in spy.calls if "gate_exps" in name]
        assert len(gate) == cfg.n_layer * cfg.n_expert_used and all(n == 1 for _, n in gate)


def _handles(node, out: list, seen: set) -> list:
    """Every bound weight's backend handle under `node` (the model's weights: dataclasses, tuples, dicts)."""
    if id(node) in seen or node is None or isinstance(node, str | bytes | int | float):
        return out
    seen.add(id(node))
    if hasattr(node, "handle") and hasattr(node, "n_in"):
        out.append(node.handle)
    elif isinstance(node, tuple | list):
        for x in node:
            _handles(x, out, seen)
    elif isinstance(node, dict):
        for x in node.values():
            _handles(x, out, seen)
    elif hasattr(node, "__dataclass_fields__"):
        for name in node.__dataclass_fields__:
            _handles(getattr(node, name), out, seen)
    return out


@pytest.mark.parametrize("t", [GGMLType.F32, GGMLType.Q8_0], ids=lambda v: v.name)
def test_a_closed_model_leaves_nothing_in_the_backend(backend_name, t, tmp_path):
    """The backend lives as long as the process and runs model after model (a server loads and unloads them):
    what it caches per layer to save a decode step's Python (qkv's fused kernel, the experts' strips) must not
    keep a closed model's weights alive. Every handle of the model is weakly referenced, the model decodes,
    closes, and every handle must be gone."""
    import contextlib
    import gc
    import weakref

    path = tmp_path / "m.gguf"
    write_tiny("qwen3moe", path, ggml_type=t)
    m = load_model(path, backend_name)
    handles = _handles(m.weights, [], set())
    refs = []
    while handles:
        with contextlib.suppress(TypeError):  # (a backend whose handles are plain values holds nothing to free)
            refs.append(weakref.ref(handles.pop()))
    st = m.new_state(n_ctx=16)
    prefill(m, st, [1, 2, 3])
    for tok in (4, 5, 6):
        forward(m, st, [tok])
    m.close()
    del m, st
    gc.collect()
    alive = sum(r() is not None for r in refs)
    assert alive == 0, f"{alive} of {len(refs)} weight handles outlive their closed model on {backend_name}"
