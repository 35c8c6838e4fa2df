"""The public JavaScript API (web/src/llamay.mjs, documented in docs/web.md) in headless Chromium, through
web/test/api.html: createEngine, chat / complete (streamed and whole, OpenAI-shaped), abort / AbortSignal / a
consumer that stops reading, tokenize / detokenize, embed, unload, and the error kinds. Served by `llamay web`'s
server; nothing outside its origin is reachable."""

from __future__ import annotations

import json
import math
from urllib.parse import urlencode

import pytest

from tests import paths
from tests.browser.native import STORIES_PROMPT, STORIES_TEXT
from tests.openai_shapes import check_openai_shape

pytestmark = pytest.mark.native_only


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_the_javascript_api(web_app, site):
    expected = json.loads((paths.MINILM.parent / "expected.json").read_text())
    query = {"model": "/models/stories260K-f32.gguf", "embed": "/models/all-MiniLM-L6-v2-f16.gguf",
             "sentences": json.dumps(expected["sentences"]), "unsupported": "/models/mamba.gguf"}  # fmt: skip
    site.goto(f"{web_app.url}test/api.html?{urlencode(query)}")
    site.wait_for_function("window.llamayApiResult !== undefined", polling=250)
    r = site.evaluate("window.llamayApiResult")
    assert "error" not in r, r["error"]
    assert site.outside == [] and site.errors == []

    assert r["notGguf"]["kind"] == "not-gguf" and r["notGguf"]["isWebError"]
    assert 'is not a GGUF file: it starts with "hell"' in r["notGguf"]["message"]

    assert r["isolated"] is True
    assert set(r["boot"]) >= {"pyodide_ms", "wheels_ms", "kernels_ms"}
    assert r["phases"] == ["boot", "download", "bind", "cache-write"]
    m = r["model"]
    assert m["backend"] == "wasm" and m["source"] == "url" and m["cached"] is True
    assert r["card"] == {"architecture": "llama", "audit": "clean", "types": {"F32": 47}}

    c = r["complete"]
    assert c["object"] == "text_completion" and c["model"] == m["name"]
    assert STORIES_PROMPT + c["choices"][0]["text"] == STORIES_TEXT
    assert c["choices"][0]["finish_reason"] == "length"
    assert c["usage"]["completion_tokens"] == 27 and c["usage"]["total_tokens"] == c["usage"]["prompt_tokens"] + 27
    assert c["timings"]["predicted_n"] == 27 and c["timings"]["ttft_ms"] > 0

    # the same check as the server's objects (tests/server/test_openai_shapes.py): openai's own types
    for whole in (c, r["chat"], *r["chatChunks"]):
        check_openai_shape(whole)
    assert r["chat"]["object"] == "chat.completion" and r["chat"]["choices"][0]["message"]["role"] == "assistant"

    chunks = r["chatChunks"]
    assert all(ch["object"] == "chat.completion.chunk" for ch in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert len({ch["id"] for ch in chunks}) == 1
    assert all(ch["choices"][0]["finish_reason"] is None for ch in chunks[:-1])
    final = chunks[-1]
    assert final["choices"][0]["finish_reason"] in ("stop", "length") and final["choices"][0]["delta"] == {}
    assert final["usage"]["completion_tokens"] >= len(chunks) - 1
    assert {"ttft_ms", "prompt_ms", "predicted_per_second"} <= set(final["timings"])

    a = r["aborted"]
    assert a["finish_reason"] == "abort" and a["usage"]["completion_tokens"] < 50
    assert r["signal"]["finish_reason"] == "abort" and r["signal"]["chunks"] < 50
    after = r["afterBreak"]["choices"][0]["text"]  # 5 greedy tokens: the start of the native text
    assert after and STORIES_TEXT.startswith(STORIES_PROMPT + after)

    i = r["interrupted"]  # stopped mid-prompt through the interrupt buffer, then the engine goes on
    assert i["finish_reason"] == "abort" and i["usage"] is None and i["ms"] < 5000
    assert r["afterInterrupt"]["choices"][0]["text"] == after

    assert r["tokens"]["tokens"][0] == 1  # BOS, then "Once upon a time"
    assert r["detokenized"]["content"].strip() == STORIES_PROMPT
    assert r["embedError"]["kind"] == "bad-request" and "embeddings need an encoder" in r["embedError"]["message"]
    assert r["samplingError"]["kind"] == "bad-request" and r["samplingError"]["message"].startswith("temperature: ")
    assert r["nError"]["kind"] == "bad-request" and r["nError"]["message"].startswith("n: ")
    assert r["nOne"] == 1
    assert r["noModel"]["kind"] == "no-model"

    assert r["threads"] == 1
    assert r["threadsCreate"]["kind"] == "bad-request" and r["threadsCreate"]["message"].startswith("threads: 17 ")
    assert r["threadsPortable"]["kind"] == "bad-request"
    assert "kernel threads run the wasm backend only" in r["threadsPortable"]["message"]
    assert (
        r["threadsLoad"]["kind"] == "bad-request"
        and "threads: 0 is not a positive whole number" in (r["threadsLoad"]["message"])
    )
    # the failed loads kept stories260K: still loaded, still greedy-equal to the native text
    assert [(k["kind"], k["kept"], k["model"]) for k in r["kept"]] == [
        ("not-gguf", True, m["name"]), ("unsupported-architecture", True, m["name"])]  # fmt: skip
    assert STORIES_TEXT.startswith(STORIES_PROMPT + r["afterFailedLoads"]["choices"][0]["text"])
    assert r["afterFailedLoads"]["choices"][0]["text"] == after

    data = r["embeddings"]["data"]
    assert [d["index"] for d in data] == list(range(len(expected["sentences"])))
    for got, want in zip(data, expected["embeddings"], strict=True):
        assert cosine(got["embedding"], want) > 0.999
    assert r["embeddings"]["usage"]["prompt_tokens"] > 0
    assert sorted(r["cachedModels"]) == ["all-MiniLM-L6-v2-f16.gguf", "stories260K-f32.gguf"]
    assert r["afterCorruption"] == "url" and r["recached"] == str(paths.stories("f32").stat().st_size)
