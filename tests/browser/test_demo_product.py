"""The demo page as a visitor uses it (web/index.html), in headless Chromium on `llamay web`'s server: the list of
the server's models (what each is, cached, loaded), a failed load that keeps the working model (and says so),
the thread count, Markdown replies with copy and regenerate, conversations kept in the browser across a reload
(new, switch, delete), stored model text that tries HTML staying text, and a layout with nothing wider than a
390-px phone screen or a 1280-px desktop. Screenshots go to artifacts/screenshots/."""

from __future__ import annotations

import json

import pytest

from tests import paths
from tests.browser.conftest import DESKTOP
from tests.browser.native import STORIES_PROMPT, STORIES_TEXT
from tests.browser.pages import expect

pytestmark = pytest.mark.native_only

SMOLLM2 = f"/models/{paths.SMOLLM2}"
OVERFLOW = "() => ({scroll: document.scrollingElement.scrollWidth, inner: innerWidth})"


def open_demo(page, url: str) -> None:
    page.goto(url)
    expect(page.get_by_test_id("engine-status")).to_contain_text("Engine ready")


def served(page, name: str):
    return page.locator(f"[data-testid=server-model][data-name='{name}']")


def send(page, text: str, max_tokens: int, temperature: float | None = None) -> None:
    page.get_by_test_id("max-tokens").fill(str(max_tokens))
    if temperature is not None:
        page.get_by_test_id("temperature").fill(str(temperature))
    box = page.get_by_test_id("message-input")
    box.fill(text)
    box.press("Enter")


def finished(page, n: int) -> str:
    reason = page.get_by_test_id("finish-reason").nth(n - 1)
    reason.wait_for(state="attached")
    return reason.get_attribute("data-reason")


def fits(page) -> None:
    """Nothing is wider than the window (no sideways scrolling; on a phone, no zooming out to fit either)."""
    size = page.evaluate(OVERFLOW)
    assert size["scroll"] <= size["inner"], f"the page is {size['scroll']} px wide in a {size['inner']} px window"
    assert size["inner"] == page.viewport_size["width"], f"the layout viewport grew to {size['inner']} px"


def test_the_servers_models_a_failed_load_keeps_the_model_and_threads(web_app, site, screenshot):
    index = {m["name"]: m for m in json.loads(site.request.get(f"{web_app.url}models/index.json").text())}
    open_demo(site, web_app.url)
    stories = served(site, "stories260K-f32.gguf")
    expect(stories).to_contain_text("llama · 260K params · F32 · 1.1 MB")
    expect(stories).to_contain_text("text completion")
    minilm = served(site, "all-MiniLM-L6-v2-f16.gguf")
    expect(minilm).to_contain_text("bert · 22.6M params · F16")
    expect(minilm).to_contain_text("embeddings")
    expect(minilm).to_be_disabled()  # an encoder cannot chat: said, not offered
    expect(served(site, "notes.gguf")).to_be_disabled()
    expect(served(site, "notes.gguf")).to_contain_text("this is not a GGUF file")
    expect(served(site, "mamba.gguf")).to_contain_text("architecture 'mamba' is a state-space model")
    assert index["mamba.gguf"]["supported"] is False
    threads = site.get_by_test_id("threads")
    cores = site.evaluate("navigator.hardwareConcurrency")
    expect(threads).to_have_text(f"1 of {cores} cores")

    stories.click()
    expect(site.get_by_test_id("model-source")).to_contain_text("downloaded")
    expect(stories.locator(".badge.loaded")).to_have_text("loaded")
    expect(stories.locator(".badge.cached")).to_have_text("cached")  # kept in the Cache API once it bound
    send(site, STORIES_PROMPT, max_tokens=27, temperature=0)
    assert finished(site, 1) == "length"

    # a load that fails: the message names the problem and says the working model stays
    site.get_by_test_id("url-input").fill("/models/notes.gguf")
    site.get_by_test_id("url-load").click()
    expect(site.get_by_test_id("error-title")).to_have_text("This file is not a GGUF model")
    expect(site.get_by_test_id("error-kept")).to_have_text(
        "stories260K (karpathy/llama2.c TinyStories) is still loaded: the conversation goes on with it."
    )
    expect(site.get_by_test_id("engine-status")).to_contain_text("stories260K")
    expect(site.get_by_test_id("message-input")).to_be_enabled()
    screenshot(site, "demo-failed-load-kept")
    send(site, STORIES_PROMPT, max_tokens=27, temperature=0)
    assert finished(site, 2) == "length"
    assert site.get_by_test_id("assistant-text").last.text_content() == STORIES_TEXT  # the same model answered

    # a GGUF that cannot bind (unsupported architecture) keeps it too
    site.get_by_test_id("url-input").fill("/models/mamba.gguf")
    site.get_by_test_id("url-load").click()
    expect(site.get_by_test_id("error-title")).to_have_text("This model's architecture is not supported")
    expect(site.get_by_test_id("error-kept")).to_contain_text("stories260K (karpathy/llama2.c TinyStories) is still")
    assert site.outside == [] and site.errors == []


