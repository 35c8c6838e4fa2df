"""The browser runtime under Node: `web/bin/llamay-web.mjs run` gives the native greedy text."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests import paths
from tests.browser.conftest import REPO_WEB_CLI
from tests.browser.golden_logprobs import golden_logprobs
from tests.browser.native import STORIES_PROMPT, STORIES_TEXT, STORIES_TOKENS, greedy_text
from tests.model.test_goldens import GOLDENS

pytestmark = pytest.mark.native_only


def llamay_web(node: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([node, str(REPO_WEB_CLI), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("backend", ["portable", "wasm"])
def test_run_stories_greedy_equals_native(node, backend):
    model = str(paths.stories("f32"))
    native = greedy_text(model, STORIES_PROMPT, STORIES_TOKENS)
    assert native == STORIES_TEXT
    r = llamay_web(node, "run", "--model", model, "--prompt", STORIES_PROMPT, "-n", str(STORIES_TOKENS), "--temp", "0",
                   "--backend", backend, "--stats")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.rstrip("\n") == native
    print(f"\n[pyodide-node/{backend}] {r.stderr.strip()}")


def test_run_reports_a_missing_model_briefly(node, tmp_path):
    r = llamay_web(node, "run", "--model", str(tmp_path / "none.gguf"), "--prompt", "x", "-n", "1")
    assert r.returncode != 0
    assert "none.gguf" in r.stderr and len(r.stderr) < 2000  # not Pyodide's whole minified module


def test_run_needs_a_model(node):
    r = llamay_web(node, "run", "--prompt", "x")
    assert r.returncode == 2 and "--model" in r.stderr


def test_smollm2_logprobs_under_pyodide_match_native(node):
    """SmolLM2 on the wasm kernels under Pyodide in Node gives the numbers the same kernel module gives natively
    (under wasmtime), to 1e-4: the platform adds nothing. How close those numbers are to llama.cpp's is the
    goldens' test (tests/model/test_goldens.py), which runs on both targets with the same tolerances."""
    from llamay.wasm.backend import WasmBackend
    from llamay.wasm.runtime import load_runtime

    model = str(paths.registry_model(paths.SMOLLM2))
    golden = GOLDENS / "smollm2-135m-instruct-q4_1.json"
    steps = 8
    script = paths.REPO / "tests" / "browser" / "golden_logprobs.py"
    r = llamay_web(node, "python", str(script), model, "wasm", str(golden), "0", str(steps))
    assert r.returncode == 0, r.stderr[-3000:]
    web = json.loads(r.stdout.strip().splitlines()[-1])
    case = json.loads(golden.read_text())["cases"][0]
    native = golden_logprobs(model, WasmBackend(load_runtime(web["variant"])), case, steps)["logprobs"]
    pairs = [(a, b) for wa, na in zip(web["logprobs"], native, strict=True) for a, b in zip(wa, na, strict=True)]
    worst = max(abs(a - b) for a, b in pairs)
    print(f"\n[smollm2] pyodide-node/wasm({web['variant']}) vs native wasm: worst |d logprob| {worst:.2e}")
    assert worst <= 1e-4
