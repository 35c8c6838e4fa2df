"""`llamay.Model`: a loaded model as the library shows it. Tokens and text both ways, contexts for a loop of the
caller's own, and the high level (`complete`, `chat`, `embed`) over the one `Engine` the CLI and the browser
drive: nothing here samples or decodes by itself."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..constraints.spec import compiled
from ..engine import Engine, Stats
from ..errors import LlamayError
from ..model import Model as CoreModel
from ..sampling import SamplerConfig
from ..tokenizer import StreamDecoder, Tokenizer
from ..tools import detect_syntax, parse_reply, plan_tools
from .context import Context
from .errors import ContextClosedError, TokenError
from .sampler import Sampler, sampler_config


@dataclass(frozen=True)
class Defaults:
    """What a stored model's PARAMETER layer asks for (empty for a plain file)."""

    sampling: dict[str, Any] = field(default_factory=dict)  # SamplerConfig fields
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None
    n_ctx: int | None = None


class Model:
    """Made by `llamay.load`; `close()` (or a `with` block) unmaps the file."""

    def __init__(self, core: CoreModel, name: str | None = None, defaults: Defaults | None = None,
                 n_ctx: int | None = None) -> None:  # fmt: skip
        self.core = core  # llamay.model.Model: config, weights on a backend, tokenizer
        self.name = name or core.name
        self.defaults = defaults or Defaults()
        self._n_ctx = n_ctx or self.defaults.n_ctx
        self._engine: Engine | None = None
        self._busy = False  # a high-level stream has not finished: the engine's cache is in use
        self.closed = False

    # -- what it is -----------------------------------------------------------------------------------------

    @property
    def tokenizer(self) -> Tokenizer:
        return self.core.tokenizer

    @property
    def n_vocab(self) -> int:
        return self.core.cfg.n_vocab

    @property
    def n_ctx_train(self) -> int:
        return self.core.cfg.n_ctx_train

    @property
    def n_embd(self) -> int:
        return self.core.cfg.n_embd

    @property
    def backend(self) -> str:
        """The kernel backend it runs on: numba, wasm or portable."""
        return self.core.backend.name

    @property
    def is_encoder(self) -> bool:
        """An embedding model (no logits, `embed` only)."""
        return not self.core.cfg.causal

    @property
    def bos(self) -> int | None:
        return self.tokenizer.bos_id

    @property
    def eos(self) -> int | None:
        return self.tokenizer.eos_id

    def is_eog(self, token: int) -> bool:
        """An end-of-generation token (EOS, EOT, <|im_end|>, ...)."""
        return self.tokenizer.is_eog(self._check_token(token))

    # -- tokens ---------------------------------------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        """Token ids of `text`: BOS/EOS as the model asks when `add_special`, `<|im_start|>` and the like read as
        their tokens when `parse_special`."""
        if not isinstance(text, str):
            raise LlamayError(f"tokenize takes text (str), not {type(text).__name__}")
        return self.tokenizer.encode(text, add_special=add_special, parse_special=parse_special)

    def detokenize(self, tokens: Sequence[int], special: bool = False) -> str:
        """The text of `tokens` (control tokens rendered when `special`)."""
        return self.tokenizer.decode([self._check_token(t) for t in tokens], special=special)

    def token_to_piece(self, token: int, special: bool = False) -> str:
        """One token's text. A token may hold part of a UTF-8 character (shown as U+FFFD here): to print a
        stream of tokens use `detokenizer()`, which holds such bytes back."""
        return self.token_bytes(token, special).decode("utf-8", "replace")

    def token_bytes(self, token: int, special: bool = False) -> bytes:
        return self.tokenizer.token_bytes(self._check_token(token), special)

    def detokenizer(self, special: bool = False) -> StreamDecoder:
        """A streaming detokenizer: `push(token) -> str` never splits a character, `flush() -> str` at the end."""
        return self.tokenizer.detokenizer(special)

    def apply_chat_template(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True, tools: list[dict] | None = None
    ) -> str:
        """The prompt text `chat` would run: the model's chat template rendered for `messages`."""
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tools=tools)

    def _check_token(self, token: Any) -> int:
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < self.n_vocab:
            raise TokenError(f"{token!r} is not a token id of {self.name} (0..{self.n_vocab - 1})")
        return token

    # -- the low level --------------------------------------------------------------------------------------

    def context(self, n_ctx: int | None = None, n_batch: int = 512, n_seq: int = 1) -> Context:
        """A fresh context of n_ctx tokens (default: the model's training context, at most 4096) with room for
        n_seq sequences (itself and its forks)."""
        self._check_open()
        return Context._open(self, n_ctx, n_batch, n_seq)

    # -- the high level -------------------------------------------------------------------------------------

    @property
    def stats(self) -> Stats:
        """Token counts, timings and finish reason ("stop" or "length") of the last complete/chat."""
        return self.engine.stats

    @property
    def engine(self) -> Engine:
        """The Engine that `complete`, `chat` and `embed` run on (made on first use)."""
        self._check_open()
        if self._engine is None:
            self._engine = Engine(self.core, n_ctx=self._n_ctx)
        return self._engine

    def complete(
        self,
        prompt: str | Sequence[int],
        max_tokens: int | None = None,
        *,
        stream: bool = False,
        stop: Sequence[str] | None = None,
        sampler: Sampler | None = None,
        constraint: Any = None,
        add_special: bool = True,
        **sampling: Any,
    ) -> str | Iterator[str]:
        """The continuation of `prompt` (text or token ids): a str, or with `stream` an iterator of text pieces.
        Sampling: a `Sampler`'s parameters, or the same names given here (`temperature=0` is greedy)."""
        if isinstance(prompt, str):
            ids = self.tokenize(prompt, add_special=add_special)
        else:
            ids = [self._check_token(t) for t in prompt]
        return self._run(lambda e, n, cfg, stops, c: e.complete(ids, n, cfg, stops, constraint=c),
                         max_tokens, 128, stream, stop, sampler, constraint, sampling)  # fmt: skip

    def chat(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        stream: bool = False,
        stop: Sequence[str] | None = None,
        sampler: Sampler | None = None,
        constraint: Any = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        parallel_tool_calls: bool | None = None,
        **sampling: Any,
    ) -> str | Iterator[str]:
        """The assistant's reply to `messages` ([{"role": ..., "content": ...}], rendered with the model's chat
        template): a str, or with `stream` an iterator of text pieces. `tools` (OpenAI's shape) with
        `tool_choice` ("auto", "required", "none" or {"type": "function", "function": {"name": ...}}) and
        `parallel_tool_calls` as the server honours them (llamay.tools): the reply is in the model's tool-call
        syntax; `tool_calls(reply)` reads it."""
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise LlamayError('chat takes a list of messages: [{"role": "user", "content": "..."}]')
        plan = plan_tools(self.tokenizer.chat_template_source, tools, tool_choice, parallel_tool_calls)
        template_tools = decoder = None
        if plan is not None:
            if constraint is not None or (sampler is not None and sampler.constraint is not None):
                raise LlamayError("a constraint cannot hold a reply that may call tools: the tools' grammar does")
            messages, template_tools = plan.messages(messages), plan.template_tools
            constraint = plan.constraint(self.tokenizer)
            decoder = plan.decoder(self.tokenizer)  # the syntax's control-token markers shown, as the server does

        def start(e: Engine, n: int, cfg: SamplerConfig, stops: tuple[str, ...], c: Any) -> Iterator[str]:
            return e.chat(messages, n, cfg, stops, template_tools, constraint=c, decoder=decoder)

        return self._run(start, max_tokens, 512, stream, stop, sampler, constraint, sampling)

    def tool_calls(self, reply: str) -> tuple[str | None, list[dict[str, Any]]]:
        """(content, calls) of a `chat` reply with tools, in this model's syntax: each call {"name", "arguments"
        (an object)}; a call cut short by max_tokens is left out."""
        content, calls = parse_reply(detect_syntax(self.tokenizer.chat_template_source), reply)
        return content, [{"name": c["name"], "arguments": json.loads(c["arguments"])} for c in calls if c["complete"]]

    def _run(
        self,
        start: Callable[[Engine, int, SamplerConfig, tuple[str, ...], Any], Iterator[str]],
        max_tokens: int | None,
        default_max: int,
        stream: bool,
        stop: Sequence[str] | str | None,
        sampler: Sampler | None,
        constraint: Any,
        sampling: dict[str, Any],
    ) -> str | Iterator[str]:
        """Settings resolved (given, else the stored model's, else the defaults), then the engine's stream."""
        if self.is_encoder:
            raise LlamayError(f"{self.name} is an encoder ({self.core.cfg.arch}): it generates nothing; use embed")
        if sampler is not None and sampling:
            raise LlamayError(f"give a Sampler or sampling parameters, not both (got {', '.join(sampling)})")
        if sampler is not None and constraint is None:
            constraint = sampler.constraint
        cfg: SamplerConfig = sampler.config if sampler is not None else sampler_config(sampling, self.defaults.sampling)
        n = max_tokens
        if n is None:  # the stored num_predict (negative: until the context is full), else the default
            stored = self.defaults.max_tokens
            n = default_max if stored is None else stored if stored > 0 else self.engine.state.n_ctx
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise LlamayError(f"max_tokens must be a positive integer, got {n!r}")
        stops = tuple(self.defaults.stop if stop is None else ([stop] if isinstance(stop, str) else stop))
        pieces = self._exclusive(start(self.engine, n, cfg, stops, compiled(constraint, self.tokenizer)))
        return pieces if stream else "".join(pieces)

    def _exclusive(self, pieces: Iterator[str]) -> Iterator[str]:
        """The engine keeps one cache: a second stream started before the first ended would corrupt it."""

        def run() -> Iterator[str]:
            if self._busy:
                raise LlamayError("a streamed reply of this model is still open: finish it, or close() it, first")
            self._busy = True
            try:
                yield from pieces
            finally:
                self._busy = False

        return run()

    def embed(self, texts: str | Sequence[str]) -> list[float] | list[list[float]]:
        """The L2-normalised, pooled embedding of a text (or one per text of a list): encoder models."""
        if self._busy:
            raise LlamayError("a streamed reply of this model is still open: finish it, or close() it, first")
        if isinstance(texts, str):
            return self.engine.embed([texts])[0]
        if not all(isinstance(t, str) for t in texts):
            raise LlamayError("embed takes a text or a list of texts (str)")
        return self.engine.embed(list(texts))

    # -- the end --------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the file; this model and its contexts refuse any further work."""
        if not self.closed:
            self.closed = True
            self._engine = None
            self.core.close()

    def _check_open(self) -> None:
        if self.closed:
            raise ContextClosedError(f"{self.name} was closed (its `with` block ended, or close() was called)")

    def __enter__(self) -> Model:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<llamay.Model {self.name} ({self.core.cfg.arch}, {self.backend})>"
