"""The <llamay-chat> widget (web/widget/llamay-chat.mjs) in headless Chromium, served by `llamay web`'s server
with every request to another origin blocked: used with the keyboard alone (labels, an aria-live transcript,
Enter sends, Escape stops), and embedded in an unrelated page (web/examples/embed.html) with SmolLM2, stopped
with its button, then reloaded from the browser's cache. Screenshots go to artifacts/screenshots/."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests import paths
from tests.browser.native import STORIES_PROMPT, STORIES_TEXT
from tests.browser.pages import expect, gets, growth_steps, wait_growth, watch_text

pytestmark = pytest.mark.native_only

SMOLLM2 = f"/models/{paths.SMOLLM2}"


def finish(page):
    """The note under a reply that did not end by itself ("stopped" / "reached the length limit")."""
    note = page.get_by_test_id("llamay-finish").last
    note.wait_for(state="attached")
    return note


def test_widget_with_the_keyboard_streams_and_escape_stops(web_app, site, screenshot):
    # portable kernels: slow enough (tens of tokens/s) to stop a reply in the middle
    query = {"model": "/models/stories260K-f32.gguf", "backend": "portable", "max-tokens": 300, "temperature": 0,
             "label": "Story time"}  # fmt: skip
    site.goto(f"{web_app.url}test/widget.html?{urlencode(query)}")
    status = site.get_by_test_id("llamay-status")
    expect(status).to_have_text("Ready · stories260K-f32.gguf")
    transcript = site.get_by_test_id("llamay-transcript")
    expect(transcript).to_have_attribute("role", "log")
    expect(transcript).to_have_attribute("aria-live", "polite")
    expect(site.get_by_role("log", name="Story time")).to_be_visible()
    box = site.get_by_label("Message")  # a labelled control, inside the shadow root
    expect(box).to_have_attribute("data-testid", "llamay-input")
    expect(site.get_by_role("button", name="Send")).to_have_attribute("data-testid", "llamay-send")
    stop = site.get_by_role("button", name="Stop the reply")
    expect(stop).to_have_attribute("data-testid", "llamay-stop")
    expect(stop).to_be_disabled()

    # keyboard only: from the page's own button, Tab into the widget (its transcript, then its message box)
    site.get_by_role("button", name="A button before the widget").focus()
    site.keyboard.press("Tab")
    expect(transcript).to_be_focused()
    site.keyboard.press("Tab")
    expect(box).to_be_focused()
    watch_text(transcript)
    site.keyboard.type(STORIES_PROMPT)
    site.keyboard.press("Enter")
    expect(stop).to_be_enabled()
    wait_growth(site, 5)  # the prompt typed in, then the reply in several pieces
    site.keyboard.press("Escape")
    expect(finish(site)).to_have_text("stopped")
    reply = site.evaluate("window.llamayEvents.find((e) => e.type === 'llamay-reply').detail")
    assert reply["finish_reason"] == "abort" and reply["usage"]["completion_tokens"] < 300
    got = STORIES_PROMPT + reply["content"]  # greedy: the native text, as far as either goes
    assert reply["content"] and got[: len(STORIES_TEXT)] == STORIES_TEXT[: len(got)]
    assert growth_steps(site) > 4
    expect(stop).to_be_disabled()
    expect(box).to_be_focused()  # back in the message box, ready for the next one
    expect(status).to_contain_text("tokens")
    screenshot(site, "widget-keyboard-stories260K")
    assert site.outside == [] and site.errors == []


def test_widget_embedded_in_a_page_smollm2_stop_then_reload_from_the_cache(web_app, site, screenshot):
    paths.registry_model(paths.SMOLLM2)  # skipped locally when absent; CI fetches it
    before = gets(web_app, SMOLLM2)
    site.goto(f"{web_app.url}examples/embed.html")
    status = site.get_by_test_id("llamay-status")
    expect(status).to_have_text(f"Ready · {paths.SMOLLM2}")
    assert gets(web_app, SMOLLM2) == before + 1
    transcript = site.get_by_test_id("llamay-transcript")
    expect(transcript).to_contain_text("Hello! Ask me anything about baking.")

    watch_text(transcript)
    site.get_by_test_id("llamay-input").fill("How do I keep a lemon cake moist? Give me many tips.")
    site.get_by_test_id("llamay-send").click()
    wait_growth(site, 4)
    screenshot(site, "widget-embedded-smollm2-streaming")
    site.get_by_test_id("llamay-stop").click()
    expect(finish(site)).to_have_text("stopped")
    bubbles = site.evaluate("document.querySelector('llamay-chat').shadowRoot.querySelectorAll('.assistant').length")
    assert bubbles == 2  # the greeting and the (stopped) reply
    text = transcript.text_content()
    assert "How do I keep a lemon cake moist?" in text and growth_steps(site) > 3
    screenshot(site, "widget-embedded-smollm2")

    # a reload: the widget reads the model from the browser's cache, not the network
    site.reload()
    expect(status).to_have_text(f"Ready · {paths.SMOLLM2} (from cache)")
    assert gets(web_app, SMOLLM2) == before + 1, "the reload downloaded the model again"
    expect(site.get_by_test_id("llamay-input")).to_be_enabled()
    assert site.outside == [] and site.errors == []
