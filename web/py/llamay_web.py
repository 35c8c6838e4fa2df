"""The Python side of the browser runtime: what web/src/runtime.mjs calls inside Pyodide.

Stdlib-only at import (it installs the wheels that everything else comes from). It is a web asset, written into
Pyodide's file system at boot, not part of the llamay wheel: the engine itself is driven through `llamay.engine`.

- `install_wheel(path, site)`: unpack a pure wheel into site-packages (no micropip: nothing comes from a CDN);
- `new_model_buffer(size)`: the one buffer in Pyodide's heap that a GGUF is streamed into, chunk by chunk;
- `Session`: a model bound to a kernel backend, from that buffer, and an `Engine` over it: OpenAI-style
  generation (`generate`), the model card, embeddings, tokenization;
- `describe_buffer(buf, name)`: the model card of a GGUF that failed to bind (unsupported architecture or type);
- `run_pytest(args)`: the repository's tests/ under Pyodide, with the outcome counts.
"""

from __future__ import annotations

import os
import sys
import zipfile
from collections.abc import Iterator


def site_packages() -> str:
    import sysconfig

    return sysconfig.get_paths()["purelib"]


def install_wheel(path: str, site: str | None = None) -> list[str]:
    """Unpack a pure wheel into site-packages; the top-level names it brought."""
    site = site or site_packages()
    with zipfile.ZipFile(path) as z:
        bad = [n for n in z.namelist() if n.endswith((".so", ".pyd"))]
        if bad:
            raise ValueError(f"{os.path.basename(path)} is not a pure wheel: {bad[0]}")
        z.extractall(site)
        return sorted({n.split("/")[0] for n in z.namelist()})


def install_file(data_path: str, package: str, name: str) -> str:
    """Put a data file (a wasm kernel module) into an installed package's folder, where `importlib.resources`
    finds it, unless the wheel already carried it."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{package} is not installed")
    dst = os.path.join(next(iter(spec.submodule_search_locations)), name)
    if not os.path.exists(dst):
        os.replace(data_path, dst)
    return dst


PRELOAD = ("jinja2", "llamay.gguf", "llamay.model", "llamay.engine", "llamay.model_card", "llamay.sampling",
           "llamay.constraints")  # fmt: skip


def preload() -> None:
    """Import what loading a model and the first reply need (the GGUF reader, the engine, jinja2 for chat
    templates, samplers, constraints): the worker runs it right after booting, while the page waits for a
    model to be picked, so neither the load nor the first reply compiles these modules."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)


def new_model_buffer(size: int) -> bytearray:
    """Zero-filled bytes in Pyodide's heap: JS writes the GGUF's chunks straight into them (one copy, no more)."""
    return bytearray(size)


DEFAULT_MAX_TOKENS = 512  # a chat or completion request that names no max_tokens


def _open(buf: bytearray, name: str, shards=(), shard_names=()):
    """The GGUF in `buf`, or a split model: `buf` its first shard, `shards` the others in order (their buffers
    and `shard_names`, JS arrays or lists)."""
    from llamay.gguf import from_buffers

    return from_buffers([buf, *list(shards or ())], [name, *[str(n) for n in shard_names or ()]])


def describe_buffer(buf: bytearray, name: str, shards=(), shard_names=()) -> dict | None:
    """The model card of a GGUF in `buf` (when binding it failed: its architecture or a tensor type is not
    supported), or None when even its header cannot be read."""
    from llamay.errors import LlamayError

    try:
        f = _open(buf, name, shards, shard_names)
    except LlamayError:
        return None
    try:
        return _card(f)
    finally:
        f.close()


def _card(f) -> dict:
    """llamay.model_card.describe, without the per-tensor list (its counts by type stay)."""
    from llamay.model_card import describe

    card = describe(f)
    card["n_tensors"] = len(card.pop("tensors"))
    return card


def request_sampling(fields: dict, n_vocab: int | None = None) -> tuple:
    """(SamplerConfig, stop strings) of an OpenAI-style request: the server's OpenAI routes' path
    (`llamay.sampling.request`), so a field means and is refused the same here (a RequestFieldError naming it)."""
    from llamay.sampling import sampling_from_request

    req = sampling_from_request(fields, "openai", n_vocab)
    return req.config(), list(req.stop)


