"""The demo page (web/index.html) in headless Chromium, served by `llamay web`'s server, with every request to
another origin blocked: models loaded by URL, file picker and drag and drop; the model card; streamed replies;
the stop button; a reload that reads the model from the browser's cache (no second download); the messages for
files it cannot load. Screenshots go to artifacts/screenshots/."""

from __future__ import annotations

import re

import pytest

from tests import paths
from tests.browser.conftest import NOT_A_MODEL
from tests.browser.native import STORIES_PROMPT, STORIES_TEXT
from tests.browser.pages import drop_file, expect, gets, growth_steps, wait_growth, watch_text

pytestmark = pytest.mark.native_only

STORIES = "/models/stories260K-f32.gguf"
SMOLLM2 = f"/models/{paths.SMOLLM2}"


def open_demo(page, url: str) -> None:
    page.goto(url)
    expect(page.get_by_test_id("engine-status")).to_contain_text("Engine ready")


def load_url(page, url: str) -> None:
    page.get_by_test_id("url-input").fill(url)
    page.get_by_test_id("url-load").click()


def send(page, text: str, max_tokens: int, temperature: float | None = None) -> None:
    page.get_by_test_id("max-tokens").fill(str(max_tokens))
    if temperature is not None:
        page.get_by_test_id("temperature").fill(str(temperature))
    box = page.get_by_test_id("message-input")
    box.fill(text)
    box.press("Enter")


def finished(page, n: int = 1) -> str:
    """Wait for the n-th reply of the page to finish; its finish reason."""
    reason = page.get_by_test_id("finish-reason").nth(n - 1)
    reason.wait_for(state="attached")
    return reason.get_attribute("data-reason")


def test_demo_stories260K_by_url_streams_then_reloads_from_the_cache(web_app, site, screenshot):
    open_demo(site, web_app.url)
    before = gets(web_app, STORIES)
    load_url(site, STORIES)
    expect(site.get_by_test_id("model-source")).to_contain_text("downloaded")
    expect(site.get_by_test_id("card-architecture")).to_contain_text("llama")
    expect(site.get_by_test_id("card-size")).to_contain_text("1.1 MB · 47 tensors")
    expect(site.get_by_test_id("card-context")).to_contain_text("512 tokens")
    expect(site.get_by_test_id("card-types")).to_have_text("F32 ×47")
    expect(site.get_by_test_id("card-audit")).to_contain_text("all 47 tensors are bound by 'llama'")
    expect(site.get_by_test_id("card-backend")).to_contain_text("wasm")
    expect(site.get_by_test_id("mode")).to_contain_text("text completion")  # stories260K has no chat template
    assert gets(web_app, STORIES) == before + 1

    watch_text(site.get_by_test_id("transcript"))
    send(site, STORIES_PROMPT, max_tokens=120, temperature=0)
    assert finished(site) == "length"
    assert growth_steps(site) > 3, "the reply appeared at once instead of streaming"
    reply = site.get_by_test_id("assistant-text").last.text_content()
    assert reply.startswith(STORIES_TEXT)  # greedy: the native text (the prompt is echoed, dimmed)
    expect(site.get_by_test_id("ttft")).to_have_text(re.compile(r"^\d+ ms$|^\d+\.\d\d s$"))
    expect(site.get_by_test_id("tps")).to_have_text(re.compile(r"^\d+\.\d tok/s$"))
    expect(site.get_by_test_id("tokens")).to_have_text("120")
    screenshot(site, "demo-stories260K")

    # a reload: the model comes from the browser's cache, not the network
    site.reload()
    expect(site.get_by_test_id("engine-status")).to_contain_text("Engine ready")
    site.get_by_test_id("cached").locator("summary").click()
    entry = site.get_by_test_id("cached-list").locator("li", has_text="stories260K-f32.gguf")
    entry.get_by_role("button", name="Load stories260K-f32.gguf from the cache").click()
    expect(site.get_by_test_id("model-source")).to_contain_text("from the browser cache")
    send(site, STORIES_PROMPT, max_tokens=27, temperature=0)
    assert finished(site, 2) == "length"  # the conversation before the reload is still shown above
    assert site.get_by_test_id("assistant-text").last.text_content() == STORIES_TEXT
    screenshot(site, "demo-stories260K-from-cache")
    assert gets(web_app, STORIES) == before + 1, "the reload downloaded the model again"

    assert site.outside == [] and site.errors == []
    served = {p for _, p in web_app.log}
    assert {"/dist/pyodide/pyodide.asm.wasm", "/dist/pyodide/python_stdlib.zip"} <= served  # Pyodide from here


