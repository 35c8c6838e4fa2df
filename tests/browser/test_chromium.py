"""The browser runtime in headless Chromium: Pyodide in a Web Worker, served from 127.0.0.1 with COOP/COEP.

- the engine (web/src/engine.mjs + engine-worker.mjs) loads stories260K by URL and its greedy text equals the
  native text, on each backend; from a File too, and it goes on after an abort;
- the repository's tests/ run with pytest inside a worker (all but the registry-model tests, too big to ship to a
  page in every run, and MiniLM on portable, slow), and every one that runs passes.
"""

from __future__ import annotations

import json
import os
from urllib.parse import urlencode

import pytest

from tests import paths
from tests.browser.conftest import DIST
from tests.browser.native import STORIES_PROMPT, STORIES_TEXT, STORIES_TOKENS, greedy_text

pytestmark = pytest.mark.native_only

# everything but what needs the registry models (100-250 MB each: they run under Node) and MiniLM in pure Python
SUBSET = ["tests", "-k", "not registry_models and not (minilm and portable)"]
PAGE_TIMEOUT_MS = 900_000


def browser_backends() -> str:
    manifest = json.loads((DIST / "manifest.json").read_text())
    return "portable,wasm" if manifest.get("wasm") else "portable"


def wait_result(page, name: str) -> dict:
    page.wait_for_function(f"window.{name} !== undefined", timeout=PAGE_TIMEOUT_MS, polling=500)
    return page.evaluate(f"window.{name}")


@pytest.mark.parametrize("backend", ["portable", "wasm"])
def test_engine_in_a_worker_gives_the_native_greedy_text(server, page, backend):
    if backend not in browser_backends().split(","):
        pytest.skip("web/dist has no wasm kernel module (python wasm/build.py, then python web/build.py)")
    native = greedy_text(str(paths.stories("f32")), STORIES_PROMPT, STORIES_TOKENS)
    assert native == STORIES_TEXT
    query = {"model": "/fixtures/models/stories260K/stories260K-f32.gguf", "prompt": STORIES_PROMPT,
             "n": STORIES_TOKENS, "temp": 0, "backend": backend}  # fmt: skip
    page.goto(server.url(f"/web/test/engine.html?{urlencode(query)}"))
    result = wait_result(page, "llamayEngineResult")
    assert "error" not in result, result.get("error")
    assert result["crossOriginIsolated"] is True
    assert result["info"]["backend"] == backend
    assert result["text"] == native


def test_engine_loads_a_file_aborts_and_goes_on(server, page):
    """A model handed over as a File (as from <input type=file>), streamed into the heap in chunks; a long
    completion aborted after a few pieces; then the next completion is the native greedy text."""
    native = greedy_text(str(paths.stories("f32")), STORIES_PROMPT, STORIES_TOKENS)
    query = {"model": "/fixtures/models/stories260K/stories260K-f32.gguf", "prompt": STORIES_PROMPT,
             "n": STORIES_TOKENS, "temp": 0, "backend": "portable", "source": "file", "abortAfter": 3}  # fmt: skip
    page.goto(server.url(f"/web/test/engine.html?{urlencode(query)}"))
    result = wait_result(page, "llamayEngineResult")
    assert "error" not in result, result.get("error")
    size = paths.stories("f32").stat().st_size
    assert result["info"]["size"] == size and result["progress"][-1] == [size, size]
    aborted = result["aborted"]
    assert aborted["aborted"] is True and aborted["pieces"] < 20
    assert result["text"] == native


def test_suite_in_a_worker(server, page, capsys):
    args = ["-q", "-p", "no:cacheprovider", *(os.environ.get("LLAMAY_BROWSER_PYTEST", "").split() or SUBSET)]
    env = {"LLAMAY_EXPECT_BACKENDS": browser_backends()}
    page.goto(server.url(f"/web/test/pytest.html?{urlencode({'args': json.dumps(args), 'env': json.dumps(env)})}"))
    result = wait_result(page, "llamayTestResult")
    log = page.evaluate("document.getElementById('log').textContent")
    assert "error" not in result, result["error"] + "\n" + log[-5000:]
    c = result["counts"]
    extra = "".join(f", {c[k]} {k}" for k in ("error", "xfailed", "xpassed") if c.get(k))
    with capsys.disabled():
        print(f"\nchromium: {c.get('passed', 0)} passed, {c.get('failed', 0)} failed, {c.get('skipped', 0)} skipped"
              f"{extra} (pytest in a Web Worker, {result['seconds']:.1f} s)")  # fmt: skip
    assert result["exit"] == 0, log[-20000:]
    assert c.get("passed", 0) > 0
