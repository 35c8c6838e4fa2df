"""`llamay web`'s site over loopback, as a hostile page or client would try it: links out of its folders,
listings, dotfiles, partial downloads, sniffable types, the Server header, Host names (DNS rebinding); and what
it must still do: files, ranges, revalidation, the model index, the command itself."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytest.importorskip("starlette")  # the native server's extra (absent under Pyodide)
pytest.importorskip("uvicorn")  # the native server's extra (absent under Pyodide)

from llamay.native.commands.web import WebServer
from llamay.native.static_site import HEADERS, resolve

pytestmark = pytest.mark.native_only

SECRET = b"secret: outside the served folders\n"
MODEL = b"GGUF" + bytes(range(256)) * 16  # served as bytes: the site does not read models


def write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> dict[str, Path]:
    """A web folder and a models folder with every kind of thing that must not be served, and an outside."""
    top = tmp_path_factory.mktemp("site")
    outside, web, models = top / "outside", top / "web", top / "models"
    write(outside / "secret.gguf", SECRET)
    write(outside / "secret.js", SECRET)
    write(web / "index.html", "<!doctype html><title>demo</title>")
    write(web / "app.mjs", "export const x = 1;\n")
    write(web / "docs" / "index.html", "<p>docs</p>")
    write(web / "assets" / "logo.svg", "<svg/>")
    write(web / ".git" / "config", "[core]\n")
    write(web / ".env", "KEY=1\n")
    write(web / "node_modules" / "pkg" / "index.js", "module.exports = 1;\n")
    write(web / "dist" / "manifest.json", "{}")
    (web / "escape.js").symlink_to(outside / "secret.js")
    (web / "outside").symlink_to(outside, target_is_directory=True)
    write(models / "model.gguf", MODEL)
    (models / "alias.gguf").symlink_to("model.gguf")  # a link that stays inside: served
    (models / "escape.gguf").symlink_to(outside / "secret.gguf")
    (models / "hidden-link.gguf").symlink_to(".hidden.gguf")
    (models / "loop.gguf").symlink_to("loop.gguf")
    write(models / ".hidden.gguf", SECRET)
    write(models / "half.gguf.partial", SECRET)
    write(models / "copy.gguf.tmp", SECRET)
    write(models / ".llamay-pull-1234-abcd" / "model.gguf.partial", SECRET)
    write(models / "sub" / "nested.gguf", MODEL)
    return {"web": web, "models": models, "outside": outside}


@pytest.fixture(scope="module")
def site(tree):
    srv = WebServer(tree["web"], tree["models"], log=[], allowed_hosts=("models.example",)).start()
    yield srv
    srv.close()


def get(base: str, path: str, method: str = "GET", host: str | None = None, headers: dict | None = None):
    """(status, headers (lower-case names), body) of one request to the server at `base`; Host is the server's
    address unless given."""
    u = urlsplit(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host if host is not None else u.netloc)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def test_files_are_served_with_their_types(site, tree):
    for path, kind in [("/", "text/html"), ("/app.mjs", "text/javascript"), ("/assets/logo.svg", "image/svg+xml"),
                       ("/models/model.gguf", "application/octet-stream")]:  # fmt: skip
        status, headers, _ = get(site.url, path)
        assert status == 200, path
        assert headers["content-type"].startswith(kind), path
    assert get(site.url, "/models/model.gguf")[2] == MODEL
    assert get(site.url, "/docs/")[2] == b"<p>docs</p>"


def test_a_link_that_stays_inside_is_served(site):
    assert get(site.url, "/models/alias.gguf")[:1] == (200,)
    assert get(site.url, "/models/alias.gguf")[2] == MODEL


@pytest.mark.parametrize("path", ["/models/escape.gguf", "/escape.js", "/outside/secret.js", "/outside/",
                                  "/models/loop.gguf", "/models/hidden-link.gguf"])  # fmt: skip
def test_no_link_leads_out_or_to_a_hidden_file(site, path):
    status, _, body = get(site.url, path)
    assert status == 404 and SECRET not in body


@pytest.mark.parametrize("path", ["/models/", "/models", "/models/sub/", "/assets/", "/node_modules/", "/dist/"])
def test_no_listings(site, path):
    status, _, body = get(site.url, path)
    assert status == 404
    assert b"model.gguf" not in body and b"nested" not in body and b"logo" not in body and b"manifest" not in body


@pytest.mark.parametrize("path", ["/.git/config", "/.env", "/models/.hidden.gguf", "/%2egit/config",
                                  "/models/sub/../.hidden.gguf", "/node_modules/pkg/index.js"])  # fmt: skip
def test_no_dotfiles(site, path):
    assert get(site.url, path)[0] == 404


@pytest.mark.parametrize("path", ["/models/half.gguf.partial", "/models/copy.gguf.tmp",
                                  "/models/.llamay-pull-1234-abcd/model.gguf.partial"])  # fmt: skip
def test_no_partial_or_temporary_files(site, path):
    status, _, body = get(site.url, path)
    assert status == 404 and SECRET not in body


def test_the_index_lists_only_what_is_served(site):
    index = json.loads(get(site.url, "/models/index.json")[2])
    assert [m["name"] for m in index] == ["alias.gguf", "model.gguf"]
    assert all(m["size"] == len(MODEL) and m["url"] == f"/models/{m['name']}" for m in index)


def test_every_response_has_nosniff_and_the_isolation_headers(site):
    requests = [("/", {}), ("/models/model.gguf", {}), ("/missing", {}), ("/docs", {}), ("/", {"method": "POST"}),
                ("/", {"host": "evil.example"}), ("/models/index.json", {})]  # fmt: skip
    answers = [get(site.url, path, **kw) for path, kw in requests]
    assert {a[0] for a in answers} == {200, 404, 301, 405, 403}
    for _, headers, _ in answers:
        assert headers["x-content-type-options"] == "nosniff"
        for k, v in HEADERS.items():
            assert headers[k.lower()] == v


def test_no_server_header_names_a_version(site):
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    for _, headers, _ in (get(site.url, "/"), get(site.url, "/missing")):
        assert "server" not in headers
        assert not any("python" in v.lower() or python in v for k, v in headers.items() if k != "date"), headers


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "localhost.evil.example", "127.0.0.1.nip.io",
                                  ""])  # fmt: skip
def test_other_host_names_are_refused(site, host):
    status, _, body = get(site.url, "/models/model.gguf", host=host)
    assert status == 403 and MODEL not in body
    assert b"--allowed-host" in body


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:8000", "app.localhost", "127.0.0.1:8000", "[::1]:8000",
                                  "10.1.2.3", "models.example", "models.example:443"])  # fmt: skip
def test_addresses_loopback_names_and_allowed_names_are_served(site, host):
    assert get(site.url, "/models/model.gguf", host=host)[0] == 200


def test_ranges_and_revalidation(site):
    status, headers, body = get(site.url, "/models/model.gguf", headers={"Range": "bytes=4-19"})
    assert status == 206 and body == MODEL[4:20] and headers["content-range"] == f"bytes 4-19/{len(MODEL)}"
    _, headers, _ = get(site.url, "/models/model.gguf", method="HEAD")
    assert headers["content-length"] == str(len(MODEL))
    status, _, body = get(site.url, "/models/model.gguf", headers={"If-None-Match": headers["etag"]})
    assert status == 304 and body == b""
    assert get(site.url, "/models/model.gguf", headers={"If-Modified-Since": headers["last-modified"]})[0] == 304


def test_a_folder_without_its_slash_is_redirected(site):
    status, headers, _ = get(site.url, "/docs?x=1")
    assert status == 301 and headers["location"] == "/docs/?x=1"


def test_the_log_records_requests(site):
    get(site.url, "/models/model.gguf", method="HEAD")
    assert ("HEAD", "/models/model.gguf") in site.log


def test_resolve(tree):
    models = tree["models"]
    assert resolve(models, "alias.gguf") == (models / "model.gguf").resolve()
    assert resolve(models, "sub/nested.gguf") == (models / "sub" / "nested.gguf").resolve()
    for rel in ("escape.gguf", "../outside/secret.gguf", "sub/../../outside/secret.gguf", "a\\b", "x\0y",
                "hidden-link.gguf", "missing.gguf", "loop.gguf"):  # fmt: skip
        assert resolve(models, rel) is None, rel


def test_the_command_serves_and_stops_on_ctrl_c(tree):
    cmd = [sys.executable, "-m", "llamay.native.cli", "web", "--port", "0", "--web-dir", str(tree["web"]),
           "--models", str(tree["models"])]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()
        status, headers, body = get(url, "/models/model.gguf")
        assert status == 200 and body == MODEL and headers["x-content-type-options"] == "nosniff"
        assert get(url, "/models/escape.gguf")[0] == 404
        assert get(url, "/", host="rebound.example")[0] == 403
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        err = proc.stderr.read()
        assert "2 model(s)" in err and "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
