"""Kernel threads in headless Chromium (web/src/kernel-threads.mjs, wasm/backend_threads.py), through the public
API (createEngine({threads})) on web/test/threads.html: on 2 threads the greedy and the seeded sampled
completions equal those on 1 thread, token for token (the threads build splits matmul rows and attention heads
over the threads; each output is computed by the same code from the same inputs, so the logits are the same bits
and so is every sampled token), stories260K's equals the native text too; a page that is not cross-origin
isolated runs on 1 thread and says why."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from tests import paths
from tests.browser.conftest import TINY_MOE
from tests.browser.native import STORIES_PROMPT, STORIES_TEXT, STORIES_TOKENS

pytestmark = pytest.mark.native_only
TIMEOUT_MS = 900_000
THREADS_SCHEMA = {  # web/test/threads.html's SCHEMA
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def run_threads(page, web_app, model: str, threads: str, n: int, prompt: str) -> dict:
    query = {"model": model, "threads": threads, "n": n, "prompt": prompt}
    page.goto(f"{web_app.url}test/threads.html?{urlencode(query)}")
    page.wait_for_function("window.llamayThreadsResult !== undefined", timeout=TIMEOUT_MS, polling=500)
    result = page.evaluate("window.llamayThreadsResult")
    assert "error" not in result, result["error"]
    return result


@pytest.mark.parametrize("model", ["stories260K-f32.gguf", paths.SMOLLM2, TINY_MOE])
def test_two_threads_give_one_threads_tokens(web_app, site, model):
    if model == paths.SMOLLM2:
        paths.registry_model(paths.SMOLLM2)  # skipped locally when absent; CI fetches it
    n = STORIES_TOKENS if model.startswith("stories") else 16 if model == TINY_MOE else 48
    prompt = STORIES_PROMPT if model.startswith("stories") else "The history of Paris begins"
    r = run_threads(site, web_app, f"/models/{model}", "1,2", n, prompt)
    assert r["isolated"] is True
    one, two = r["runs"]
    assert (one["asked"], one["threads"], two["asked"], two["threads"]) == (1, 1, 2, 2)
    assert one["threadsNote"] is None and two["threadsNote"] is None
    assert one["backend"] == two["backend"] == "wasm" and two["variant"] == "relaxed"
    assert one["greedyTokens"] == two["greedyTokens"] == n
    assert two["greedy"] == one["greedy"] and one["greedy"]
    assert two["sampled"] == one["sampled"] and one["sampled"] != one["greedy"]  # a sample, not greedy again
    # held to a JSON Schema (the masks read back from the threads' memory): a valid document, the same on both
    assert two["json"] == one["json"] and two["jsonFinish"] == one["jsonFinish"]
    if model == paths.SMOLLM2:
        import jsonschema  # (not under Pyodide, where this module is collected too)

        assert one["jsonFinish"] == "stop"
        jsonschema.validate(json.loads(one["json"]), THREADS_SCHEMA)
    else:  # stories260K's and the random weights' characters run on in the whitespace JSON allows
        assert one["json"].startswith("{"), one["json"]
    if model.startswith("stories"):
        assert STORIES_PROMPT + one["greedy"] == STORIES_TEXT
    assert site.errors == []


def test_without_cross_origin_isolation_it_runs_on_one_thread_and_says_why(web_app, browser):
    """The same page served without COOP/COEP: no SharedArrayBuffer to share, so threads: 2 runs on 1 thread, with
    engine.threadsNote naming the reason, and the text is still the native one."""
    context = browser.new_context()

    def without_isolation(route) -> None:
        response = route.fetch()
        headers = {k: v for k, v in response.headers.items() if not k.lower().startswith("cross-origin-")}
        route.fulfill(response=response, headers=headers)

    context.route(f"{web_app.url}**", without_isolation)
    page = context.new_page()
    try:
        r = run_threads(page, web_app, "/models/stories260K-f32.gguf", "2", STORIES_TOKENS, STORIES_PROMPT)
    finally:
        context.close()
    assert r["isolated"] is False
    [run] = r["runs"]
    assert (run["asked"], run["threads"]) == (2, 1)
    assert run["threadsNote"].startswith("2 threads asked for, running on 1: ")
    assert "cross-origin isolated" in run["threadsNote"] or "SharedArrayBuffer" in run["threadsNote"]
    assert STORIES_PROMPT + run["greedy"] == STORIES_TEXT
