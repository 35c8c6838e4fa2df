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

from llamay.ggml_types import GGMLType
from tests import paths
from tests.browser.server import place
from tests.models.tiny import write_tiny

TINY_MOE = "tiny-qwen3moe-q8_0.gguf"

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


# ---- the demo page and the widget (test_demo.py, test_widget.py, test_api.py): `llamay web`'s server ----

SCREENSHOTS = paths.REPO / "artifacts" / "screenshots"  # git-ignored; the tests save what they saw here
NOT_A_MODEL = b"These are my notes about lemons, not a model.\n"


def write_unsupported_architecture(src: Path, out: Path, arch: str = "mamba") -> Path:
    """A stories260K file with `general.architecture` renamed: a valid GGUF that no architecture of llamay handles."""
    from llamay.gguf import GGUFFile
    from llamay.gguf.writer import GGUFWriter

    with GGUFFile.open(src) as f:
        w = GGUFWriter.from_file(f)
        vtype, _ = w.fields["general.architecture"]
        w.fields["general.architecture"] = (vtype, arch)
        out.write_bytes(w.to_bytes())
    return out


@pytest.fixture(scope="session")
def web_models(tmp_path_factory) -> Path:
    """The folder served at /models/: stories260K (f32, q8_0), SmolLM2 when the store has it, a tiny qwen3moe
    (Q8_0: the experts' decode op), a text file named .gguf and a GGUF of an unsupported architecture."""
    d = tmp_path_factory.mktemp("models")
    for t in ("f32", "q8_0"):
        place(paths.stories(t), d)
    smol = paths.registry_path(paths.SMOLLM2)
    if smol is not None:
        place(smol, d, paths.SMOLLM2)
    place(paths.MINILM, d)
    write_tiny("qwen3moe", d / TINY_MOE, ggml_type=GGMLType.Q8_0)
    (d / "notes.gguf").write_bytes(NOT_A_MODEL)
    write_unsupported_architecture(paths.stories("q8_0"), d / "mamba.gguf")
    return d


@pytest.fixture(scope="session")
def web_app(web_models):
    """`llamay web` (its server, in a thread) on 127.0.0.1: web/ at /, web_models at /models/; `log` lists the
    (method, path) of every request it answered."""
    require_target("chromium", web_missing())
    from llamay.native.commands.web import WebServer

    srv = WebServer(WEB, web_models, log=[]).start()
    yield srv
    srv.close()


DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}  # a phone's CSS pixels (iPhone 12-15)


@pytest.fixture
def site(browser, web_app):
    """A page in a fresh browser context (its own, empty Cache API) that can reach nothing but web_app's origin:
    any other request is aborted and recorded in `page.outside`; uncaught page errors go to `page.errors`."""
    yield from open_site(browser, web_app, {"width": 1280, "height": 860})


@pytest.fixture
def phone_site(browser, web_app):
    """`site` on a phone: 390 x 844 CSS pixels, touch, a device scale of 3."""
    yield from open_site(browser, web_app, PHONE, is_mobile=True, has_touch=True, device_scale_factor=3)


def open_site(browser, web_app, viewport: dict, **options):
    context = browser.new_context(viewport=viewport, **options)
    origin = web_app.url.rstrip("/")
    outside: list[str] = []

    def only_our_origin(route) -> None:
        url = route.request.url
        if url.startswith((origin + "/", "data:", "blob:")):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    context.route("**/*", only_our_origin)
    page = context.new_page()
    page.outside = outside
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.set_default_timeout(120_000)
    yield page
    context.close()


@pytest.fixture
def screenshot():
    """screenshot(page, name): save the page as artifacts/screenshots/NAME.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def save(page, name: str, **kwargs) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), **kwargs)
        return path

    return save
