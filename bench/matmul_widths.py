#!/usr/bin/env python3
"""Quantised matmul cost by batch width (not a test): the numba backend's matmul of one weight matrix against
n = 1, 2, 3, 4, ... activation rows, per call, against n single-row calls in the same invocation.

Continuous batching decodes n sequences per step; each weight block is read once per step whatever n is, so a
matmul of n rows should cost far less than n matmuls of one row. For each weight type and shape it prints the
time per call (µs, the best of --repeat rounds) and `gain` = n × t(1) / t(n): the speedup per token over
single-row calls (n means none, 1.0 none at all).

    python bench/matmul_widths.py [-t THREADS] [--types Q4_1 Q8_0 ...] [--widths 1 2 4 8 16] [--shape 576x1536]

Weights are random blocks with small finite scales; shapes default to SmolLM2-135M's (576 → 1536, 1536 → 576).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from wasm_kernels import best_ms  # this folder's: best time per call

from llamay.ggml_types import GGMLType, block_size, row_bytes
from llamay.quants import BLOCKS

DEFAULT_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "IQ4_NL", "Q4_K", "Q5_K", "Q6_K")
DEFAULT_WIDTHS = (1, 2, 3, 4, 6, 8, 12, 16)


def random_weight(rng: np.random.Generator, t: GGMLType, n_in: int, n_out: int) -> np.ndarray:
    """Random block bytes with every fp16 / f32 scale field a small finite value."""
    block = BLOCKS[t]
    n_blocks = n_in // block_size(t) * n_out
    raw = rng.integers(0, 256, (n_blocks, block.size), dtype=np.uint8)
    for name, code in block.fields.items():
        at = block.offset[name]
        if code == "e":
            vals = (rng.uniform(0.002, 0.02, n_blocks) * rng.choice((-1, 1), n_blocks)).astype(np.float16)
            raw[:, at : at + 2] = vals.view(np.uint8).reshape(n_blocks, 2)
        elif code == "f":
            raw[:, at : at + 4] = rng.uniform(0.002, 0.02, n_blocks).astype(np.float32).view(np.uint8).reshape(-1, 4)
    assert raw.size == row_bytes(t, n_in) * n_out
    return raw.reshape(-1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("--types", nargs="+", default=list(DEFAULT_TYPES))
    ap.add_argument("--widths", nargs="+", type=int, default=list(DEFAULT_WIDTHS))
    ap.add_argument("--shape", nargs="+", default=["576x1536", "1536x576"], help="n_in x n_out")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    os.environ["LLAMAY_THREADS"] = str(args.threads)
    from llamay.native.numba_backend import NumbaBackend

    be = NumbaBackend()
    be.policy.big_work = 0  # every kernel on the threads asked for: no back-off while timing
    rng = np.random.default_rng(0)
    # one thread runs in the calling one: its CPU time leaves out the time other processes took the core
    clock = time.thread_time if be.n_threads == 1 else time.perf_counter
    print(f"threads {be.n_threads} ({clock.__name__}); µs per call, gain = n·t(1)/t(n)")
    print(f"{'type':<7} {'shape':<10} " + " ".join(f"{'n=' + str(n):>14}" for n in args.widths))
    for name in args.types:
        t = GGMLType[name]
        for shape in args.shape:
            n_in, n_out = (int(v) for v in shape.split("x"))
            n_in -= n_in % block_size(t)
            w = be.bind("w", t, (n_in, n_out), memoryview(random_weight(rng, t, n_in, n_out)))
            cells, base = [], None
            for n in args.widths:
                x = rng.standard_normal(n * n_in).astype(np.float32)
                out = np.zeros(n * n_out, np.float32)
                us = 1e3 * best_ms(lambda out=out, x=x, n=n, w=w: be.matmul(out, w, x, n), 0.01, args.repeat, clock)
                base = base or us / n
                cells.append(f"{us:>7.1f} {n * base / us:>5.2f}x")
            print(f"{name:<7} {f'{n_in}x{n_out}':<10} " + " ".join(f"{c:>14}" for c in cells))


if __name__ == "__main__":
    main()