# the fields of a generate request the worker reads besides the sampling ones (the page strips messages, prompt,
# stream, signal, stream_options, model and checks n itself)
GENERATE_FIELDS = frozenset({"max_tokens", "max_completion_tokens", "response_format", "json_schema", "grammar",
                             "tools", "tool_choice", "parallel_tool_calls"})  # fmt: skip


class Session:
    """A model read in place from `buf` (the no-mmap path), bound to `backend`, and an engine over it; a split
    model's other shards come in `shards`, in order, named by `shard_names`."""

    def __init__(
        self, buf: bytearray, name: str, backend: str | None = None, shards=(), shard_names=(), kernel_threads=None
    ) -> None:
        from llamay.engine import Engine
        from llamay.model import Model

        f = _open(buf, name, shards, shard_names)
        try:
            if kernel_threads is not None:  # web/src/kernel-threads.mjs started them: the threads build's backend
                from llamay.wasm.backend_threads import ThreadsBackend

                backend = ThreadsBackend(kernel_threads)
            self.model = Model(f, backend or None)
        except BaseException:
            f.close()
            raise
        self.engine = Engine(self.model)
        self._deltas = None  # the running chat's tool-call deltas (llamay.tools.OpenAIDeltas), fed by tool_delta

    def warm_up(self) -> None:
        """Import what the first request needs and compile the chat template (jinja2: about a second under
        Pyodide), so the first reply's time to first token does not include them. The worker runs it right after
        a load, while the person types."""
        import contextlib

        import llamay.constraints
        import llamay.sampling  # noqa: F401

        # the model's own template only (a model without one mostly continues text); one that fails here fails
        # again, with its message, on the first chat
        if self.model.cfg.causal and self.model.tokenizer.chat_template_source:
            with contextlib.suppress(Exception):
                self.model.tokenizer.apply_chat_template([{"role": "user", "content": "hi"}])

    def info(self) -> dict:
        cfg = self.model.cfg
        return {
            "name": self.model.name,
            "architecture": self.model.file.architecture,
            "backend": self.model.backend.name,
            "variant": getattr(self.model.backend, "variant", ""),
            "threads": getattr(self.model.backend, "threads", 1),
            "n_vocab": cfg.n_vocab,
            "n_ctx_train": cfg.n_ctx_train,
            "size": self.model.file.size,
        }

    def complete(
        self,
        prompt: str,
        max_tokens: int = 128,
        temperature: float = 0.8,
        top_k: int | None = None,
        top_p: float | None = None,
        min_p: float | None = None,
        seed: int | None = None,
        stop: list[str] | None = None,
    ) -> Iterator[str]:
        """Text pieces of the completion, one per generated token at most (JS pulls them one by one)."""
        fields = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "min_p": min_p, "seed": seed,
                  "stop": stop}  # fmt: skip
        cfg, stops = request_sampling(fields, self.model.cfg.n_vocab)
        return self.engine.complete(prompt, max_tokens, cfg, stop=stops)

    def card(self) -> dict:
        """The model card (architecture, size, tensor types, context, tokenizer, the tensor audit)."""
        return _card(self.model.file)

    def generate(self, kind: str, payload, params: dict | None = None) -> Iterator[str]:
        """Text pieces for an OpenAI-style request: kind "chat" (payload: the messages) or "complete" (payload:
        the prompt). `params` carries the request's fields (GENERATE_FIELDS, the sampling fields of
        `llamay.sampling.request`); any other is refused by name. With `tools` (chat), the reply is in the model's
        tool-call syntax, held to it as the server holds it (llamay.tools); `tool_delta` reads it."""
        from llamay.constraints import constraint_from_request
        from llamay.sampling.request import RequestFieldError, accepted
        from llamay.tools import OpenAIDeltas, plan_tools

        params = dict(params or {})
        known = set(accepted("openai")) | GENERATE_FIELDS
        unknown = sorted(k for k in params if k not in known)
        if unknown:
            names = ", ".join(sorted(known))
            raise RequestFieldError(unknown[0], f"is not a field the browser engine reads ({names})")
        max_tokens = params.get("max_completion_tokens") or params.get("max_tokens") or DEFAULT_MAX_TOKENS
        sampling, stop = request_sampling(params, self.model.cfg.n_vocab)
        constraint = constraint_from_request(params, self.model.tokenizer)
        self._deltas = None
        if kind == "chat":
            messages = [dict(m) for m in payload]
            tpl = self.model.tokenizer.chat_template_source
            plan = plan_tools(tpl, params.get("tools") or None, params.get("tool_choice"),
                              params.get("parallel_tool_calls"))  # fmt: skip
            template_tools, decoder = None, None
            if plan is not None:
                if constraint is not None:
                    why = "cannot constrain a reply that may call tools: their grammar does (or tool_choice: none)"
                    given = next(n for n in ("response_format", "json_schema", "grammar") if params.get(n))
                    raise RequestFieldError(given, why)
                messages, template_tools = plan.messages(messages), plan.template_tools
                constraint = plan.constraint(self.model.tokenizer)
                decoder = plan.decoder(self.model.tokenizer)  # the parser reads the syntax's marker tokens
                self._deltas = OpenAIDeltas(plan)
            return self.engine.chat(messages, int(max_tokens), sampling, stop, tools=template_tools,
                                    constraint=constraint, decoder=decoder)  # fmt: skip
        for name in ("tools", "tool_choice", "parallel_tool_calls"):
            if params.get(name) is not None:
                raise RequestFieldError(name, "is a chat field: a text completion calls no tools")
        if kind == "complete":
            return self.engine.complete(str(payload), int(max_tokens), sampling, stop, constraint=constraint)
        raise ValueError(f"unknown generation kind {kind!r} (chat, complete)")

    def tool_delta(self, text: str, last: bool = False) -> dict | None:
        """The stream delta of the running chat's next piece when it has tools, as the server streams it
        (content, then per call its index, id and name, then argument pieces); None when the piece adds nothing
        yet (it may begin a call) or the chat has no tools. `last`: the reply is over (held text comes out)."""
        return self._deltas.feed(text, last) if self._deltas is not None else None

    def tool_finish(self, finish_reason: str) -> str:
        """The streamed chat's finish_reason: "tool_calls" when it stopped with every call it began complete."""
        from llamay.tools import finish_of

        return finish_of(self._deltas.calls, finish_reason) if self._deltas is not None else finish_reason

    def generated(self) -> int:
        """Tokens generated so far by the running request."""
        return self.engine.stats.generated_tokens

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.engine.embed([str(t) for t in texts])

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        return self.model.tokenizer.encode(text, add_special=add_special, parse_special=parse_special)

    def detokenize(self, ids: list[int]) -> str:
        return self.model.tokenizer.decode([int(i) for i in ids])

    def reset(self) -> None:
        """A fresh KV state: after an interrupt (KeyboardInterrupt mid-step) the old one may be half-written."""
        from llamay.engine import Engine

        self.engine = Engine(self.model)

    def stats(self) -> dict:
        s = self.engine.stats
        return {
            "prompt_tokens": s.prompt_tokens,
            "cached_tokens": s.cached_tokens,
            "generated_tokens": s.generated_tokens,
            "prompt_tps": s.prompt_tps,
            "generate_tps": s.generate_tps,
            "prompt_seconds": s.prompt_seconds,
            "generate_seconds": s.generate_seconds,
            "finish_reason": s.finish_reason,
        }

    def close(self) -> None:
        self.model.close()


class _Counts:
    """A pytest plugin that counts outcomes the way pytest's summary line does."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            key = report.outcome
            if hasattr(report, "wasxfail"):
                key = "xfailed" if report.outcome == "skipped" else "xpassed"
            elif report.outcome == "failed" and report.when != "call":
                key = "error"
            self.counts[key] = self.counts.get(key, 0) + 1
        elif report.when == "teardown" and report.outcome == "failed":
            self.counts["error"] = self.counts.get("error", 0) + 1


def run_pytest(args: list[str], rootdir: str) -> dict:
    """Run pytest in `rootdir` with `args`; {"exit": code, "counts": {outcome: n}}."""
    import pytest

    sys.dont_write_bytecode = True  # the checkout is mounted: leave no __pycache__ in it
    os.chdir(rootdir)
    if rootdir not in sys.path:
        sys.path.insert(0, rootdir)
    counts = _Counts()
    code = pytest.main(["-p", "no:cacheprovider", *args], plugins=[counts])
    return {"exit": int(code), "counts": counts.counts}
