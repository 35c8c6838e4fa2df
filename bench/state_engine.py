#!/usr/bin/env python3
"""State-engine benchmark (not a test): continuous batching and the prefix cache on a real model.

1. Aggregate generation tokens/s with 1, 2, 4, 8 sequences decoding together (greedy, the Batcher), and each
   width's ratio to the single-sequence rate (goal: 8 sequences ≥ 3× one).
2. Time to first token of a 1,000-token prompt whose first 900 tokens are in the prefix cache, against the same
   prompt cold (goal: a large ratio, as only 100 tokens are computed).

    python bench/state_engine.py [-m smollm2] [--backend numba] [-t THREADS] [-n 64]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from llamay.batcher import Batcher, Request
from llamay.model import load_model
from llamay.sampling import Sampler, SamplerConfig

TEXT = (
    "The history of the lighthouse begins with fires lit on hilltops to guide ships home. Later, towers were "
    "built of stone, and their keepers tended oil lamps through the night, trimming wicks and polishing glass. "
)


def prompt_tokens(model, n: int, salt: str = "") -> list[int]:
    ids: list[int] = []
    i = 0
    while len(ids) < n:
        ids += model.tokenizer.encode(f"{salt}{i}. {TEXT}", add_special=False)
        i += 1
    return ids[:n]


def decode_rate(model, width: int, n_gen: int, prompt_len: int) -> float:
    st = model.new_state(n_ctx=prompt_len + n_gen + 8, n_seq=width, n_batch=max(64, width), n_outputs=width)
    batcher = Batcher(model, st, prefill_chunk=64)
    greedy = SamplerConfig(temperature=0.0)
    reqs = [Request(prompt_tokens(model, prompt_len, f"s{i}"), n_gen, Sampler(greedy), stop_at_eog=False)
            for i in range(width)]  # fmt: skip
    for r in reqs:
        if not batcher.admit(r):
            raise SystemExit("the KV cache cannot hold every sequence")
    while any(not r.decoding or r.pending is None for r in reqs):  # prefill everything first
        batcher.step()
    t0 = time.perf_counter()
    produced = sum(len(r.generated) for r in reqs)
    while batcher.running:
        batcher.step()
    elapsed = time.perf_counter() - t0
    return (sum(len(r.generated) for r in reqs) - produced) / elapsed


def ttft(model, prompt: list[int], cached: int | None) -> float:
    st = model.new_state(n_ctx=len(prompt) + 8, n_seq=2, n_batch=256, prefix_cache=True)
    batcher = Batcher(model, st, prefill_chunk=256)
    greedy = SamplerConfig(temperature=0.0)
    if cached:
        warm = Request(prompt[:cached], 1, Sampler(greedy), stop_at_eog=False)
        batcher.run([warm])
    req = Request(prompt, 1, Sampler(greedy), stop_at_eog=False)
    t0 = time.perf_counter()
    batcher.run([req])
    elapsed = time.perf_counter() - t0
    if cached and req.cached_tokens < cached - st.page_size:
        raise SystemExit(f"expected ~{cached} cached tokens, got {req.cached_tokens}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-m", "--model", default="smollm2")
    ap.add_argument("--backend", default="numba")
    ap.add_argument("-t", "--threads", type=int, default=None)
    ap.add_argument("-n", "--n-gen", type=int, default=64)
    ap.add_argument("--prompt", type=int, default=32, help="prompt tokens per sequence for the decode test")
    args = ap.parse_args()
    if args.threads:
        os.environ["LLAMAY_THREADS"] = str(args.threads)
    from llamay.native.store import resolve_model

    model = load_model(resolve_model(args.model, log=lambda m: print(m, file=sys.stderr)), args.backend)
    decode_rate(model, 1, 4, 8)  # compile and warm up
    print(f"model {model.name}, backend {model.backend.name}, threads {args.threads or 'default'}")
    print("sequences  aggregate tok/s  vs one")
    base = None
    for width in (1, 2, 4, 8):
        rate = decode_rate(model, width, args.n_gen, args.prompt)
        base = base or rate
        print(f"{width:>9}  {rate:>15.1f}  {rate / base:>5.2f}x")
    prompt = prompt_tokens(model, 1000, "ttft")
    cold = ttft(model, prompt, None)
    warm = ttft(model, prompt, 900)
    print(f"TTFT 1000-token prompt: cold {cold * 1000:.0f} ms, 900 cached {warm * 1000:.0f} ms, {cold / warm:.1f}x")


if __name__ == "__main__":
    main()
