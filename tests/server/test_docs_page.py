"""/docs works with no network: Swagger UI's files come from the server itself, the page references no other
origin (and its Content-Security-Policy forbids any), and in Chromium it renders every operation without a
single request leaving the server's origin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.native_only


def test_the_page_and_its_assets_are_local(client):
    r = client.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    refs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert refs and all(not re.match(r"^[a-z]+:|^//", ref) for ref in refs), refs  # relative: this origin
    assert "http://" not in page and "https://" not in page
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self'" in csp and "http" not in csp
    init = client.get("/docs/init.js")
    assert init.status_code == 200 and "validatorUrl: null" in init.text and '"openapi.json"' in init.text
    from swagger_ui_bundle import swagger_ui_path

    for ref in refs:
        asset = client.get(f"/{ref}")
        assert asset.status_code == 200, ref
        if "/assets/" in ref:  # byte for byte the package's file
            assert asset.content == (Path(str(swagger_ui_path)) / ref.rsplit("/", 1)[1]).read_bytes()
    assert client.get("/docs/assets/..%2f..%2fpyproject.toml").status_code == 404
    assert client.get("/docs/assets/index.html").status_code == 404  # only the files the page uses
    assert client.get("/openapi.json").json()["info"]["title"] == "llamay"


def test_swagger_ui_renders_offline_in_chromium(server):
    from tests.browser.conftest import CHROMIUM, CHROMIUM_FLAGS, require_target

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require_target("chromium", "the `playwright` package is not installed")
    require_target("chromium", None if Path(CHROMIUM).exists() else f"{CHROMIUM} is missing")
    n_ops = sum(len(ops) for ops in server.client().get("/openapi.json").json()["paths"].values())
    elsewhere: list[str] = []
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page()

        def route(r):
            if r.request.url.startswith(server.url):
                r.continue_()
            else:  # the network is out of reach: anything elsewhere would fail; record and refuse it
                elsewhere.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(f"{server.url}/docs")
        page.wait_for_selector(".opblock", timeout=30_000)
        shown = page.locator(".opblock").count()
        title = page.locator(".title").first.inner_text()
        browser.close()
    assert not elsewhere, elsewhere
    assert not problems, problems
    assert shown == n_ops and "llamay" in title
