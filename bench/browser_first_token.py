"""Page load to first token in headless Chromium, with the model already in the browser's cache.

Serves the demo page with `llamay web`'s server, opens it once with `?model=` so the model is downloaded and kept
in the Cache API (the first visit), then loads the page again `--runs` times, each time with `?model=...&prompt=`
(the page loads the model from the cache and sends the prompt at once), and prints, from the page's own clock
(navigation start = 0), how long each step took and the total to the first streamed token, against the first
visit (which downloaded the model) in the same run.

    python bench/browser_first_token.py                       # SmolLM2-135M-Instruct Q4_1 from the model store
    python bench/browser_first_token.py --model PATH.gguf --runs 5

Needs web/dist (`(cd web && npm ci) && python web/build.py`), Playwright for Python and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlencode

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]  # fmt: skip
PROMPT = "Hello! What can you do?"

# what the page knows after the first token (window.llamayDemo.timeline, in ms from navigation start)
READ_TIMELINE = """() => {
  const t = window.llamayDemo.timeline;
  const nav = performance.getEntriesByType("navigation")[0];
  return { ...t, domContentLoaded: nav.domContentLoadedEventEnd, reply: t.reply ?? null };
}"""

STEPS = [  # (label, how to get it from a timeline, in ms)
    ("page: HTML and modules", lambda t: t["bootStart"]),
    ("worker start + Pyodide boot", lambda t: t["boot"]["pyodide_ms"]),
    ("wheel install", lambda t: t["boot"]["wheels_ms"]),
    ("kernel modules", lambda t: t["boot"]["kernels_ms"]),
    ("(boot, rest)", lambda t: t["bootEnd"] - t["bootStart"] - sum(t["boot"].values())),
    ("model read (cache or network)", lambda t: t["load"]["read_ms"]),
    ("model bind", lambda t: t["load"]["bind_ms"]),
    ("model card + cache write", lambda t: t["load"]["card_ms"] + t["load"]["cache_write_ms"]),
    ("(load, rest) *", lambda t: t["loadEnd"] - t["loadStart"] - t["load"]["total_ms"]),
    ("prompt (prefill)", lambda t: t["reply"]["prompt_ms"]),
    ("send to first token, rest *", lambda t: t["firstToken"] - t["sendAt"] - t["reply"]["prompt_ms"]),
]


def visit(page, base: str, model_url: str, prompt: str | None) -> dict:
    query = {"model": model_url, "max-tokens": 4, "temperature": 0}
    if prompt:
        query["prompt"] = prompt
    page.goto(f"{base}?{urlencode(query)}")
    cond = "window.llamayDemo?.timeline.reply" if prompt else "window.llamayDemo?.state.model"
    page.wait_for_function(f"!!({cond}) || !document.getElementById('banner').hidden", timeout=600_000, polling=20)
    if not page.locator("#banner").is_hidden():
        raise SystemExit(f"the page reports: {page.locator('#banner').text_content()}")
    return page.evaluate(READ_TIMELINE)


def main(argv: list[str] | None = None) -> int:
    from llamay.native.commands.web import WEB_DIR, WebServer, check_web_dir
    from llamay.native.store import models_dir

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=models_dir() / "SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--runs", type=int, default=3, help="page loads with the model cached (default 3)")
    ap.add_argument("--prompt", default=PROMPT)
    args = ap.parse_args(argv)
    if not args.model.exists():
        raise SystemExit(f"{args.model} is missing: run `llamay pull` (or pass --model)")
    problem = check_web_dir(WEB_DIR)
    if problem:
        raise SystemExit(problem)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="llamay-bench-") as tmp:
        # the model's own folder: `llamay web` serves no link that leads out of its models folder
        log: list = []
        model = args.model.resolve()
        server = WebServer(WEB_DIR, model.parent, log=log).start()
        model_url = f"/models/{model.name}"
        try:
            with sync_playwright() as p:
                context = p.chromium.launch_persistent_context(
                    str(Path(tmp) / "profile"), executable_path=CHROMIUM, args=FLAGS, headless=True
                )
                page = context.new_page()
                version = context.browser.version if context.browser else "?"
                first = visit(page, server.url, model_url, args.prompt)  # downloads it, and keeps it in the cache
                downloads = sum(1 for m, path in log if m == "GET" and path == model_url)
                runs = [visit(page, server.url, model_url, args.prompt) for _ in range(args.runs)]
                context.close()
        finally:
            server.close()
    again = sum(1 for m, path in log if m == "GET" and path == model_url) - downloads
    if any(r["source"] != "cache" for r in runs) or again:
        raise SystemExit(f"the model did not come from the cache ({again} more downloads)")
    report(args, version, first, runs)
    return 0


def report(args, version: str, first: dict, runs: list[dict]) -> None:
    size = args.model.stat().st_size / 1e6
    print(f"page load -> first token: {args.model.name} ({size:.0f} MB), Chromium {version} headless, "
          f"{len(runs)} loads with the model cached (after one that downloaded it)")  # fmt: skip
    print(f"prompt {args.prompt!r}: {runs[-1]['reply']['prompt_n']} tokens through the chat template\n")
    med = lambda f: statistics.median(f(r) for r in runs)  # noqa: E731
    print(f"{'step (ms)':34} {'cached: median':>14} {'runs':>24} {'first visit':>12}")
    for label, f in STEPS:
        each = " ".join(f"{f(r):7.0f}" for r in runs)
        print(f"{label:34} {med(f):14.0f} {each:>24} {f(first):12.0f}")
    total = lambda t: t["firstToken"]  # noqa: E731
    each = " ".join(f"{total(r):7.0f}" for r in runs)
    print(f"{'total: navigation -> first token':34} {med(total):14.0f} {each:>24} {total(first):12.0f}")
    ratio = med(total) / total(first)
    read = med(lambda t: t["load"]["read_ms"])
    print(f"\ncached / first visit: {ratio:.2f}x the time (read from the cache: "
          f"{read:.0f} ms vs {first['load']['read_ms']:.0f} ms downloading)")  # fmt: skip
    print("* the worker imports the engine's modules right after booting, and compiles the chat template right\n"
          "  after a load; a model loaded and a prompt sent at once (as here) wait for them, a person picking a\n"
          "  model and typing a message hides them")  # fmt: skip
    tps = [r["reply"]["prompt_per_second"] for r in runs]
    print(f"prefill {statistics.median(tps):.0f} tok/s; time to first token after send "
          f"{med(lambda t: t['reply']['ttft_ms']):.0f} ms")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
