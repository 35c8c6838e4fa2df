"""llamay against wllama in headless Chromium, in one run: prompt and generation speed, on 1 thread and on 2.

Serves bench/browser/ (the page, and wllama from its npm folder), web/ (web/dist: Pyodide, the llamay wheel, the
kernel modules) and the model from 127.0.0.1 with COOP/COEP, so both engines run cross-origin isolated. One page
loads the same GGUF into both: wllama 2.4.0 (llama.cpp in WebAssembly) forced to its single-thread build, and
llamay in a Web Worker (Pyodide, LLAMAY_BACKEND=wasm, the relaxed-SIMD kernel module where Chromium validates
it). The prompt is tokenized once, by wllama (llama.cpp's tokenizer), cut to --prompt-tokens, and the same ids
go to both. Each round runs wllama, then llamay: the prompt, then --gen greedy decode steps; rounds alternate so
that a busy machine slows both alike. Prints, per engine, the median over rounds of prompt tok/s, generation
tok/s and time to first token, and the ratios llamay / wllama.

With --threads N (default 2), the same rounds also run wllama's multi-thread build on N threads and llamay on N
kernel threads (web/src/kernel-threads.mjs, each engine in its own worker, loaded beside the single-thread pair),
and print that pair's table with llamay N threads / 1 thread (the same run, the same rounds).

Then the Python-side overhead per token of llamay: the last generated token's decode step (forward + greedy
sample) is repeated at the same position (the state cut back before each), once with every kernel call recorded
(export and arguments: `llamay_exec` and a command address, or each kernel's own export on a build before
it). Then --replays times in alternation: the step through Python, as generation runs it,
and the recorded calls replayed from JavaScript straight on the kernel module's exports (the kernels alone).
Overhead = the median of (Python step - replay): the model code, the sampler and the calls from Python. The
alternation keeps a busy machine's slowdowns out of the difference. A third step in each alternation runs with
every kernel answered by a Python no-op: the Python code alone (model code, backend, sampler), which splits the
overhead into that and the crossings into wasm.

    (cd bench/browser && npm ci) && (cd web && npm ci) && python web/build.py
    python bench/browser_vs_wllama.py                      # SmolLM2-135M-Instruct Q4_1 from the model store
    python bench/browser_vs_wllama.py --rounds 5 --env LLAMAY_WASM_CALLS=ctypes   # llamay's calls via ctypes
    python bench/browser_vs_wllama.py --web-dir /tmp/old/web   # another build of llamay (`git archive` a commit,
                                                               # link web/node_modules, python web/build.py there)

Needs Playwright for Python and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE_DIR = REPO / "bench" / "browser"
WEB_DIR = REPO / "web"
sys.path.insert(0, str(REPO))  # run as a script: the repository's tests package is importable

from tests.browser.server import Server  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]  # fmt: skip
DEFAULT_MODEL = Path.home() / ".cache" / "llamay" / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"
TEXT = (
    "The history of Paris begins around 250 BC, when a tribe of Celtic Gauls called the Parisii settled on the "
    "banks of the Seine. In 52 BC the Romans conquered the Parisii and founded a town on the left bank, Lutetia, "
    "with a forum, baths, temples and an amphitheatre. The town grew slowly; in the third century it was walled, "
    "and by the end of the fifth century the Franks under Clovis had made it their capital. Through the Middle "
    "Ages Paris became the largest city of Western Europe, a centre of trade along the river, of learning at its "
    "university, and of royal power in the palace on the Ile de la Cite. Write a short summary of this history:"
)
# expected: the single-thread build is forced by giving wllama no multi-thread path; a 404 is reported by URL
QUIET = re.compile(r'Missing paths to "multi-thread|Failed to load resource')


def check_setup(web_dir: Path) -> None:
    if not (PAGE_DIR / "node_modules" / "@wllama" / "wllama" / "esm" / "index.js").is_file():
        raise SystemExit(f"wllama is not installed: run `(cd {PAGE_DIR.relative_to(REPO)} && npm ci)`")
    if not (web_dir / "dist" / "manifest.json").is_file():
        raise SystemExit(f"{web_dir / 'dist'} is missing: run `(cd web && npm ci) && python web/build.py`")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--gen", type=int, default=64, help="generated tokens (decode steps) per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of wllama then llamay (default 3)")
    ap.add_argument("--replays", type=int, default=40, help="alternations of a Python step and its JS replay")
    ap.add_argument("--threads", type=int, default=2, help="threads of the second pair: wllama's multi-thread "
                    "build and llamay's kernel threads (default 2; 1: the single-thread pair only)")  # fmt: skip
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="environment of llamay's Python")
    ap.add_argument("--web-dir", type=Path, default=WEB_DIR, help="web/ (with dist/) llamay boots from: another "
                    "checkout's, to compare builds")  # fmt: skip
    ap.add_argument("--json", type=Path, help="also write every figure here")
    args = ap.parse_args(argv)
    if not args.model.is_file() and args.model == DEFAULT_MODEL:  # the model store's layout: a blob by digest
        from tests import paths

        args.model = paths.registry_path(paths.SMOLLM2) or args.model
    if not args.model.is_file():
        raise SystemExit(f"{args.model} is missing: run `llamay pull` (or pass --model)")
    check_setup(args.web_dir)
    env = {"LLAMAY_BACKEND": "wasm", **dict(kv.split("=", 1) for kv in args.env)}
    from playwright.sync_api import sync_playwright

    routes = {"/bench": PAGE_DIR, "/web": args.web_dir, f"/model/{args.model.name}": args.model.resolve()}
    server = Server(routes)  # the browser tests' static server: 127.0.0.1, cross-origin isolated, no caching
    base = server.url("").rstrip("/")
    model_url = f"/model/{args.model.name}"
    n_ctx = max(512, args.prompt_tokens) + args.gen + 8  # room for wllama.completion on the whole TEXT
    args.load = [os.getloadavg()[0]]  # the machine's load around the run (the run's own threads count after)
    try:
        with sync_playwright() as p, tempfile.TemporaryDirectory(prefix="llamay-bench-") as tmp:
            ctx = p.chromium.launch_persistent_context(tmp, executable_path=CHROMIUM, args=FLAGS, headless=True)
            page = ctx.new_page()
            page.on("console", lambda m: m.type in ("error", "warning") and not QUIET.search(m.text)
                    and print(f"[page {m.type}] {m.text}"))  # fmt: skip
            page.on("response", lambda r: r.status >= 400 and "favicon" not in r.url
                    and print(f"[page] HTTP {r.status} {r.url}"))  # fmt: skip
            page.on("pageerror", lambda e: print(f"[page error] {e}"))
            page.goto(f"{base}/bench/index.html")
            page.wait_for_function("window.benchReady === true", timeout=60_000)
            browser = ctx.browser.version if ctx.browser else "?"
            isolated = page.evaluate("window.bench.crossOriginIsolated")
            wl = page.evaluate("([u, n]) => window.bench.wllama.load(u, n)", [model_url, n_ctx])
            if wl["multithread"] or wl["threads"] != 1:
                raise SystemExit(f"wllama did not take its single-thread build: {wl}")
            ids = page.evaluate("(t) => window.bench.wllama.tokenize(t)", TEXT)
            if len(ids) < args.prompt_tokens:
                raise SystemExit(f"the prompt text has {len(ids)} tokens, fewer than {args.prompt_tokens}")
            ids = ids[: args.prompt_tokens]
            boot = page.evaluate("(env) => window.bench.llamay.boot(env)", env)
            ll = page.evaluate("(u) => window.bench.llamay.load(u)", model_url)
            names = ["wllama", "llamay"]
            wl_mt = ll_mt = None
            if args.threads > 1:  # the same pair on more threads: wllama's multi-thread build, llamay's kernel threads
                wl_mt = page.evaluate(
                    "([u, n, t]) => window.bench.wllama.load(u, n, t)", [model_url, n_ctx, args.threads]
                )
                if not wl_mt["multithread"] or wl_mt["threads"] != args.threads:
                    raise SystemExit(f"wllama did not take its multi-thread build on {args.threads} threads: {wl_mt}")
                page.evaluate("(env) => window.bench.llamayMT.boot(env)", env)
                ll_mt = page.evaluate("([u, t]) => window.bench.llamayMT.load(u, t)", [model_url, args.threads])
                names += ["wllamaMT", "llamayMT"]
            runs: dict[str, list[dict]] = {name: [] for name in names}
            for r in range(args.rounds):
                for name in names:
                    res = page.evaluate(f"([ids, n]) => window.bench.{name}.run(ids, n)", [ids, args.gen])
                    runs[name].append(res)
                    print(f"round {r + 1} {name:8}: prompt {rate(res['prompt_tokens'], res['prompt_ms']):6.1f} tok/s,"
                          f" generation {rate(res['gen_tokens'], res['gen_ms']):6.1f} tok/s", flush=True)  # fmt: skip
            # wllama's own loop (createCompletion: sample, accept, decode per token), against the low-level one above
            own = page.evaluate("([t, n]) => window.bench.wllama.completion(t, n)", [TEXT, args.gen])
            last = runs["llamay"][-1]["tokens"][-1]
            ov = page.evaluate("([t, n]) => window.bench.llamay.overhead(t, n)", [last, args.replays])
            ctx.close()
    finally:
        server.close()
    args.load.append(os.getloadavg()[0])
    report(args, browser, isolated, wl, boot, ll, ids, runs, ov, own)
    if wl_mt is not None:
        report_threads(args, wl_mt, ll_mt, runs)
    if args.json:
        figures = {"wllama": wl, "llamay": ll, "wllamaMT": wl_mt, "llamayMT": ll_mt, "runs": runs, "overhead": ov}
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


def rate(n: int, ms: float) -> float:
    return n / ms * 1e3 if ms > 0 else float("inf")


def summary(rs: list[dict]) -> dict[str, float]:
    med = statistics.median
    return {
        "prompt": med(rate(r["prompt_tokens"], r["prompt_ms"]) for r in rs),
        "gen": med(rate(r["gen_tokens"], r["gen_ms"]) for r in rs),
        "ttft": med(r["ttft_ms"] for r in rs),
        "step": med(s for r in rs for s in r["step_ms"]),
    }


def report(args, browser, isolated, wl, boot, ll, ids, runs, ov, own) -> None:
    w, m = summary(runs["wllama"]), summary(runs["llamay"])
    print(f"\n{args.model.name}, Chromium {browser} headless, cross-origin isolated: {isolated}")
    print(f"machine: {os.cpu_count()} cores, load average (1 min) {args.load[0]:.2f} before the run, "
          f"{args.load[1]:.2f} after it (its own threads included)")  # fmt: skip
    print(f"prompt {len(ids)} tokens (tokenized by wllama, the same ids to both), {args.gen} generated tokens, "
          f"greedy; median of {args.rounds} rounds")  # fmt: skip
    print(f"wllama 2.4.0 (llama.cpp {wl['version'] or '?'}): single-thread build, {wl['threads']} thread")
    print(f"llamay: {ll['backend']}/{ll['variant']} kernels, calls from Python via {ll['calls']}; "
          f"boot {boot['boot_ms'] / 1e3:.1f} s, load {ll['load_ms'] / 1e3:.1f} s\n")  # fmt: skip
    print(f"{'':24}{'wllama':>10}{'llamay':>10}{'llamay/wllama':>15}")
    rows = [
        ("prompt (tok/s)", w["prompt"], m["prompt"], m["prompt"] / w["prompt"]),
        ("generation (tok/s)", w["gen"], m["gen"], m["gen"] / w["gen"]),
        ("time to first token (ms)", w["ttft"], m["ttft"], m["ttft"] / w["ttft"]),
        ("median step (ms)", w["step"], m["step"], m["step"] / w["step"]),
    ]
    for label, a, b, r in rows:
        print(f"{label:24}{a:10.1f}{b:10.1f}{r:14.2f}x")
    pairs = list(zip(runs["wllama"][-1]["tokens"], runs["llamay"][-1]["tokens"], strict=False))
    same = sum(1 for a, b in pairs if a == b)
    first = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
    where = f" (first difference at token {first}: near-ties flip between engines)" if first is not None else ""
    print(f"greedy tokens: {same}/{len(pairs)} equal{where}")
    print(f"wllama's own createCompletion loop, once: {rate(own['gen_tokens'], own['gen_ms']):.1f} tok/s generation "
          f"(the table's wllama figures come from decode + samplingSample, one round trip each)")  # fmt: skip
    step, kern, over = ov["step_ms"], ov["kernels_ms"], ov["overhead_ms"]
    print(f"\nllamay, one decode step repeated ({args.replays} times, alternating): {step:.2f} ms through Python, "
          f"{kern:.2f} ms in the wasm kernels (replayed from JS)")  # fmt: skip
    print(f"  Python-side overhead per token: {over:.2f} ms ({over / step * 100:.0f}% of the step), "
          f"{ov['n_calls']} kernel calls, {over / ov['n_calls'] * 1e3:.1f} us per call")  # fmt: skip
    py = ov["python_ms"]
    print(f"    of which Python code (the step with its kernels stubbed in Python): {py:.2f} ms; "
          f"the calls into wasm and the rest: {over - py:.2f} ms")  # fmt: skip
    for name, v in sorted(ov["byName"].items(), key=lambda kv: -kv[1]["ms"]):
        print(f"    {name.removeprefix('llamay_'):14}{v['calls']:5} calls {v['ms']:8.3f} ms")


def report_threads(args, wl_mt, ll_mt, runs) -> None:
    """The second pair, on args.threads threads, against each other and against llamay on one thread."""
    w, m, one = summary(runs["wllamaMT"]), summary(runs["llamayMT"]), summary(runs["llamay"])
    t = args.threads
    print(f"\non {t} threads, same rounds: wllama's multi-thread build ({wl_mt['threads']} threads), llamay "
          f"{ll_mt['backend']}/{ll_mt['variant']} ({ll_mt['calls']})\n")  # fmt: skip
    print(f"{'':24}{'wllama ' + str(t) + 't':>11}{'llamay ' + str(t) + 't':>11}{'llamay/wllama':>15}"
          f"{'llamay ' + str(t) + 't/1t':>15}")  # fmt: skip
    rows = [
        ("prompt (tok/s)", w["prompt"], m["prompt"], m["prompt"] / w["prompt"], m["prompt"] / one["prompt"]),
        ("generation (tok/s)", w["gen"], m["gen"], m["gen"] / w["gen"], m["gen"] / one["gen"]),
        ("time to first token (ms)", w["ttft"], m["ttft"], m["ttft"] / w["ttft"], m["ttft"] / one["ttft"]),
        ("median step (ms)", w["step"], m["step"], m["step"] / w["step"], m["step"] / one["step"]),
    ]
    for label, a, b, r, s in rows:
        print(f"{label:24}{a:11.1f}{b:11.1f}{r:14.2f}x{s:14.2f}x")
    same = runs["llamayMT"][-1]["tokens"] == runs["llamay"][-1]["tokens"]
    print(f"llamay's greedy tokens on {t} threads {'equal' if same else 'DIFFER FROM'} those on 1 thread")


if __name__ == "__main__":
    raise SystemExit(main())
