"""llamay against llama.cpp's own outputs (tests/goldens, made by scripts/goldens/gen_llamacpp_goldens.py, with
llama.cpp's KV cache in f32 and flash attention off: the computation llamay does).

At every step the model is fed llama.cpp's greedy tokens (teacher forcing), so every step is compared even after
a near-tie. Where the top two tokens are not nearly tied, the greedy choice must agree; the top-5 log-probabilities
must agree within 0.05 (float weights) or 0.3 (quantised weights), as the issue states. Free-running greedy text
must equal llama.cpp's up to the first near-tie.

Quantised weights get a wider near-tie band: their activations are rounded to 8 bits before every dot product, a
step function, so a float difference of one ulp anywhere (summation order) can move one value to the next level
and the two engines then drift apart by a few hundredths (measured on stories260K: bit-identical logits for
32 steps on one prompt; a single level flip at step 9 on another, after which logprobs differ by up to 0.14).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from llamay.generate import decode_step, prefill
from llamay.ggml_types import GGMLType
from llamay.model import load_model
from llamay.sampling import log_softmax
from tests import paths
from tests.models.tiny import ARCHES, SPECS, TINY_QUANTISED, write_tiny

GOLDENS = Path(__file__).resolve().parent.parent / "goldens"
NEAR_TIE_FLOAT = 0.02  # a top-two logprob gap below this may flip on any rounding difference
NEAR_TIE_QUANT = 0.15  # quantised activations make whole-step differences (see above)
TOL_FLOAT = 0.05
TOL_QUANT = 0.3
FLOAT_TYPES = ("f32", "f16", "bf16")
TINY_TOL = 0.05  # the tiny models are F32: the float tolerance
REFERENCE_SPREAD = 2.0  # registry models: times llama.cpp's own prefill/decode spread (see the test)


def golden(name: str) -> dict:
    return json.loads((GOLDENS / f"{name}.json").read_text())


def _logprobs(model, st) -> list[float]:
    return log_softmax(model.backend.read_f32(st.logits, 0, model.cfg.n_vocab))


def compare_case(model, case: dict, tol: float, near_tie: float) -> None:
    st = model.new_state(n_ctx=len(case["prompt_ids"]) + len(case["steps"]) + 1)
    prefill(model, st, case["prompt_ids"])
    free_running = True
    for i, step in enumerate(case["steps"]):
        lp = _logprobs(model, st)
        for tok, want in step["top"]:
            assert abs(lp[tok] - want) <= tol, f"step {i}: logprob of {tok} is {lp[tok]:.4f}, llama.cpp {want:.4f}"
        ours = max(range(len(lp)), key=lp.__getitem__)
        if step["gap"] >= near_tie:
            assert ours == step["id"], f"step {i}: greedy picks {ours}, llama.cpp {step['id']} (gap {step['gap']})"
        else:
            free_running = False
        if free_running:
            assert ours == step["id"]
        decode_step(model, st, step["id"])


STORIES_CASES = [(t, c["name"]) for t in paths.STORIES_TYPES for c in golden(f"stories260K-{t}")["cases"]]


@pytest.mark.parametrize(("type_name", "case_name"), STORIES_CASES)
def test_stories_matches_llamacpp(backend_name, type_name, case_name):
    g = golden(f"stories260K-{type_name}")
    case = next(c for c in g["cases"] if c["name"] == case_name)
    exact = type_name in FLOAT_TYPES
    with load_model(paths.stories(type_name), backend_name) as m:
        compare_case(m, case, TOL_FLOAT if exact else TOL_QUANT, NEAR_TIE_FLOAT if exact else NEAR_TIE_QUANT)


@pytest.mark.parametrize(
    ("golden_name", "model_name"),
    [("smollm2-135m-instruct-q4_1", paths.SMOLLM2), ("gemma3-270m-q4_k_m", paths.GEMMA3)],
)
def test_registry_models_match_llamacpp(backend_name, golden_name, model_name):
    if backend_name == "portable":
        pytest.skip("pure Python is too slow for 100M+ weights; `llamay verify` ties portable to the fast backends")
    g = golden(golden_name)
    path = paths.registry_model(model_name)
    with load_model(path, backend_name) as m:
        for case in g["cases"]:
            if case["name"] == "plain":
                assert m.tokenizer.encode(case["prompt"]) == case["prompt_ids"]
            # llama.cpp's own one-batch prefill and token-by-token decode of this case differ by
            # decode_vs_prefill_max_diff (0.35 and 0.54 on SmolLM2, 0.21 on gemma3, with the same f32 KV cache):
            # deep W8A8 models move whole activation levels on float summation order. A reference is not
            # matched more tightly than it matches itself, so the band widens to twice that spread (measured, top-5
            # logprobs over all steps: SmolLM2 numba 0.36 / 0.62, wasm 0.47 / 0.81; gemma3 0.18-0.41).
            tol = max(TOL_QUANT, REFERENCE_SPREAD * case["decode_vs_prefill_max_diff"])
            compare_case(m, case, tol, NEAR_TIE_QUANT)


TINY_DECODERS = [a for a in ARCHES if not SPECS[a].encoder]


@pytest.mark.parametrize("arch", TINY_DECODERS)
def test_tiny_decoders_match_llamacpp(backend_name, arch, tmp_path):
    g = golden(f"tiny-{arch}")
    path = tmp_path / f"tiny-{arch}.gguf"
    write_tiny(arch, path, seed=g["model"]["seed"])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == g["model"]["sha256"]
    with load_model(path, backend_name) as m:
        for case in g["cases"]:
            st = m.new_state(n_ctx=len(case["prompt_ids"]) + 1)
            prefill(m, st, case["prompt_ids"])
            lp = _logprobs(m, st)
            worst = max(abs(a - b) for a, b in zip(lp, case["last_logprobs"], strict=True))
            assert worst <= TINY_TOL, f"{arch}: full log-softmax differs by {worst:.4f}"
            compare_case(m, case, TINY_TOL, NEAR_TIE_FLOAT)


@pytest.mark.parametrize("arch", TINY_QUANTISED)
def test_tiny_quantised_decoders_match_llamacpp(backend_name, arch, tmp_path):
    pytest.importorskip("llamay.quants")
    g = golden(f"tiny-{arch}-q8_0")
    path = tmp_path / f"tiny-{arch}-q8_0.gguf"
    write_tiny(arch, path, seed=g["model"]["seed"], ggml_type=GGMLType.Q8_0)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == g["model"]["sha256"]
    with load_model(path, backend_name) as m:
        for case in g["cases"]:
            st = m.new_state(n_ctx=len(case["prompt_ids"]) + 1)
            prefill(m, st, case["prompt_ids"])
            lp = _logprobs(m, st)
            worst = max(abs(a - b) for a, b in zip(lp, case["last_logprobs"], strict=True))
            assert worst <= TOL_QUANT, f"{arch} Q8_0: full log-softmax differs by {worst:.4f}"
            compare_case(m, case, TOL_QUANT, NEAR_TIE_QUANT)


POOLING_IDS = {"mean": 1, "cls": 2, "last": 3}  # `{arch}.pooling_type` values


def _with_pooling(path: Path, arch: str, pooling: str, out: Path) -> Path:
    """The file at `path` with its pooling_type set to `pooling` (the golden's other cases)."""
    from llamay.gguf import GGUFFile, GGUFValueType, GGUFWriter

    key = f"{arch}.pooling_type"
    with GGUFFile.open(path) as f:
        w = GGUFWriter()
        for fld in f.fields.values():
            w.add(fld.key, POOLING_IDS[pooling] if fld.key == key else fld.value, fld.type)
        if key not in f.fields:
            w.add(key, POOLING_IDS[pooling], GGUFValueType.UINT32)
        for t in sorted(f.tensors.values(), key=lambda t: t.index):
            w.add_tensor(t.name, t.type, t.shape, bytes(f.tensor_data(t)))
        w.write(out)
    return out


@pytest.mark.parametrize("arch", [a for a in ARCHES if SPECS[a].encoder])
def test_tiny_encoders_match_llamacpp(backend_name, arch, tmp_path):
    """Pooled embeddings with each pooling type (mean, the file's own; cls; last) against llama.cpp's."""
    g = golden(f"tiny-{arch}")
    path = tmp_path / f"tiny-{arch}.gguf"
    write_tiny(arch, path, seed=g["model"]["seed"])
    assert hashlib.sha256(path.read_bytes()).hexdigest() == g["model"]["sha256"]
    from llamay.engine import Engine

    assert {c["pooling"] for c in g["cases"]} == set(POOLING_IDS)
    for case in g["cases"]:
        file = path if case["pooling"] == "mean" else _with_pooling(path, arch, case["pooling"], tmp_path / "p.gguf")
        with load_model(file, backend_name) as m:
            assert m.cfg.pooling.value == case["pooling"]
            assert [m.tokenizer.encode(s) for s in case["sentences"]] == case["token_ids"]
            got = Engine(m).embed(case["sentences"])
        for a, b in zip(got, case["embeddings"], strict=True):
            dot = sum(x * y for x, y in zip(a, b, strict=True))
            cos = dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
            assert cos >= 0.9999, f"{arch} {case['pooling']}: cosine {cos:.6f}"
