"""The request guard over loopback: Host and Origin checks, CORS for the allowed origins only, JSON bodies only,
and the body size limit. Then the same rules as a browser meets them: a page of another origin in Chromium."""

from __future__ import annotations

import http.server
import threading

import httpx
import pytest

from tests.paths import stories
from tests.server.conftest import STORIES_ID, start_server

pytestmark = pytest.mark.native_only

PAGE_ORIGIN = "http://page.example:3000"
COMPLETION = {"model": "stories260K-q8_0", "prompt": "Once", "max_tokens": 2}


@pytest.fixture(scope="module")
def open_server():
    """A server allowing one cross origin and one proxy host name, with a small body limit."""
    app_kw = {"cors_origins": (PAGE_ORIGIN,), "allowed_hosts": ("proxy.example", ".corp.example")}
    live = start_server(stories("q8_0"), n_ctx=128, parallel=1, queue=4, max_body_bytes=4096, app_kw=app_kw)
    yield live
    live.stop()


def error_code(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text
    assert r.headers["x-content-type-options"] == "nosniff"
    return r.json()["error"]["code"]


def port_of(live) -> int:
    return int(live.url.rsplit(":", 1)[1])


def test_only_addresses_and_loopback_names_by_default(server):
    port = port_of(server)
    with httpx.Client(base_url=server.url, timeout=30) as c:  # any address: an address cannot be rebound
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "127.1.2.3", "app.localhost",
                     "LOCALHOST", "192.168.1.5", "10.0.0.1:8080"):  # fmt: skip
            assert c.get("/health", headers={"Host": host}).status_code == 200, host
        for host in (f"evil.example:{port}", "localhost.evil.example", "127.0.0.1.nip.io", "[::1", ""):
            r = c.get("/health", headers={"Host": host})  # DNS-rebinding names, malformed
            assert error_code(r, 403) == "host_not_allowed" and "--allowed-host" in r.json()["error"]["message"]
            r = c.post("/v1/completions", json=COMPLETION, headers={"Host": host})
            assert error_code(r, 403) == "host_not_allowed"


def test_allowed_host_names(open_server):
    with httpx.Client(base_url=open_server.url, timeout=30) as c:
        for host in ("proxy.example", "proxy.example:443", "corp.example", "a.corp.example"):
            assert c.get("/health", headers={"Host": host}).status_code == 200, host
        for host in ("sub.proxy.example", "notcorp.example"):
            assert error_code(c.get("/health", headers={"Host": host}), 403) == "host_not_allowed"


def test_a_foreign_origin_is_refused_before_any_work(server):
    sched = server.service.metrics
    with httpx.Client(base_url=server.url, timeout=30) as c:
        before = sched.generated_tokens
        body = {"model": STORIES_ID, "prompt": "Once", "max_tokens": 8}
        # the last two malformed: their ValueError was a 500
        for origin in ("http://evil.example", "null", f"http://localhost:{port_of(server) + 1}", "https://127.0.0.1",
                       "http://[::1", "http://localhost:port"):  # fmt: skip
            r = c.post("/v1/completions", json=body, headers={"Origin": origin})
            assert error_code(r, 403) == "origin_not_allowed", origin
            assert "--cors-origin" in r.json()["error"]["message"]
            assert "access-control-allow-origin" not in r.headers
            assert error_code(c.get("/v1/models", headers={"Origin": origin}), 403) == "origin_not_allowed"
        assert sched.generated_tokens == before
        own = server.url  # the server's own pages (its /docs) post with their own origin
        assert c.post("/v1/completions", json=body, headers={"Origin": own}).status_code == 200
        by_name = {"Origin": f"http://localhost:{port_of(server)}", "Host": f"localhost:{port_of(server)}"}
        assert c.post("/v1/completions", json=body, headers=by_name).status_code == 200


def test_cors_for_the_allowed_origin_only(open_server):
    with httpx.Client(base_url=open_server.url, timeout=30) as c:
        pre = {"Origin": PAGE_ORIGIN, "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "authorization, content-type"}  # fmt: skip
        r = c.options("/v1/completions", headers=pre)
        assert r.status_code == 200, r.text
        assert r.headers["access-control-allow-origin"] == PAGE_ORIGIN
        assert "POST" in r.headers["access-control-allow-methods"]
        allowed = r.headers["access-control-allow-headers"].lower()
        assert "authorization" in allowed and "content-type" in allowed
        r = c.post("/v1/completions", json=COMPLETION, headers={"Origin": PAGE_ORIGIN})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == PAGE_ORIGIN
        assert "Origin" in r.headers["vary"]
        other = {**pre, "Origin": "http://other.example"}
        r = c.options("/v1/completions", headers=other)
        assert error_code(r, 403) == "origin_not_allowed" and "access-control-allow-origin" not in r.headers
        r = c.post("/v1/completions", json=COMPLETION)  # no Origin (curl, SDKs): no CORS headers needed
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_bodies_must_be_labelled_json_unless_unlabelled_without_a_foreign_origin(server):
    body = b'{"model": "stories260K-f32", "prompt": "Once", "max_tokens": 2}'
    with httpx.Client(base_url=server.url, timeout=30) as c:
        for kind in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "text/json"):
            r = c.post("/v1/completions", content=body, headers={"Content-Type": kind})
            assert error_code(r, 415) == "unsupported_media_type" and kind in r.json()["error"]["message"]
        assert c.post("/v1/completions", content=body).status_code == 200  # no label, no Origin
        r = c.post("/v1/completions", content=body, headers={"Origin": "http://evil.example"})
        assert error_code(r, 403) == "origin_not_allowed"  # a page's unlabelled Blob body


