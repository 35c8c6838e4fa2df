"""The Markdown renderer of replies (web/src/markdown.mjs, shared by the demo and the widget) in headless Chromium:
each construct models write becomes its element, and model text that holds HTML, scripts or javascript: links
stays text (the renderer builds nodes; it never parses HTML)."""

from __future__ import annotations

import pytest

from tests.browser.pages import expect

pytestmark = pytest.mark.native_only

XSS = {  # model text: the text the page shows for it
    '<img src=x onerror="window.__xss=1">': '<img src=x onerror="window.__xss=1">',
    "<script>window.__xss=2</script>": "<script>window.__xss=2</script>",
    '<a href="javascript:window.__xss=3">click</a>': '<a href="javascript:window.__xss=3">click</a>',
    "[click me](javascript:window.__xss=4)": "[click me](javascript:window.__xss=4)",  # not a safe link: as written
    "**<svg onload=window.__xss=5>**": "<svg onload=window.__xss=5>",
    "```html\n<script>window.__xss=6</script>\n```": "htmlCopy<script>window.__xss=6</script>",  # label, button
    "`<iframe src=javascript:window.__xss=7>`": "<iframe src=javascript:window.__xss=7>",
}


@pytest.fixture
def md(site, web_app):
    site.goto(f"{web_app.url}test/markdown.html")
    site.wait_for_function("window.ready === true")
    return site


def render(page, text: str) -> str:
    return page.evaluate("(t) => window.render(t)", text)


def shape(page, text: str) -> list:
    """[tag, text] of each top-level node rendered."""
    render(page, text)
    return page.evaluate(
        "() => [...document.getElementById('out').childNodes].map((n) => [n.nodeName.toLowerCase(), n.textContent])"
    )


def test_paragraphs_emphasis_and_inline_code(md):
    assert render(md, "Hello *you* and **them**, `x < 1` and ~~not~~ _this_.") == (
        "<p>Hello <em>you</em> and <strong>them</strong>, <code>x &lt; 1</code> and <del>not</del> <em>this</em>.</p>"
    )
    assert render(md, "one\ntwo\n\nthree") == "<p>one<br>two</p><p>three</p>"
    assert render(md, "snake_case_name and 2 * 3 * 4") == "<p>snake_case_name and 2 * 3 * 4</p>"
    assert render(md, r"\*not em\* and ``a `tick` here``") == "<p>*not em* and <code>a `tick` here</code></p>"
    assert render(md, "**bold with *em* inside**") == "<p><strong>bold with <em>em</em> inside</strong></p>"
    assert render(md, "### Steps") == '<h5 class="md-heading">Steps</h5>'


def test_lists_nested_and_ordered(md):
    html = render(md, "Fruits:\n- apple\n- citrus\n  - lemon\n  - lime\n- pear\n\n3. third\n4. fourth")
    assert html == (
        "<p>Fruits:</p><ul><li>apple</li><li>citrus<ul><li>lemon</li><li>lime</li></ul></li><li>pear</li></ul>"
        '<ol start="3"><li>third</li><li>fourth</li></ol>'
    )
    assert render(md, "1. one\n\n2. two") == "<ol><li>one</li><li>two</li></ol>"
    assert shape(md, "> quoted *text*\n\n---\nafter") == [["blockquote", "quoted text"], ["hr", ""], ["p", "after"]]


def test_fenced_code_blocks_keep_their_text_and_have_a_copy_button(md):
    code = "def f(x):\n    return x * 2  # *not em*\n\n\nprint(f(2))"
    render(md, f"Here:\n```python\n{code}\n```\nDone.")
    got = md.evaluate("""() => {
      const box = document.querySelector('#out .md-code');
      return {code: box.querySelector('pre code').textContent, cls: box.querySelector('pre code').className,
              lang: box.querySelector('.md-lang').textContent, button: box.querySelector('button').textContent,
              open: box.classList.contains('open'), after: document.querySelector('#out > p:last-child').textContent};
    }""")
    assert got == {"code": code, "cls": "language-python", "lang": "python", "button": "Copy", "open": False,
                   "after": "Done."}  # fmt: skip
    # an unclosed fence (a reply still streaming) is a code block to the end
    assert shape(md, "```\nfor i in range(3):") == [["div", "codeCopyfor i in range(3):"]]
    assert md.evaluate("document.querySelector('#out .md-code').classList.contains('open')")


def test_the_copy_button_copies_the_code(md):
    md.context.grant_permissions(["clipboard-read", "clipboard-write"])
    render(md, "```sh\nllamay web --port 8000\n```")
    md.get_by_role("button", name="Copy the sh code").click()
    assert md.evaluate("navigator.clipboard.readText()") == "llamay web --port 8000"
    assert md.get_by_role("button", name="Copy the sh code").text_content() == "Copied"


def test_the_copy_button_copies_without_the_clipboard_api(md):
    """A page over plain http (a phone on the LAN) has no navigator.clipboard.writeText: the copy goes through a
    selection and execCommand, and lands on the same clipboard."""
    md.context.grant_permissions(["clipboard-read", "clipboard-write"])
    md.evaluate("""() => {
      window.copied = [];
      document.addEventListener('copy', () => window.copied.push(String(document.getSelection())));
      navigator.clipboard.writeText = () => Promise.reject(new DOMException('not allowed', 'NotAllowedError'));
    }""")
    render(md, "```py\nprint('<b>hi</b>')\n```")
    md.get_by_role("button", name="Copy the py code").click()
    expect(md.get_by_role("button", name="Copy the py code")).to_have_text("Copied")
    assert md.evaluate("window.copied") == ["print('<b>hi</b>')"]
    assert md.evaluate("navigator.clipboard.readText()") == "print('<b>hi</b>')"
    assert md.evaluate("document.querySelectorAll('textarea').length") == 0  # the helper box is gone


@pytest.mark.parametrize("attack", sorted(XSS))
def test_html_and_scripts_in_model_text_stay_text(md, attack):
    render(md, attack)
    found = md.evaluate("""() => ({
      elements: [...document.querySelectorAll('#out *')].map((n) => n.tagName.toLowerCase()),
      hrefs: [...document.querySelectorAll('#out a')].map((a) => a.getAttribute('href')),
      handlers: [...document.querySelectorAll('#out *')].flatMap((n) => [...n.attributes].map((a) => a.name))
        .filter((n) => n.startsWith('on')),
      text: document.getElementById('out').textContent,
    })""")
    md.wait_for_timeout(50)  # an onerror/onload would have fired by now
    assert md.evaluate("window.__xss") is None
    assert not {"img", "script", "svg", "iframe"} & set(found["elements"])
    assert found["hrefs"] == [] and found["handlers"] == []
    assert found["text"] == XSS[attack]


def test_only_http_and_mailto_links_are_links(md):
    html = render(md, "[docs](https://example.com/a?b=1) [mail](mailto:a@b.c) [rel](/models/) [js](JavaScript:x)")
    assert html == (
        '<p><a href="https://example.com/a?b=1" target="_blank" rel="noopener noreferrer nofollow">docs</a> '
        '<a href="mailto:a@b.c" target="_blank" rel="noopener noreferrer nofollow">mail</a> '
        "[rel](/models/) [js](JavaScript:x)</p>"
    )
