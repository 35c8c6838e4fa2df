"""What the routes share: the loaded models, their names, the scheduler, prompt building and embeddings."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llamay import __version__
from llamay.constraints import warm_up as constraints_warm_up
from llamay.engine import Engine
from llamay.errors import LlamayError
from llamay.kv.snapshot_file import Layout
from llamay.model import Model, load_model

from .context_store import ContextStore
from .errors import ApiError, bad_request
from .limits import PREPARE_THREADS, Limits, prompt_char_limit
from .metrics import Metrics
from .request_log import note_tokens
from .scheduler import Scheduler, SchedulerConfig
from .snapshot_store import DEFAULT_MAX_SNAPSHOT_BYTES, DEFAULT_MAX_SNAPSHOTS, SnapshotStore

DEFAULT_N_CTX = 2048


@dataclass
class ServedModel:
    """A model as the APIs name and describe it."""

    id: str  # the name clients use (the GGUF's file stem)
    model: Model
    path: Path
    aliases: frozenset[str]
    created: int
    kind: str  # "generate" or "embed"
    digest: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def matches(self, name: str) -> bool:
        base = name.removesuffix(":latest")
        # a stored model (`alpha:latest`) answers to its name without the default tag too
        return name in self.aliases or base in self.aliases or f"{base}:latest" == self.id


def describe(model: Model, path: Path) -> tuple[str, dict[str, Any]]:
    """A digest (over the fingerprint) and Ollama-style details: family, parameter size, quantisation."""
    f = model.file
    n_params = sum(t.n_elements for t in f.tensors.values())
    by_bytes: Counter[str] = Counter()
    for t in f.tensors.values():
        by_bytes[t.type.name] += t.nbytes
    quant = by_bytes.most_common(1)[0][0] if by_bytes else "unknown"
    digest = "sha256:" + hashlib.sha256(model.fingerprint).hexdigest()
    details = {
        "parent_model": "",
        "format": "gguf",
        "family": model.cfg.arch,
        "families": [model.cfg.arch],
        "parameter_size": _human(n_params),
        "quantization_level": quant,
        "parameter_count": n_params,
        "size": f.size,  # every shard of a split model
        # read at load: `rm` and `prune` may take the file's name away while it is served (its mapping stays)
        "modified_at": path.stat().st_mtime,
    }
    return digest, details


def _human(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}".replace(".0", "")
    return str(n)


def _on_a_passing_thread(fn: Callable[[], Any]) -> None:
    """Run fn on a thread that ends with it. Parallel kernels (numba's OpenMP layer) keep a pool of threads for
    each thread that launches them, for as long as it lives; a pool left on the main thread beside the model
    thread's makes more OpenMP threads than cores, and OpenMP then puts idle threads to sleep at once, so every
    kernel of every step pays for waking them (16 sequences on 2 cores: 365 tok/s against 558). So kernels run
    on the model thread only, and the warm-up on a thread that goes away."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # re-raised on the caller's thread
            failure.append(e)

    t = threading.Thread(target=run, name="llamay-warm-up")
    t.start()
    t.join()
    if failure:
        raise failure[0]


class Service:
    def __init__(
        self,
        model: Model,
        model_path: str | os.PathLike[str],
        *,
        n_ctx: int | None = None,
        parallel: int = 4,
        queue: int = 64,
        timeout: float = 600.0,
        prefill_chunk: int = 256,
        embedder: Model | None = None,
        embedder_path: str | os.PathLike[str] | None = None,
        aliases: tuple[str, ...] = (),
        snapshot_dir: str | os.PathLike[str] | None = None,
        max_snapshots: int = DEFAULT_MAX_SNAPSHOTS,
        max_snapshot_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES,
        load_seconds: float = 0.0,
        max_body_bytes: int | None = None,
        name: str | None = None,
        defaults: Any = None,
        strict_names: bool = False,
    ) -> None:
        if not model.cfg.causal:
            raise LlamayError(f"{model.name} is an encoder ({model.cfg.arch}); serve it with --embedding-model")
        now = int(time.time())
        self.started = now
        self.load_seconds = load_seconds
        self.metrics = Metrics()
        n_ctx = min(n_ctx or DEFAULT_N_CTX, model.cfg.n_ctx_train or DEFAULT_N_CTX)
        self.n_ctx = n_ctx
        self.scheduler = Scheduler(
            model,
            SchedulerConfig(n_ctx=n_ctx, n_seq=parallel, queue=queue, timeout=timeout, prefill_chunk=prefill_chunk),
            self.metrics,
        )
        path = Path(model_path)
        digest, details = describe(model, path)
        self.strict_names = strict_names  # --strict-model-name: only the served models' names (see `resolve`)
        self.own_names_only = False  # set by a pool serving the store: routes it does not route (llama-server's)
        self.defaults = defaults  # a stored model's PARAMETERs (llamay.native.store.options.Options), or None
        mid = name or path.stem  # a stored model by its name, a file by its stem
        self.generator = ServedModel(mid, model, path, frozenset({mid, path.stem, path.name, *aliases}), now,
                                     "generate", digest, details)  # fmt: skip
        self.embedder: ServedModel | None = None
        self.embed_engine: Engine | None = None
        if embedder is not None:
            if embedder.cfg.causal:
                raise LlamayError(f"{embedder.name} is a generative model without pooling: not an embedding model")
            epath = Path(embedder_path or embedder.file.name)
            edigest, edetails = describe(embedder, epath)
            self.embedder = ServedModel(epath.stem, embedder, epath, frozenset({epath.stem, epath.name}), now,
                                        "embed", edigest, edetails)  # fmt: skip
            self.embed_engine = Engine(embedder)
        self._embed_lock = threading.Lock()
        self._own_snapshot_dir = snapshot_dir is None
        self.snapshot_dir = Path(snapshot_dir or tempfile.mkdtemp(prefix="llamay-snapshots-"))
        self.limits = Limits(
            max_body_bytes=max_body_bytes or Limits.max_body_bytes,
            max_prompt_chars=prompt_char_limit(model.tokenizer, n_ctx),
            max_preparing=queue,
        )
        # templates, tokenization, constraint compilation and sampler set-up: never on the event loop
        self._pool = concurrent.futures.ThreadPoolExecutor(PREPARE_THREADS, thread_name_prefix="llamay-prepare")
        self._preparing = 0  # requests in the pool (waiting or running); counted on the event loop only
        self.model_fingerprint = model.fingerprint  # what saved KV snapshots must match
        self.snapshots = SnapshotStore(self.snapshot_dir, self.model_fingerprint, max_snapshots, max_snapshot_bytes)
        self.contexts = ContextStore()
        self.slot_params: dict[int, dict[str, Any]] = {}  # llama-server's slots: the last request's settings
        m = self.metrics
        st = self.scheduler.state
        # what a snapshot file must fit (token ids the tokenizer and the embedding both know)
        self.snapshot_layout = Layout.of(st, n_vocab=min(model.cfg.n_vocab, model.tokenizer.n_vocab))
        m.gauge("queue_depth", "Jobs waiting for admission.", lambda: self.scheduler.queue_depth)
        m.gauge("running_sequences", "Sequences being prefilled or decoded.", lambda: self.scheduler.running)
        m.gauge("batch_width", "Sequences in the last batcher step.", lambda: self.scheduler.batcher.last_batch_width)
        m.gauge("sequences", "Sequences the server decodes together (--parallel).", lambda: st.n_seq)
        m.gauge("kv_pages_total", "KV pages in the pool (first KV group).", lambda: st.kv.groups[0].pages.n_pages)
        m.gauge("kv_pages_free", "Free KV pages (first KV group).", lambda: st.kv.groups[0].pages.n_free)
        m.gauge("prefix_cache_pages", "Page sets held by the prefix cache.", lambda: st.kv.prefix_cache.n_pages)
        m.gauge("contexts", "Named contexts held.", lambda: len(self.contexts))
        m.gauge("kv_accounting_problems", "Problems the last idle KV audit found (0: exact).",
                lambda: len(self.scheduler.problems))  # fmt: skip

    # -- life cycle -----------------------------------------------------------------------------------------

    @classmethod
    def load(cls, model_path: str | os.PathLike[str], *, backend: str | None = None,
             embedding_model: str | os.PathLike[str] | None = None, **kw: Any) -> Service:  # fmt: skip
        t0 = time.perf_counter()
        opened: list[Model] = []
        try:  # a failure closes what was opened (a server loading models on demand goes on)
            model = load_model(model_path, backend)
            opened.append(model)
            embedder = load_model(embedding_model, backend) if embedding_model else None
            if embedder is not None:
                opened.append(embedder)
            # compile/load every kernel now, not during the first request (the constraints' too: a first
            # request with a schema waited about a minute on a cold numba cache)
            _on_a_passing_thread(lambda: [m.warm_up() for m in opened])
            if model.cfg.causal:
                _on_a_passing_thread(lambda: constraints_warm_up(model.tokenizer))
            return cls(model, model_path, embedder=embedder, embedder_path=embedding_model,
                       load_seconds=time.perf_counter() - t0, **kw)  # fmt: skip
        except BaseException:
            for m in opened:
                m.close()
            raise

    def start(self) -> None:
        self.scheduler.start()

    def stop(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.scheduler.stop()
        if self._own_snapshot_dir:
            for p in self.snapshot_dir.glob("*"):
                p.unlink(missing_ok=True)
            self.snapshot_dir.rmdir()

    def health(self) -> tuple[int, dict[str, Any]]:
        """(status, body) of /health: 200 "ok", or 503 "degraded" with the problems (the model thread has stopped,
        or its last idle audit found the KV accounting broken)."""
        s = self.scheduler
        problems = list(s.problems)
        if not s.alive:
            problems.insert(0, "the model thread has stopped")
        body = {"status": "degraded" if problems else "ok", "model": self.generator.id, "queue_depth": s.queue_depth,
                "running": s.running, "problems": problems}  # fmt: skip
        return (503 if problems else 200), body

    @property
    def version(self) -> str:
        return __version__

    @property
    def fingerprint(self) -> str:
        return f"llamay-{__version__}-{self.generator.digest[7:19]}"

    # -- models ---------------------------------------------------------------------------------------------

    @property
    def models(self) -> list[ServedModel]:
        return [self.generator] + ([self.embedder] if self.embedder else [])

    @property
    def tokenizer(self):  # llamay.tokenizer.Tokenizer of the generative model
        return self.generator.model.tokenizer

    def find(self, name: str | None, param: str = "model") -> ServedModel:
        """The served model so named, else 404 (a lookup: /api/show, /v1/models/{id})."""
        for m in self.models:
            if name is not None and m.matches(name):
                return m
        known = ", ".join(m.id for m in self.models)
        raise ApiError(404, f"the model {name!r} does not exist here; served: {known}", param=param,
                       code="model_not_found")  # fmt: skip

    def resolve(self, name: str | None, kind: str, param: str = "model") -> ServedModel:
        """The model that serves a request naming `name` on a route of `kind` ("generate" or "embed"), for every
        route: a served model's name is that model (400 if it is of the other kind); any other name, or none, is
        the one model of that kind, as llama-server answers for its one model (the OpenAI SDK sends
        `gpt-3.5-turbo-instruct`, `text-embedding-3-small`...). With --strict-model-name a name is required and
        must be a served one's (404). The one place names become models: where a stored model is served by name
        later, an unknown name that is a stored model's can be loaded here."""
        named = next((m for m in self.models if name is not None and m.matches(name)), None)
        if named is None and name is not None and self.own_names_only:
            self.find(name, param)  # a 404: serving the store, another name is another model (pool.ModelPool)
        if named is None and self.strict_names:
            if name is None:
                known = ", ".join(m.id for m in self.models if m.kind == kind)
                raise bad_request(f"model is required (the server runs with --strict-model-name); served: {known}",
                                  param)  # fmt: skip
            self.find(name, param)  # a 404
        if kind == "rerank":
            return self._reranker(named, param)
        m = named or (self.generator if kind == "generate" else self.embedder)
        if kind == "generate" and m is not None and m.kind != "generate":
            raise bad_request(f"{m.id} is an embedding model: it does not generate text", param, "wrong_model")
        if kind == "embed" and m is None:  # no model of that kind here: nothing the name could be (as unknown)
            raise ApiError(404, "no embedding model is served here: start the server with --embedding-model PATH "
                           "(an encoder such as all-MiniLM-L6-v2)", param=param, code="model_not_found")  # fmt: skip
        if kind == "embed" and (m is None or m.kind != "embed" or self.embed_engine is None):
            hint = (
                f"; embeddings are served by {self.embedder.id}"
                if self.embedder
                else "; start the server with --embedding-model PATH (an encoder such as all-MiniLM-L6-v2)"
            )
            raise bad_request(f"{m.id} is a generative model without pooling: it has no embeddings{hint}", param,
                              "model_not_embedding")  # fmt: skip
        assert m is not None
        return m

    def _reranker(self, named: ServedModel | None, param: str) -> ServedModel:
        """The reranker a /rerank asks for: the embedding model, when it pools by rank (a classifier head)."""
        m = named or self.embedder or self.generator
        engine = self.embed_engine if m is self.embedder else None
        if engine is None or engine.pooling != "rank":
            raise bad_request(f"{m.id} is not a reranker: /rerank needs an encoder with a classification head and "
                              "rank pooling (pooling_type 4, such as bge-reranker), served with --embedding-model",
                              param, "model_not_reranker")  # fmt: skip
        return m

    def generative(self, name: str | None) -> ServedModel:
        return self.resolve(name, "generate")

    # -- preparing requests ---------------------------------------------------------------------------------

    async def offload(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) on a preparation thread: the event loop goes on serving meanwhile. At most
        `limits.max_preparing` requests wait for or run on those threads; beyond, 429."""
        if self._preparing >= self.limits.max_preparing:
            self.metrics.rejected["preparing_full"] += 1
            raise ApiError(429, f"{self._preparing} requests are being prepared (the limit is the queue's, "
                           f"{self.limits.max_preparing}); retry in 1 s", code="queue_full",
                           headers={"Retry-After": "1"})  # fmt: skip
        self._preparing += 1
        try:
            return await asyncio.wrap_future(self._pool.submit(fn, *args))
        finally:
            self._preparing -= 1

    # -- prompts (called on preparation threads: see `offload`) ---------------------------------------------

    def check_chars(self, n_chars: int, param: str = "prompt") -> None:
        """Refuse, before tokenizing, a text longer than any that fits the context (limits.max_prompt_chars)."""
        limit = self.limits.max_prompt_chars
        if limit is not None and n_chars > limit:
            raise bad_request(
                f"the prompt has {n_chars} characters, more than could fit the context of {self.n_ctx} tokens "
                f"(max_prompt_chars: {limit}, the context times the longest token): shorten it",
                param,
                "context_length_exceeded",
            )

    def encode(self, text: str, add_special: bool = True, param: str = "prompt") -> list[int]:
        self.check_chars(len(text), param)
        return self.tokenizer.encode(text, add_special=add_special, parse_special=True)

    def chat_text(self, messages: list[dict[str, Any]], tools: Any = None, add_generation_prompt: bool = True,
                  think: bool | None = None) -> str:  # fmt: skip
        """The prompt text of a chat; `tools` (a llamay.tools.ToolPlan) puts the tools in it: the template renders
        them, or (the generic format) the system message describes them. Their JSON counts in the precheck.
        `think` sets the template's `enable_thinking` (Qwen3's name)."""
        template_tools = None
        extra = 0
        if tools is not None:
            messages = tools.messages(messages)
            template_tools = tools.template_tools
            extra = tools.prompt_chars
        self.check_chars(sum(len(m.get("content") or "") for m in messages) + extra, "messages")
        try:
            kw = {} if think is None else {"enable_thinking": think}
            return self.tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt,
                                                      tools=template_tools, **kw)  # fmt: skip
        except LlamayError as e:
            raise bad_request(f"the chat template cannot render these messages: {e}", "messages",
                              "template_error") from None  # fmt: skip

    def chat_ids(self, messages: list[dict[str, Any]], tools: Any = None, think: bool | None = None) -> list[int]:
        """The prompt of a chat (`chat_text`), as token ids."""
        ids = self.encode(self.chat_text(messages, tools, think=think), param="messages")
        if len(ids) > 1 and ids[0] == ids[1] == self.tokenizer.bos_id:  # the template wrote the BOS text itself
            del ids[0]
        return ids

    @property
    def chat_template(self) -> str | None:
        """The source of the generative model's chat template (None: the ChatML fallback)."""
        return self.tokenizer.chat_template_source

    def check_ids(self, ids: list[int], param: str = "prompt") -> list[int]:
        n_vocab = self.tokenizer.n_vocab
        if not ids:
            raise bad_request("the prompt is empty", param)
        bad = next((t for t in ids if not 0 <= t < n_vocab), None)
        if bad is not None:
            raise bad_request(f"token id {bad} is outside the vocabulary of {n_vocab}", param)
        return ids

    def fit(self, prompt: list[int], max_tokens: int | None, param: str = "max_tokens", *, n_ctx: int | None = None,
            truncate: bool = False, n_keep: int = 0, ctx_param: str = "-c") -> tuple[list[int], int, int]:  # fmt: skip
        """(prompt, budget, tokens cut): the prompt as it fits `n_ctx` (a request's own context, at most the
        server's; default the server's). A prompt with no room left is refused unless `truncate`: then it keeps
        its first `n_keep` tokens (-1: all of them, so it cannot be cut) and its end, leaving the reply
        `max_tokens` (or, not given, half the context: llama-server's old prompt truncation kept half of what
        followed n_keep)."""
        n_ctx = self.n_ctx if n_ctx is None else n_ctx
        cut = 0
        if truncate and len(prompt) + 1 > n_ctx:
            bos = 1 if prompt[0] == self.tokenizer.bos_id else 0  # kept besides n_keep, as llama-server does
            keep = len(prompt) if n_keep < 0 else min(n_keep + bos, len(prompt))
            reserve = max(1, min(max_tokens if max_tokens is not None else n_ctx // 2, n_ctx - 1 - keep))
            tail = n_ctx - reserve - keep
            if tail <= 0:
                raise bad_request(
                    f"the prompt has {len(prompt)} tokens and the context holds {n_ctx} ({ctx_param}): keeping its "
                    f"first {keep} (n_keep) leaves nothing of its end to keep", "n_keep", "context_length_exceeded"
                )  # fmt: skip
            cut = len(prompt) - keep - tail
            prompt = prompt[:keep] + prompt[len(prompt) - tail :]
        return prompt, self.budget(prompt, max_tokens, param, n_ctx=n_ctx, ctx_param=ctx_param), cut

    def budget(self, prompt: list[int], max_tokens: int | None, param: str = "max_tokens", *,
               n_ctx: int | None = None, ctx_param: str = "-c") -> int:  # fmt: skip
        """Tokens a reply may have: the request's max (else the stored model's num_predict), within the context; a
        prompt that leaves no room and an absurd max_tokens are refused (never silently truncated)."""
        n_ctx = self.n_ctx if n_ctx is None else n_ctx
        if len(prompt) + 1 > n_ctx:
            raise bad_request(
                f"the prompt has {len(prompt)} tokens but the context holds {n_ctx} ({ctx_param}; including at least "
                "one generated token): shorten it, or ask for truncation (truncation: 'auto'; Ollama: "
                "options.num_ctx or truncate: true)",
                "messages" if param == "max_completion_tokens" else "prompt",
                "context_length_exceeded",
            )
        if max_tokens is not None and max_tokens > n_ctx:
            raise bad_request(f"{param} is {max_tokens}, more than the whole context of {n_ctx} tokens", param)
        room = n_ctx - len(prompt)
        if max_tokens is None:  # a stored model's num_predict, where it has one (< 0: until the context is full)
            max_tokens = getattr(self.defaults, "num_predict", None)
            max_tokens = None if max_tokens is None or max_tokens < 0 else max(max_tokens, 1)
        return room if max_tokens is None else min(max_tokens, room)

    # -- embeddings -----------------------------------------------------------------------------------------

    async def embed(
        self, name: str | None, inputs: list[str] | list[list[int]], per_token: bool = False
    ) -> tuple[ServedModel, list[Any], int]:
        """The embedding of each input: a text, or token ids of the embedding model's vocabulary (as OpenAI's
        `input` allows), read as given; with `per_token`, each input's token states instead (llama-server's
        /embedding of a model without pooling)."""
        m = self.resolve(name, "embed")
        engine = self.embed_engine
        assert engine is not None
        if engine.pooling == "rank":
            raise bad_request(f"{m.id} is a reranker (rank pooling): it scores query-document pairs; ask POST "
                              "/rerank", "model", "model_is_reranker")  # fmt: skip
        if not per_token and engine.pooling == "none":
            raise bad_request(f"{m.id} has no pooling (pooling_type none): its embeddings are one per token; ask "
                              "POST /embedding for them", "model", "model_not_pooled")  # fmt: skip
        n_ctx = engine.state.n_ctx
        ids = await self.offload(_embedding_ids, engine, inputs, m.id)
        for i, x in enumerate(ids):
            if len(x) > n_ctx:
                raise bad_request(f"input {i} has {len(x)} tokens; {m.id} reads at most {n_ctx}", "input",
                                  "context_length_exceeded")  # fmt: skip

        def run(_state: Any = None) -> list[Any]:
            with self._embed_lock:
                return engine.embed_tokens(ids) if per_token else engine.embed_ids(ids)

        if self.scheduler.alive:  # on the model thread, between steps: kernels run on one thread only (above)
            vectors = await asyncio.wrap_future(self.scheduler.call(run))
        else:
            vectors = await asyncio.to_thread(run)
        note_tokens(sum(map(len, ids)))  # in the request's log line
        return m, vectors, sum(map(len, ids))

    async def rerank(self, name: str | None, query: str, documents: list[str]) -> tuple[ServedModel, list[float], int]:
        """Each document's relevance score to `query` (the reranker's first score), in the documents' order; the
        pair tokens counted."""
        m = self.resolve(name, "rerank")
        engine = self.embed_engine
        assert engine is not None
        n_ctx = engine.state.n_ctx

        def pairs() -> list[list[int]]:  # on a preparation thread
            self.check_chars(len(query) * len(documents) + sum(map(len, documents)), "documents")
            return [engine.rerank_ids(query, d) for d in documents]

        ids = await self.offload(pairs)
        for i, x in enumerate(ids):
            if len(x) > n_ctx:
                raise bad_request(f"the query with document {i} has {len(x)} tokens; {m.id} reads at most {n_ctx}",
                                  "documents", "context_length_exceeded")  # fmt: skip

        def run(_state: Any = None) -> list[list[float]]:
            with self._embed_lock:
                return engine.scores(ids)

        if self.scheduler.alive:  # on the model thread, between steps (see embed)
            scores = await asyncio.wrap_future(self.scheduler.call(run))
        else:
            scores = await asyncio.to_thread(run)
        note_tokens(sum(map(len, ids)))
        return m, [s[0] for s in scores], sum(map(len, ids))


def _embedding_ids(engine: Engine, inputs: list[str] | list[list[int]], name: str) -> list[list[int]]:
    """Texts tokenized as Engine.embed does; token ids checked against the embedding model's vocabulary, the bad
    one named (on a preparation thread)."""
    n_vocab = min(engine.tokenizer.n_vocab, engine.model.cfg.n_vocab)
    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, str):
            out.append(engine.tokenizer.encode(x))
            continue
        bad = next((j for j, t in enumerate(x) if not 0 <= t < n_vocab), None)
        if bad is not None:
            raise bad_request(f"input[{i}][{bad}]: token id {x[bad]} is outside the vocabulary of {n_vocab} ({name})",
                              "input")  # fmt: skip
        out.append(list(x))
    return out
