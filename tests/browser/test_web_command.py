"""`llamay web`: what its server sends (no browser needed): the isolation headers, the MIME types browsers insist
on, the model index, and nothing outside web/ and the models folder."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from llamay.native.cli import build_parser
from llamay.native.commands.web import WEB_DIR, WebServer, check_web_dir
from tests import paths
from tests.browser.server import place

pytestmark = pytest.mark.native_only


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    models = tmp_path_factory.mktemp("models")
    place(paths.stories("f32"), models)
    (models / "readme.txt").write_text("not listed")
    log: list = []
    srv = WebServer(WEB_DIR, models, log=log).start()
    yield srv
    srv.close()


def fetch(url: str, method: str = "GET"):
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method)) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, b""


def test_every_response_is_cross_origin_isolated_with_the_right_type(served):
    for path, kind in [("", "text/html"), ("src/llamay.mjs", "text/javascript"),
                       ("widget/llamay-chat.mjs", "text/javascript"), ("demo/demo.css", "text/css")]:  # fmt: skip
        status, headers, _ = fetch(served.url + path)
        assert status == 200, path
        assert headers["Content-Type"].startswith(kind), path
        assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
        assert headers["Cross-Origin-Embedder-Policy"] == "require-corp"
        assert headers["Cross-Origin-Resource-Policy"] == "same-origin"


@pytest.mark.skipif(not (WEB_DIR / "dist" / "manifest.json").exists(), reason="web/dist is not built")
def test_the_runtime_files_have_their_types():
    srv = WebServer(WEB_DIR, WEB_DIR).start()
    try:
        manifest = json.loads(fetch(srv.url + "dist/manifest.json")[2])
        status, headers, _ = fetch(srv.url + "dist/pyodide/pyodide.asm.wasm", "HEAD")
        assert status == 200 and headers["Content-Type"] == "application/wasm"
        wheel = manifest["wheels"]["llamay"][0]
        assert fetch(srv.url + f"dist/wheels/{wheel}", "HEAD")[1]["Content-Type"] == "application/zip"
    finally:
        srv.close()


def test_models_are_served_and_listed(served):
    status, headers, body = fetch(served.url + "models/stories260K-f32.gguf")
    assert status == 200 and body == paths.stories("f32").read_bytes()
    assert headers["Content-Length"] == str(len(body))
    index = json.loads(fetch(served.url + "models/index.json")[2])
    [entry] = index  # readme.txt is not a model
    assert {k: entry[k] for k in ("name", "url", "size")} == {
        "name": "stories260K-f32.gguf", "url": "/models/stories260K-f32.gguf", "size": len(body)}  # fmt: skip
    # what it is (tests/native/test_model_facts.py checks these against gguf-py)
    assert (entry["architecture"], entry["kind"], entry["parameter_size"]) == ("llama", "text", "260K")
    assert ("GET", "/models/stories260K-f32.gguf") in served.log


OUTSIDE = ["models/../pyproject.toml", "models/%2e%2e/pyproject.toml", "../pyproject.toml", "node_modules/",
           "node_modules/pyodide/package.json", "models/.hidden", "%2e%2e/README.md", "models/", "demo/",
           "src/"]  # fmt: skip


@pytest.mark.parametrize("path", OUTSIDE)
def test_nothing_outside_web_and_the_models(served, path):
    assert fetch(served.url + path)[0] == 404


def test_a_missing_build_is_explained(tmp_path):
    assert "has no index.html" in check_web_dir(tmp_path)
    (tmp_path / "index.html").write_text("")
    assert "python " in check_web_dir(tmp_path) and "build.py" in check_web_dir(tmp_path)


def test_the_command_is_registered():
    args = build_parser().parse_args(["web", "--port", "0", "--models", "/tmp"])
    assert args.port == 0 and args.models == "/tmp" and args.host == "127.0.0.1"
    r = subprocess.run([sys.executable, "-m", "llamay.native.cli", "web", "--web-dir", "/nonexistent"],
                       capture_output=True, text=True, check=False)  # fmt: skip
    assert r.returncode == 1 and "llamay web: error:" in r.stderr and "has no index.html" in r.stderr
