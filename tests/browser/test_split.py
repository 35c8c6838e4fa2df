"""A split model (llama.cpp's gguf-split layout, shards written by gguf-py) in the browser runtime: under Node
from its first shard's path, in Chromium from its first shard's URL (the others fetched by llama.cpp's naming
rule) and as several Files picked together; each gives the native greedy text of the whole file."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests import paths
from tests.browser.conftest import WEB, require_target, web_missing
from tests.browser.native import STORIES_PROMPT, STORIES_TEXT, STORIES_TOKENS
from tests.browser.test_chromium import wait_result
from tests.browser.test_node import llamay_web
from tests.gguf.split_files import split_with_gguf_py

pytestmark = pytest.mark.native_only


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    pytest.importorskip("gguf")
    return split_with_gguf_py(paths.stories("f32"), tmp_path_factory.mktemp("split") / "stories260K-f32", 3)


@pytest.fixture(scope="module")
def split_server(shards, tmp_path_factory):
    """web/ at /web, the shards at /split, the first two of them alone at /partial."""
    require_target("chromium", web_missing())
    from tests.browser.server import Server, place

    partial = tmp_path_factory.mktemp("partial")
    for p in shards[:2]:
        place(p, partial)
    srv = Server({"/web": WEB, "/split": shards[0].parent, "/partial": partial})
    yield srv
    srv.close()


def test_node_runs_a_split_model_from_its_first_shard(node, shards):
    r = llamay_web(node, "run", "--model", str(shards[0]), "--prompt", STORIES_PROMPT, "-n", str(STORIES_TOKENS),
                   "--temp", "0", "--backend", "portable")  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.rstrip("\n") == STORIES_TEXT


def test_node_names_a_missing_shard(node, shards, tmp_path):
    for p in shards[:2]:
        (tmp_path / p.name).write_bytes(p.read_bytes())
    r = llamay_web(node, "run", "--model", str(tmp_path / shards[0].name), "--prompt", "x", "-n", "1")
    assert r.returncode != 0
    assert "shard 3 of 3 of a split model" in r.stderr and shards[2].name in r.stderr
    assert len(r.stderr) < 2000  # a message, not Pyodide's whole module


@pytest.mark.parametrize("source", ["url", "files"])
def test_chromium_loads_a_split_model(split_server, page, shards, source):
    """Through the public API (createEngine): from the first shard's URL, or from the shards as Files."""
    query = {"model": f"/split/{shards[0].name}", "prompt": STORIES_PROMPT, "n": STORIES_TOKENS,
             "backend": "portable", "source": source}  # fmt: skip
    page.goto(split_server.url(f"/web/test/split.html?{urlencode(query)}"))
    result = wait_result(page, "llamaySplitResult")
    assert "error" not in result, result
    m = result["model"]
    assert m["size"] == sum(p.stat().st_size for p in shards)
    assert m["source"] == ("url" if source == "url" else "file") and m["cached"] is False
    assert m["cacheError"] == "a split model is not cached"
    assert result["shards"] == [p.name for p in shards]
    assert result["text"] == STORIES_TEXT


def test_chromium_names_a_missing_shard(split_server, page, shards):
    """The third shard's URL answers 404: the error says which shard."""
    query = {"model": f"/partial/{shards[0].name}", "n": 1}
    page.goto(split_server.url(f"/web/test/split.html?{urlencode(query)}"))
    result = wait_result(page, "llamaySplitResult")
    assert result["kind"] == "network", result
    assert result["error"].startswith("shard 3 of 3 of a split model: ")
    assert f"/partial/{shards[2].name}: HTTP 404" in result["error"]
