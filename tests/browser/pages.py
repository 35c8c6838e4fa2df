"""Helpers for the demo page and widget tests: watching streamed text grow, dropping files, counting requests."""

from __future__ import annotations

import base64
import itertools
from pathlib import Path

EXPECT_TIMEOUT_MS = 120_000  # a model loads in a few seconds here; a slow shared machine gets room

WATCH = """(el) => {
  // every length the element's text takes, in order: streamed text grows in many steps, not one
  const lengths = [el.textContent.length];
  window.__lengths = lengths;
  new MutationObserver(() => {
    const n = el.textContent.length;
    if (lengths[lengths.length - 1] !== n) lengths.push(n);
  }).observe(el, { subtree: true, childList: true, characterData: true });
}"""

DROP = """([b64, name]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], name, { type: "application/octet-stream" }));
  return dt;
}"""


def expect(target):
    """Playwright's expect, waiting up to EXPECT_TIMEOUT_MS (imported late: the tests skip without playwright)."""
    from playwright.sync_api import expect as _expect

    _expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    return _expect(target)


def watch_text(locator) -> None:
    """Start recording the lengths the text of `locator` goes through (read them with growth_steps)."""
    locator.evaluate(WATCH)


def growth_steps(page) -> int:
    """How many times the watched text grew since watch_text."""
    lengths = page.evaluate("window.__lengths")
    return sum(1 for a, b in itertools.pairwise(lengths) if b > a)


def wait_growth(page, steps: int, timeout: float = 120_000) -> None:
    page.wait_for_function(
        f"(window.__lengths || []).filter((n, i, a) => i > 0 && n > a[i - 1]).length >= {steps}",
        timeout=timeout,
        polling=50,
    )


def drop_file(page, selector: str, data: bytes | Path, name: str | None = None) -> None:
    """Drag a file onto `selector` and drop it, as a person dragging it from their desktop would."""
    if isinstance(data, Path):
        name = name or data.name
        data = data.read_bytes()
    dt = page.evaluate_handle(DROP, [base64.b64encode(data).decode(), name or "file.gguf"])
    for event in ("dragenter", "dragover", "drop"):
        page.dispatch_event(selector, event, {"dataTransfer": dt})


def gets(server, path: str) -> int:
    """How many GET requests for `path` the server has answered."""
    return sum(1 for method, p in server.log if method == "GET" and p == path)
