"""The cross-target tests: the browser runtime under Node (web/bin/llamay-web.mjs) and in headless Chromium
(Playwright for Python driving the system Chromium, never a downloaded browser).

They need `npm ci` in web/, `python web/build.py` (web/dist), the `playwright` package and /usr/bin/chromium.
Missing pieces skip them locally; `LLAMAY_EXPECT_TARGETS` (e.g. "node,chromium", set by scripts/test-all.sh)
turns a missing piece into a failure, so CI cannot go green by skipping a target."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests import paths

WEB = paths.REPO / "web"
DIST = WEB / "dist"
REPO_WEB_CLI = WEB / "bin" / "llamay-web.mjs"
CHROMIUM = os.environ.get("LLAMAY_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]  # fmt: skip


def require_target(name: str, missing: str | None) -> None:
    if missing is None:
        return
    expected = {t for t in os.environ.get("LLAMAY_EXPECT_TARGETS", "").split(",") if t}
    if name in expected:
        pytest.fail(f"target {name} is expected but cannot run: {missing}")
    pytest.skip(f"target {name} cannot run here: {missing}")


def web_missing() -> str | None:
    if not (WEB / "node_modules" / "pyodide").is_dir():
        return "web/node_modules is missing: run `npm ci` in web/"
    if not (DIST / "manifest.json").is_file():
        return "web/dist is missing: run `python web/build.py`"
    return None


@pytest.fixture(scope="session")
def node() -> str:
    exe = shutil.which("node")
    require_target("node", web_missing() or (None if exe else "no `node` on PATH"))
    return exe


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    require_target("chromium", web_missing())
    from tests.browser.server import Server, write_bundle

    bundle = write_bundle(tmp_path_factory.mktemp("bundle") / "bundle.zip")
    srv = Server({"/web": WEB, "/fixtures": paths.FIXTURES, "/bundle.zip": bundle})
    yield srv
    srv.close()


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require_target("chromium", "the `playwright` package is not installed")
    require_target("chromium", None if Path(CHROMIUM).exists() else f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    pg = context.new_page()
    yield pg
    context.close()