def test_curls_form_label_on_ollamas_routes_is_read_as_json_as_ollama_reads_it(server):
    """`curl -d` labels its body a form; Ollama parses it as JSON anyway: so does its route here (only there,
    and never for a foreign Origin)."""
    body = b'{"model": "stories260K-f32", "prompt": "Once", "stream": false, "options": {"num_predict": 2}}'
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    with httpx.Client(base_url=server.url, timeout=30) as c:
        r = c.post("/api/generate", content=body, headers=form)
        assert r.status_code == 200 and r.json()["eval_count"] == 2, r.text
        r = c.post("/api/generate", content=body, headers={**form, "Origin": "http://evil.example"})
        assert r.status_code == 403
        r = c.post("/api/generate", content=body, headers={"Content-Type": "text/plain"})
        assert r.status_code == 415


def test_the_body_size_limit(open_server):
    with httpx.Client(base_url=open_server.url, timeout=30) as c:
        big = {**COMPLETION, "prompt": "x" * 5000}
        r = c.post("/v1/completions", json=big)
        assert error_code(r, 413) == "body_too_large" and "--max-body-bytes" in r.json()["error"]["message"]

        def chunks():  # no Content-Length: refused once the count passes the limit
            for _ in range(10):
                yield b" " * 1000

        r = c.post("/v1/completions", content=chunks(), headers={"Content-Type": "application/json"})
        assert error_code(r, 413) == "body_too_large"
        assert c.post("/v1/completions", json=COMPLETION).status_code == 200


# -- the same in a browser ---------------------------------------------------------------------------------------


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<!DOCTYPE html><title>another origin</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def page_origin():
    """A blank page on another port of 127.0.0.1: another origin, as a site in the user's browser would be."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


FETCH = """async ([url, kind]) => {
  try {
    const body = JSON.stringify({model: "%s", prompt: "Once", max_tokens: 2});
    const r = await fetch(url, {method: "POST", body, headers: kind ? {"Content-Type": kind} : {}});
    return {status: r.status, text: await r.text()};
  } catch (e) { return {error: String(e)}; }
}"""


def test_a_page_of_another_origin_cannot_drive_the_server_unless_allowed(page_origin):
    from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, require_target

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require_target("chromium", "the `playwright` package is not installed")
    from pathlib import Path

    require_target("chromium", None if Path(CHROMIUM).exists() else f"{CHROMIUM} is missing")
    closed = start_server(stories("q8_0"), n_ctx=128, parallel=1, queue=4)
    allowing = start_server(stories("q8_0"), n_ctx=128, parallel=1, queue=4, app_kw={"cors_origins": (page_origin,)})
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
            page = browser.new_page()
            page.goto(page_origin)
            fetch = FETCH % "stories260K-q8_0"
            url = f"{closed.url}/v1/completions"
            before = closed.service.metrics.generated_tokens
            for kind in ("application/json", "text/plain", None):  # preflighted, then two "simple" requests
                got = page.evaluate(fetch, [url, kind])
                assert "error" in got, (kind, got)  # the page reads nothing
            assert closed.service.metrics.generated_tokens == before  # and the server did nothing
            refused = closed.service.metrics.requests
            assert sum(n for (_m, _r, status), n in refused.items() if status == 403) >= 3
            got = page.evaluate(fetch, [f"{allowing.url}/v1/completions", "application/json"])
            assert got.get("status") == 200 and '"text_completion"' in got["text"], got
            browser.close()
    finally:
        closed.stop()
        allowing.stop()


def test_cors_on_every_route_family_and_on_the_guards_own_refusals(open_server):
    """Preflights and headers for the allowed origin on the OpenAI routes with and without /v1 and on Ollama's;
    a refusal the guard answers itself (415, 413) carries them too, so the allowed page can read why."""
    with httpx.Client(base_url=open_server.url, timeout=30) as c:
        pre = {"Origin": PAGE_ORIGIN, "Access-Control-Request-Method": "POST",
               "Access-Control-Request-Headers": "content-type"}  # fmt: skip
        for path in ("/chat/completions", "/v1/embeddings", "/api/chat", "/api/embeddings"):
            r = c.options(path, headers=pre)
            assert r.status_code == 200 and r.headers["access-control-allow-origin"] == PAGE_ORIGIN, path
            r = c.options(path, headers={**pre, "Origin": "http://other.example"})
            assert r.status_code == 403 and "access-control-allow-origin" not in r.headers, path
        page = {"Origin": PAGE_ORIGIN}
        r = c.post("/completions", json=COMPLETION, headers=page)
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == PAGE_ORIGIN
        r = c.post("/api/generate", json={"model": "x", "prompt": "x", "options": {"bogus": 1}}, headers=page)
        assert r.status_code == 400 and r.headers["access-control-allow-origin"] == PAGE_ORIGIN
        r = c.post("/v1/completions", content=b"{}", headers={**page, "Content-Type": "text/plain"})
        assert error_code(r, 415) == "unsupported_media_type"
        assert r.headers["access-control-allow-origin"] == PAGE_ORIGIN and "Origin" in r.headers["vary"]
        r = c.post("/api/chat", json={"prompt": "x" * 5000}, headers=page)
        assert r.status_code == 413 and "--max-body-bytes" in r.json()["error"]  # Ollama's shape on /api
        assert r.headers["access-control-allow-origin"] == PAGE_ORIGIN
        r = c.post("/v1/completions", content=b"{}", headers={"Content-Type": "text/plain"})  # no Origin: none
        assert r.status_code == 415 and "access-control-allow-origin" not in r.headers