def test_demo_file_picker_drag_and_drop_and_the_clear_errors(web_app, site, screenshot):
    # a limit below stories260K-f32 (1.1 MB) and above q8_0 (0.45 MB), to see the too-large message
    open_demo(site, f"{web_app.url}?max-model-bytes=800000")
    banner = site.get_by_test_id("error-banner")
    title, text = site.get_by_test_id("error-title"), site.get_by_test_id("error-text")

    # a text file named .gguf, from the file picker
    site.get_by_test_id("file-input").set_input_files(
        {"name": "notes.gguf", "mimeType": "application/octet-stream", "buffer": NOT_A_MODEL}
    )
    expect(title).to_have_text("This file is not a GGUF model")
    expect(text).to_contain_text('notes.gguf is not a GGUF file: it starts with "Thes"')
    screenshot(site, "demo-not-a-gguf")

    # a model from the file picker
    site.get_by_test_id("file-input").set_input_files(str(paths.stories("q8_0")))
    expect(site.get_by_test_id("model-source")).to_contain_text("from a local file")
    expect(site.get_by_test_id("card-types")).to_contain_text("Q8_0")
    expect(banner).to_be_hidden()

    # drag and drop: a model larger than this page allows
    drop_file(site, "[data-testid=drop-zone]", paths.stories("f32"))
    expect(title).to_have_text("This model is too large for the browser's memory")
    expect(text).to_contain_text("stories260K-f32.gguf is 1.1 MB: too large for this browser's memory")
    screenshot(site, "demo-too-large")

    # drag and drop: one that fits
    drop_file(site, "[data-testid=drop-zone]", paths.stories("q8_0"))
    expect(site.get_by_test_id("model-source")).to_contain_text("from a local file")
    expect(banner).to_be_hidden()
    send(site, STORIES_PROMPT, max_tokens=8)
    assert finished(site) == "length"

    # a valid GGUF of an architecture llamay does not have: the message, and the card of what was read
    load_url(site, "/models/mamba.gguf")
    expect(title).to_have_text("This model's architecture is not supported")
    expect(text).to_contain_text("architecture 'mamba' is a state-space model")
    expect(site.get_by_test_id("card-architecture")).to_contain_text("mamba not supported")
    screenshot(site, "demo-unsupported-architecture")

    # a URL whose file is not a model, and a URL on another origin (refused on the page: nothing is fetched)
    load_url(site, "/models/notes.gguf")
    expect(title).to_have_text("This file is not a GGUF model")
    load_url(site, "https://models.example.com/big.gguf")
    expect(title).to_have_text("Only this site's files can be loaded by URL")
    assert site.outside == [] and site.errors == []


def test_demo_smollm2_chat_streams_stops_and_the_page_stays_responsive(web_app, site, screenshot):
    paths.registry_model(paths.SMOLLM2)  # skipped locally when absent; CI fetches it
    open_demo(site, web_app.url)
    # the main thread's longest stall while the model loads and generates (the worker does the work)
    site.evaluate("""() => {
      window.__maxGap = 0;
      let last = performance.now();
      setInterval(() => {
        const t = performance.now();
        window.__maxGap = Math.max(window.__maxGap, t - last);
        last = t;
      }, 50);
    }""")
    load_url(site, SMOLLM2)
    expect(site.get_by_test_id("card-types")).to_contain_text("Q4_1 ×210")
    # the progress bar went through each phase of a first load
    assert site.evaluate("window.llamayDemo.timeline.phases") == ["boot", "download", "bind", "cache-write"]
    expect(site.get_by_test_id("card-context")).to_contain_text("8,192 tokens")
    expect(site.get_by_test_id("card-audit")).to_contain_text("all 272 tensors")
    expect(site.get_by_test_id("mode")).to_contain_text("chat template")

    watch_text(site.get_by_test_id("transcript"))
    site.get_by_test_id("seed").fill("1")
    send(site, "Write a long story about a dragon who learns to bake bread.", max_tokens=300, temperature=0.7)
    wait_growth(site, 4)
    site.get_by_test_id("stop").click()
    assert finished(site) == "abort"
    expect(site.get_by_test_id("finish-reason")).to_have_text("stopped")
    assert int(site.get_by_test_id("tokens").text_content()) < 300
    assert growth_steps(site) > 3
    expect(site.get_by_test_id("ttft")).to_have_text(re.compile(r"^\d+ ms$|^\d+\.\d\d s$"))
    screenshot(site, "demo-smollm2-stopped")

    # the chat goes on after a stop, and reuses the KV cache of the turn before
    send(site, "Thanks! Now in one sentence.", max_tokens=8)
    assert finished(site, 2) in ("length", "stop")
    expect(site.get_by_test_id("prompt-stats")).to_contain_text("reused")
    screenshot(site, "demo-smollm2")
    assert site.evaluate("window.__maxGap") < 1500, "the page froze"
    assert site.outside == [] and site.errors == []
