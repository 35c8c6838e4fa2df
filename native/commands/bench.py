"""`llamay bench -m MODEL [-p 128] [-n 64] [-t 1 -t 2] [--vs llama.cpp]`: prompt and generation speed.

For each thread count: prefill of a -p-token prompt in one batch (prompt tok/s, time to first token), then -n
greedy decode steps (generation tok/s); the best of -r repetitions. With `--vs llama.cpp` the same model, the
same prompt token ids and the same thread count run through llama.cpp (xllamacpp, in this process) and the
ratios llamay / llama.cpp are printed. llama.cpp's numbers are its own `timings` (prompt eval and eval).

Peak RSS (ru_maxrss) is read after llamay's runs and before llama.cpp loads anything.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from dataclasses import dataclass

from llamay.native.commands import MODEL_HELP_DEFAULT

# a fixed paragraph, repeated until the prompt is long enough (tokenised by the model's own tokenizer)
PARAGRAPH = (
    "The old lighthouse stood at the edge of the cliff, its white paint peeling in the salt wind. Every evening "
    "the keeper climbed the spiral stairs, trimmed the wick and watched the ships pass on their way to the harbour. "
    "He kept a log of every vessel, the weather and the colour of the sea, and in winter he read by the lamp. "
)
MB = 1024 * 1024


@dataclass
class Result:
    prompt_tps: float
    gen_tps: float
    ttft_ms: float


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="prompt and generation speed, optionally against llama.cpp")
    p.add_argument("-m", "--model", help=MODEL_HELP_DEFAULT)
    p.add_argument("-p", "--n-prompt", type=int, default=128, help="prompt tokens (default 128)")
    p.add_argument("-n", "--n-gen", type=int, default=64, help="generated tokens (default 64)")
    p.add_argument("-t", "--threads", type=int, action="append", help="thread count; repeat for several")
    p.add_argument("-r", "--repetitions", type=int, default=3, help="runs per measurement, best kept (default 3)")
    p.add_argument("--vs", choices=["llama.cpp"], help="also run llama.cpp on the same tokens and print ratios")
    p.add_argument("--backend", default="numba", help="llamay kernel backend (default numba)")
    p.set_defaults(func=run)


def prompt_ids(tokenizer, n: int) -> list[int]:
    """n token ids of the fixed paragraph (BOS first if the model's tokenizer adds one)."""
    text = PARAGRAPH
    while True:
        ids = tokenizer.encode(text)
        if len(ids) >= n:
            return ids[:n]
        text += PARAGRAPH


def bench_llamay(model, ids: list[int], n_gen: int, n_ctx: int, reps: int) -> Result:
    from llamay.model import forward

    be, n_vocab = model.backend, model.cfg.n_vocab
    st = model.new_state(n_ctx=n_ctx, n_batch=len(ids))
    best = Result(0.0, 0.0, float("inf"))
    for _ in range(reps):
        st.kv.reset()
        t0 = time.perf_counter()
        forward(model, st, ids)
        tok = be.argmax(st.logits, 0, n_vocab)
        t1 = time.perf_counter()
        for _ in range(n_gen):
            forward(model, st, [tok])
            tok = be.argmax(st.logits, 0, n_vocab)
        t2 = time.perf_counter()
        best.prompt_tps = max(best.prompt_tps, len(ids) / (t1 - t0))
        best.gen_tps = max(best.gen_tps, n_gen / (t2 - t1))
        best.ttft_ms = min(best.ttft_ms, (t1 - t0) * 1e3)
    return best


def llamacpp_server(path: str, n_ctx: int, threads: int):
    """llama.cpp's server in this process (xllamacpp): one slot, `threads` for prompt and generation, warmed up."""
    import xllamacpp as xlc

    p = xlc.CommonParams()
    p.model.path = path
    p.n_ctx = n_ctx
    p.n_parallel = 1
    p.cpuparams.n_threads = threads
    p.cpuparams_batch.n_threads = threads
    p.warmup = True
    p.verbosity = -1
    return xlc.Server(p)


def bench_llamacpp(path: str, ids: list[int], n_gen: int, n_ctx: int, threads: int, reps: int) -> Result:
    server = llamacpp_server(path, n_ctx, threads)
    try:
        best = Result(0.0, 0.0, float("inf"))
        request = {
            "prompt": ids, "max_tokens": n_gen, "temperature": 0.0, "top_k": 1, "seed": 0,
            "cache_prompt": False, "ignore_eos": True,
        }  # fmt: skip
        for _ in range(reps):
            r = server.handle_completions(request)
            if "error" in r:
                raise RuntimeError(f"llama.cpp: {r['error']}")
            t = r["timings"]
            best.prompt_tps = max(best.prompt_tps, t["prompt_per_second"])
            best.gen_tps = max(best.gen_tps, t["predicted_per_second"])
            best.ttft_ms = min(best.ttft_ms, t["prompt_ms"])  # its first token comes from the prompt pass
        return best
    finally:
        del server


def _row(threads: int, engine: str, r: Result) -> str:
    return f"{threads:>7}  {engine:<10} {r.prompt_tps:>12.1f} {r.gen_tps:>10.1f} {r.ttft_ms:>9.1f}"


def run(args: argparse.Namespace) -> int:
    from llamay.errors import LlamayError
    from llamay.model import load_model
    from llamay.native.store import resolve_model

    path = str(resolve_model(args.model, log=lambda msg: print(msg, file=sys.stderr)))
    if args.n_prompt < 1 or args.n_gen < 1:
        raise LlamayError("-p and -n must be at least 1")
    model = load_model(path, args.backend)
    be = model.backend
    ids = prompt_ids(model.tokenizer, args.n_prompt)
    page = 16
    n_ctx = -(-(len(ids) + args.n_gen + 1) // page) * page
    cores = os.cpu_count() or 1
    thread_counts = args.threads or [getattr(be, "n_threads", cores)]
    cfg = model.cfg
    kv_bytes = 4 * cfg.n_layer * n_ctx * (cfg.n_embd_k_gqa + cfg.n_embd_v_gqa)
    size = os.path.getsize(path)
    print(f"model    {os.path.basename(path)} ({size / MB:.1f} MiB), {cfg.arch}, backend {be.name}")
    print(f"run      prompt {len(ids)} tokens, {args.n_gen} generated, n_ctx {n_ctx}, best of {args.repetitions}")

    # warm up (compiles or loads the kernels) with the largest thread count
    bench_llamay(model, ids[: min(len(ids), 8)], 2, n_ctx, 1)
    ours: dict[int, Result] = {}
    for t in thread_counts:
        if hasattr(be, "set_threads"):
            t = be.set_threads(t)
        ours[t] = bench_llamay(model, ids, args.n_gen, n_ctx, args.repetitions)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    model.close()

    theirs: dict[int, Result] = {}
    if args.vs:
        for t in ours:
            theirs[t] = bench_llamacpp(path, ids, args.n_gen, n_ctx, t, args.repetitions)

    print(f"{'threads':>7}  {'engine':<10} {'prompt tok/s':>12} {'gen tok/s':>10} {'TTFT ms':>9}")
    for t, r in ours.items():
        print(_row(t, "llamay", r))
        if t in theirs:
            o = theirs[t]
            print(_row(t, "llama.cpp", o))
            ratio = Result(r.prompt_tps / o.prompt_tps, r.gen_tps / o.gen_tps, r.ttft_ms / o.ttft_ms)
            print(f"{t:>7}  {'ratio':<10} {ratio.prompt_tps:>12.2f} {ratio.gen_tps:>10.2f} {ratio.ttft_ms:>9.2f}")
    extra = rss - size - kv_bytes
    print(f"peak RSS (llamay) {rss / MB:.1f} MiB = model {size / MB:.1f} + KV cache {kv_bytes / MB:.1f} "
          f"+ {extra / MB:.1f} MiB")  # fmt: skip
    return 0