def test_more_threads_than_the_build_has_are_refused_by_name(web_app, site):
    site.goto(web_app.url)
    over = site.evaluate("import('./src/llamay.mjs').then((m) => m.THREADS_AVAILABLE)") + 1
    open_demo(site, f"{web_app.url}?threads={over}&model=/models/stories260K-q8_0.gguf")
    expect(site.get_by_test_id("error-title")).to_have_text("The request could not be run")
    expect(site.get_by_test_id("error-text")).to_contain_text(f"threads: {over} asked for, but this build runs the")
    expect(site.get_by_test_id("threads-select")).to_have_value(str(over))  # the count asked, shown
    expect(site.get_by_test_id("threads")).to_contain_text("1")
    assert site.outside == [] and site.errors == []


def test_the_threads_control_passes_threads_and_a_refused_count_keeps_the_model(web_app, site):
    open_demo(site, f"{web_app.url}?model=/models/stories260K-q8_0.gguf")
    expect(site.get_by_test_id("model-source")).to_contain_text("downloaded")
    cores = site.evaluate("navigator.hardwareConcurrency")
    available = site.evaluate("import('./src/llamay.mjs').then((m) => m.THREADS_AVAILABLE)")
    control = site.get_by_test_id("threads-select")
    values = control.locator("option").evaluate_all("(os) => os.map((o) => [o.value, o.textContent])")
    assert [int(v) for v, _ in values] == list(range(1, cores + 1))
    for v, text in values:  # a count this build cannot run is offered but named so
        assert ("(not in this build)" in text) == (int(v) > available), text
    expect(control).to_have_value("1")
    expect(site.get_by_test_id("threads")).to_have_text(f"1 of {cores} cores")
    if cores < 2:
        pytest.skip("one core: no second thread to ask for")
    control.select_option("2")  # loads the model again with threads: 2
    if available >= 2:
        expect(site.get_by_test_id("threads")).to_have_text(f"2 of {cores} cores")
        expect(site.get_by_test_id("model-source")).to_contain_text("from the browser cache")
    else:
        expect(site.get_by_test_id("error-text")).to_contain_text("threads: 2 asked for, but this build runs")
        expect(site.get_by_test_id("error-kept")).to_contain_text("stories260K (karpathy/llama2.c TinyStories) is")
        expect(control).to_have_value("1")  # back to the count the engine runs
        expect(site.get_by_test_id("threads")).to_have_text(f"1 of {cores} cores")
    send(site, STORIES_PROMPT, max_tokens=27, temperature=0)
    assert finished(site, 1) == "length"
    assert site.get_by_test_id("assistant-text").last.text_content() == STORIES_TEXT
    assert site.outside == [] and site.errors == []


STORED = [
    {
        "id": "c-old",
        "title": "An older chat",
        "created": 1,
        "updated": 1,
        "messages": [
            {"role": "user", "content": "Show me code", "mode": "chat"},
            {
                "role": "assistant",
                "mode": "chat",
                "finish_reason": "stop",
                "content": "Here is **bold** and `x`:\n\n- one\n- two\n\n```python\nprint('<b>hi</b>')\n```\n"
                '<img src=x onerror="window.__xss=1"> <script>window.__xss=2</script>',
            },
        ],
    },
    {"id": "c-empty", "title": "", "created": 2, "updated": 2, "messages": []},
]


def test_conversations_are_kept_rendered_as_markdown_and_html_in_them_stays_text(web_app, site, screenshot):
    site.goto(web_app.url)
    site.evaluate(
        "(list) => { localStorage.setItem('llamay-demo:conversations', JSON.stringify(list));"
        " localStorage.setItem('llamay-demo:current', 'c-old'); }",
        STORED,
    )
    site.reload()
    expect(site.get_by_test_id("conversation")).to_have_count(2)
    reply = site.get_by_test_id("assistant-text")
    expect(reply.locator("strong")).to_have_text("bold")
    expect(reply.locator("li")).to_have_text(["one", "two"])
    expect(reply.locator(".md-code pre code")).to_have_text("print('<b>hi</b>')")
    expect(reply).to_contain_text('<img src=x onerror="window.__xss=1"> <script>window.__xss=2</script>')
    assert reply.locator("img, script, b").count() == 0
    assert site.evaluate("window.__xss") is None
    site.context.grant_permissions(["clipboard-read", "clipboard-write"])
    site.get_by_test_id("copy-code").click()
    assert site.evaluate("navigator.clipboard.readText()") == "print('<b>hi</b>')"
    site.get_by_test_id("copy-reply").click()
    assert site.evaluate("navigator.clipboard.readText()") == STORED[0]["messages"][1]["content"]

    # switch, new, delete; the list survives a reload
    site.locator("button.conv", has_text="New conversation").click()
    expect(site.get_by_test_id("transcript")).to_contain_text("Load a model")
    site.get_by_test_id("new-chat").click()
    expect(site.get_by_test_id("conversation")).to_have_count(3)
    site.get_by_role("button", name="Delete the conversation An older chat").click()
    expect(site.get_by_test_id("conversation")).to_have_count(2)
    site.reload()
    expect(site.get_by_test_id("conversation")).to_have_count(2)
    kept = site.evaluate("JSON.parse(localStorage.getItem('llamay-demo:conversations')).map((c) => c.id)")
    assert "c-old" not in kept and "c-empty" in kept and len(kept) == 2
    assert site.outside == [] and site.errors == []


