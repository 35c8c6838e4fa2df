"""The Python side of bench/browser_vs_wllama.py's llamay run, inside Pyodide (llamay-worker.mjs imports it).

`run(session, ids, n_gen)` generates greedily through the engine (`Engine.generate_tokens`, as a page does: the
sampler chain, the KV state, the kernels) from a fresh state, timing the prompt, the first token and each
generated token. `Stepper(session, tok)` then repeats one decode step (forward + greedy sample) at the same
position: timed as generation runs it, or with every kernel call recorded, (export name, arguments), for the
worker to replay from JavaScript: the time of the kernels alone, without Python.
"""

from __future__ import annotations

import itertools
import time


def run(session, ids, n_gen: int) -> dict:
    from llamay.sampling import Sampler, SamplerConfig

    engine = session.engine
    engine.state.kv.reset(0)
    prompt = [int(i) for i in ids]
    sampler = Sampler(SamplerConfig(temperature=0.0))
    tokens: list[int] = []
    stamps: list[float] = []
    t0 = time.perf_counter()
    # n_gen decode steps after the first token (which comes from the prompt's logits)
    for tok in engine.generate_tokens(prompt, n_gen + 1, sampler, stop_at_eog=False):
        stamps.append(time.perf_counter())
        tokens.append(tok)
    s = engine.stats
    steps = [(b - a) * 1e3 for a, b in itertools.pairwise(stamps)]
    return {
        "prompt_tokens": len(prompt),
        "prompt_ms": s.prompt_seconds * 1e3,
        "ttft_ms": (stamps[0] - t0) * 1e3,
        "gen_ms": (stamps[-1] - stamps[0]) * 1e3,
        "gen_tokens": len(steps),
        "step_ms": steps,
        "tokens": tokens,
        "text": session.model.tokenizer.decode(tokens),
    }


class Stepper:
    """One decode step, repeatable: the state is cut back to `n_past` before each, so every step computes the same
    token at the same position. `record()` runs it with every kernel call recorded as [export name, *arguments]
    (for the worker to replay from JavaScript); `step()` runs it as generation does (the decode step, then the
    greedy sampler) and returns its milliseconds."""

    def __init__(self, session, tok: int) -> None:
        from llamay.sampling import Sampler, SamplerConfig

        self.model, self.st = session.model, session.engine.state
        self.tok = int(tok)
        self.n_past = self.st.kv.sequences[0].n_past
        self.sampler = Sampler(SamplerConfig(temperature=0.0))

    def step(self) -> float:
        from llamay.generate import decode_step

        model, st = self.model, self.st
        st.kv.truncate(0, self.n_past)
        t0 = time.perf_counter()
        decode_step(model, st, self.tok)
        self.sampler.sample(model.backend, st.logits, 0, model.cfg.n_vocab)
        return (time.perf_counter() - t0) * 1e3

    def step_stubbed(self) -> float:
        """The step with every kernel call answered by a Python no-op (returning 0): the model code, the backend's
        own Python and the sampler, without crossing into wasm. The state is left as it was."""
        be = self.model.backend
        stub = lambda *args: 0  # noqa: E731
        if hasattr(be, "_exec"):
            run, be._exec = be._exec, stub
            try:
                return self.step()
            finally:
                be._exec = run
        orig = dict(be.fn)
        be.fn.update(dict.fromkeys(orig, stub))
        try:
            return self.step()
        finally:
            be.fn.update(orig)

    def record(self) -> dict:
        """The step's kernel calls: [[export, *arguments]] and, beside them, the kernel each runs. Kernels called
        through `llamay_exec(command)` are named by the command's op; older backends call each export."""
        be = self.model.backend
        calls: list[list] = []
        kinds: list[str] = []
        if hasattr(be, "_exec"):
            from llamay.wasm.runtime import OPS

            ops = {op: name for name, op in OPS.items()}
            by_addr = {addr: key[0] for key, addr in be._cmds.items()}
            run = be._exec

            def exec_(addr):
                if addr not in by_addr:
                    by_addr.update({a: key[0] for key, a in be._cmds.items()})
                calls.append(["llamay_exec", addr])
                kinds.append(ops[by_addr[addr]])
                return run(addr)

            be._exec = exec_
            try:
                self.step()
            finally:
                be._exec = run
        else:
            orig = dict(be.fn)

            def recording(name, f):
                def call(*args):
                    calls.append([name, *args])
                    kinds.append(name)
                    return f(*args)

                return call

            be.fn.update({k: recording(k, f) for k, f in orig.items()})
            try:
                self.step()
            finally:
                be.fn.update(orig)
        counts: dict[str, int] = {}
        for k in kinds:
            counts[k] = counts.get(k, 0) + 1
        return {"calls": calls, "kinds": kinds, "counts": counts}


def info(session) -> dict:
    be = session.model.backend
    how = getattr(be.rt, "calls", "ctypes")
    threads = getattr(be, "threads", 1)
    if hasattr(be, "_queue"):  # wasm/backend_threads.py
        calls = f"js, one llamay_run_list per forward on {threads} threads"
    else:
        calls = f"{how}, one llamay_exec(command) per kernel" if hasattr(be, "_exec") else f"{how}, per export"
    return {"backend": be.name, "variant": getattr(be, "variant", ""), "threads": threads, "calls": calls}
