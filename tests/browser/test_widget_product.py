"""The <llamay-chat> widget as a visitor and a host page meet it, in headless Chromium on `llamay web`'s server:
a model that cannot load is explained inside the widget in plain words (with a Try again button) and reported to
the page as a `llamay-error` event; `threads` beyond what the build has is refused by name; `system-prompt`
reaches the model (the reply is the native engine's greedy reply to the same messages); chat replies are
Markdown; nothing is wider than a 390-px phone. Screenshots at desktop and phone sizes go to
artifacts/screenshots/."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests import paths
from tests.browser.conftest import DESKTOP
from tests.browser.pages import expect

pytestmark = pytest.mark.native_only

SMOLLM2 = f"/models/{paths.SMOLLM2}"
SYSTEM = "You are a pirate. Always answer like a pirate."
QUESTION = "What is bread made of?"


def widget(page, web_app, **attrs) -> None:
    page.goto(f"{web_app.url}test/widget.html?{urlencode(attrs)}")


def events(page, kind: str) -> list:
    return page.evaluate(f"window.llamayEvents.filter((e) => e.type === '{kind}').map((e) => e.detail)")


def fits(page) -> None:
    size = page.evaluate("() => ({scroll: document.scrollingElement.scrollWidth, inner: innerWidth})")
    assert size["scroll"] <= size["inner"] == page.viewport_size["width"], size


@pytest.mark.parametrize("where", ["desktop", "phone"])
def test_a_bad_model_url_is_explained_in_the_widget_and_sent_to_the_page(web_app, site, phone_site, where,
                                                                        screenshot):  # fmt: skip
    page = phone_site if where == "phone" else site
    if where == "desktop":
        page.set_viewport_size(DESKTOP)
    widget(page, web_app, model="/models/no-such-model.gguf", label="Help")
    failure = page.get_by_test_id("llamay-error")
    expect(failure).to_be_visible()
    expect(failure).to_have_attribute("role", "alert")
    expect(failure).to_contain_text("The chat could not start.")
    expect(failure).to_contain_text("The assistant's model could not be downloaded from this site.")
    expect(failure).to_contain_text("no-such-model.gguf")
    expect(failure).to_contain_text("404")
    expect(page.get_by_test_id("llamay-status")).to_have_text("Not available")
    expect(page.get_by_test_id("llamay-input")).to_be_disabled()
    [detail] = events(page, "llamay-error")
    assert detail["kind"] == "network" and "404" in detail["message"]
    fits(page)
    screenshot(page, f"widget-error-{where}")

    # Try again: the same refusal, a second event (a host page can count them)
    page.get_by_test_id("llamay-retry").click()
    page.wait_for_function("window.llamayEvents.filter((e) => e.type === 'llamay-error').length === 2")
    expect(page.get_by_test_id("llamay-error")).to_contain_text("could not be downloaded")
    assert page.outside == [] and page.errors == []


def test_threads_beyond_the_build_are_refused_by_name_and_one_is_shown(web_app, site):
    site.goto(f"{web_app.url}test/widget.html")
    over = site.evaluate("import('../src/llamay.mjs').then((m) => m.THREADS_AVAILABLE)") + 1
    widget(site, web_app, model="/models/stories260K-q8_0.gguf", threads=over)
    failure = site.get_by_test_id("llamay-error")
    expect(failure).to_contain_text("This chat is set up in a way it cannot run.")
    expect(failure).to_contain_text(f"threads: {over} asked for, but this build runs the kernels on")
    assert events(site, "llamay-error")[0]["kind"] == "bad-request"

    widget(site, web_app, model="/models/stories260K-q8_0.gguf", threads=1)
    # while Pyodide boots (seconds) and the model loads, the transcript says what is going on, then gives way
    expect(site.get_by_test_id("llamay-loading")).to_contain_text("The assistant is getting ready.")
    expect(site.get_by_test_id("llamay-status")).to_have_text("Ready · stories260K-q8_0.gguf")
    expect(site.get_by_test_id("llamay-loading")).to_have_count(0)
    expect(site.get_by_test_id("llamay-threads")).to_have_text(" · 1 thread")
    assert site.outside == [] and site.errors == []


def test_system_prompt_reaches_the_model_and_replies_are_markdown(web_app, site, phone_site, screenshot):
    path = paths.registry_model(paths.SMOLLM2)  # skipped locally when absent; CI fetches it
    import llamay

    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    with llamay.load(str(path)) as model:
        native = model.chat(messages, max_tokens=24, temperature=0)
        without = model.chat(messages[1:], max_tokens=24, temperature=0)
    assert native != without  # the system prompt changes the reply: the check below can tell

    site.set_viewport_size(DESKTOP)
    widget(site, web_app, model=SMOLLM2, **{"system-prompt": SYSTEM, "max-tokens": 24, "temperature": 0})
    expect(site.get_by_test_id("llamay-status")).to_contain_text("Ready")
    site.get_by_test_id("llamay-input").fill(QUESTION)
    site.get_by_test_id("llamay-send").click()
    site.wait_for_function("window.llamayEvents.some((e) => e.type === 'llamay-reply')")
    [reply] = events(site, "llamay-reply")
    assert reply["content"] == native
    bubble = site.locator("llamay-chat .assistant.rendered .md").last
    expect(bubble).to_be_visible()
    # the bubble holds the rendered Markdown of the reply (its text, less the Markdown's own marks)
    blocks = "p, ul, ol, .md-code, h3, h4, h5, h6, blockquote"
    assert bubble.evaluate(f"(b) => b.querySelectorAll('{blocks}').length") > 0
    screenshot(site, "widget-desktop-markdown")

    # a reply with a code block, shown as a visitor on a phone would see it
    page = phone_site
    widget(page, web_app, model=SMOLLM2, **{"max-tokens": 80, "temperature": 0, "label": "Help"})
    expect(page.get_by_test_id("llamay-status")).to_contain_text("Ready")
    page.get_by_test_id("llamay-input").fill("Show a Python hello world program in a code block.")
    page.get_by_test_id("llamay-send").click()
    page.wait_for_function("window.llamayEvents.some((e) => e.type === 'llamay-reply')")
    content = events(page, "llamay-reply")[0]["content"]
    if "```" in content:
        expect(page.locator("llamay-chat .md-code").first).to_be_visible()
    fits(page)
    screenshot(page, "widget-phone-markdown")
    assert site.outside == [] and site.errors == [] and page.outside == [] and page.errors == []


def test_the_embedded_widget_fits_a_phone(web_app, phone_site, screenshot):
    phone_site.goto(f"{web_app.url}examples/embed.html")
    expect(phone_site.get_by_test_id("llamay-input")).to_be_visible()
    fits(phone_site)
    box = phone_site.locator("llamay-chat").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    phone_site.locator("llamay-chat").scroll_into_view_if_needed()
    expect(phone_site.get_by_test_id("llamay-loading")).to_be_visible()
    screenshot(phone_site, "widget-embedded-phone-loading")
    expect(phone_site.get_by_test_id("llamay-status")).to_contain_text("Ready", timeout=120_000)
    fits(phone_site)
    screenshot(phone_site, "widget-embedded-phone")
    assert phone_site.outside == [] and phone_site.errors == []