def test_smollm2_markdown_reply_copy_regenerate_and_a_reload_keeps_the_conversation(web_app, site, screenshot):
    paths.registry_model(paths.SMOLLM2)  # skipped locally when absent; CI fetches it
    site.set_viewport_size(DESKTOP)
    open_demo(site, web_app.url)
    served(site, paths.SMOLLM2).click()
    expect(site.get_by_test_id("mode")).to_contain_text("chat template")
    site.get_by_test_id("seed").fill("3")
    send(site, "Write a Python function that adds two numbers, in a code block.", max_tokens=120, temperature=0)
    finished(site, 1)
    reply = site.get_by_test_id("assistant-text").last
    content = site.evaluate("window.llamayDemo.timeline.reply.content")
    assert content.strip()
    expect(reply).to_have_class("text md")
    if "```" in content:  # greedy SmolLM2 writes one here; the check holds for what it wrote
        expect(reply.locator(".md-code")).to_have_count(content.count("```") // 2 or 1)
    site.context.grant_permissions(["clipboard-read", "clipboard-write"])
    site.get_by_test_id("copy-reply").last.click()
    assert site.evaluate("navigator.clipboard.readText()") == content  # the reply as the model wrote it
    expect(site.get_by_test_id("conversation").first).to_contain_text("Write a Python function")
    screenshot(site, "demo-desktop-markdown")

    # regenerate: the reply is written again in its place (greedy: the same text), not appended
    site.get_by_test_id("regenerate").click()
    expect(site.get_by_test_id("msg-assistant")).to_have_count(1)
    finished(site, 1)
    expect(site.get_by_test_id("msg-user")).to_have_count(1)
    assert site.evaluate("window.llamayDemo.timeline.reply.content") == content

    # a reload: the conversation is still there, rendered the same
    site.reload()
    expect(site.get_by_test_id("conversation")).to_have_count(1)
    expect(site.get_by_test_id("msg-assistant")).to_have_count(1)
    assert site.get_by_test_id("assistant-text").last.text_content() == reply.text_content()
    assert site.outside == [] and site.errors == []


def test_the_demo_fits_a_phone_and_a_desktop(web_app, phone_site, screenshot):
    page = phone_site
    open_demo(page, web_app.url)
    fits(page)
    temperature = page.get_by_test_id("temperature").bounding_box()
    slider = page.get_by_label("Temperature slider").bounding_box()
    assert temperature["width"] >= 56 and slider["width"] >= 120, (temperature, slider)
    assert temperature["x"] + temperature["width"] <= 390
    served(page, "stories260K-f32.gguf").click()
    expect(page.get_by_test_id("model-source")).to_contain_text("downloaded")
    # one column: with a model loaded the chat comes first, above the lists, and is shown
    chat = page.locator("#chat-h").bounding_box()
    assert chat["y"] < page.locator("#conv-h").bounding_box()["y"]
    expect(page.locator("#chat-h")).to_be_in_viewport()
    threads = page.get_by_test_id("threads-select").bounding_box()
    assert threads["x"] + threads["width"] <= 390
    page.locator("#card details.meta summary").click()  # the metadata table, the widest thing on the page
    send(page, STORIES_PROMPT, max_tokens=40, temperature=0)
    assert finished(page, 1) == "length"
    page.evaluate("""() => {
      const list = JSON.parse(localStorage.getItem('llamay-demo:conversations'));
      list[0].messages.push({role: 'user', content: 'code?', mode: 'chat'}, {role: 'assistant', mode: 'chat',
        content: 'A long line:\\n\\n```\\n' + 'x = 1; '.repeat(40) + '\\n```\\nand ' + 'word'.repeat(30)});
      localStorage.setItem('llamay-demo:conversations', JSON.stringify(list));
    }""")
    page.reload()
    expect(page.locator(".md-code")).to_have_count(1)
    fits(page)  # a long code line scrolls inside its block, a long word wraps
    code = page.locator(".md-code pre").bounding_box()
    assert code["x"] + code["width"] <= 390
    screenshot(page, "demo-phone", full_page=True)
    page.get_by_test_id("message-input").scroll_into_view_if_needed()
    screenshot(page, "demo-phone-chat")
    page.set_viewport_size({"width": 768, "height": 1024})  # a tablet: still one column
    fits(page)
    page.set_viewport_size(DESKTOP)
    fits(page)
    screenshot(page, "demo-desktop")
    assert page.outside == [] and page.errors == []
