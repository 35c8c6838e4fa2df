"""A single-sequence engine over one model: text completion, chat, embeddings, tokenization.

It is what the CLI's `run`/`chat`/`embed` and the browser worker drive. Between calls it keeps the KV cache
of the last prompt + reply and reuses the longest common prefix, so a growing chat only computes its new
turn. (The server's multi-sequence scheduler builds on the same State with several sequences.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import LlamayError
from .generate import decode_step, prefill
from .model import Model
from .sampling import Sampler, SamplerConfig
from .tokenizer import StreamDecoder


@dataclass
class Stats:
    """Timings of the last call, as llama.cpp/ollama report them."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    generated_tokens: int = 0
    prompt_seconds: float = 0.0
    generate_seconds: float = 0.0
    finish_reason: str = ""

    @property
    def prompt_tps(self) -> float:
        computed = self.prompt_tokens - self.cached_tokens
        return computed / self.prompt_seconds if self.prompt_seconds > 0 else 0.0

    @property
    def generate_tps(self) -> float:
        return self.generated_tokens / self.generate_seconds if self.generate_seconds > 0 else 0.0


class StopStrings:
    """Stop strings prepared once (per request, shared by its choices): each with its KMP failure table."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(dict.fromkeys(s for s in stops if s))
        self.failure = [_failure(s) for s in self.stops]


def _failure(s: str) -> list[int]:
    """KMP's table: failure[i] = length of the longest proper prefix of s[:i + 1] that is also its suffix."""
    f = [0] * len(s)
    k = 0
    for i in range(1, len(s)):
        while k and s[i] != s[k]:
            k = f[k - 1]
        if s[i] == s[k]:
            k += 1
        f[i] = k
    return f


class StopMatcher:
    """Holds back text that might be the start of a stop string; reports when one is complete.

    Linear in the text pushed: for each stop, a KMP automaton remembers how much of it the text ends with, so
    only the longest such partial match is held back (less than the longest stop). A stop is searched for in
    the held text plus the new text only (a stop cannot start before the held text: it would be a longer
    partial match). When several stops appear in one push, the one that starts first wins.
    """

    def __init__(self, stops: Sequence[str] | StopStrings) -> None:
        self.compiled = stops if isinstance(stops, StopStrings) else StopStrings(stops)
        self.matched = [0] * len(self.compiled.stops)  # per stop: how many of its first chars the text ends with
        self.held = ""
        self.stopped = False

    @property
    def stops(self) -> tuple[str, ...]:
        return self.compiled.stops

    def push(self, text: str) -> str:
        stops = self.compiled.stops
        if not stops:
            return text
        buf = self.held + text
        first = min((i for i in (buf.find(s) for s in stops) if i >= 0), default=-1)
        if first >= 0:
            self.stopped = True
            self.held = ""
            return buf[:first]
        for k, (s, failure) in enumerate(zip(stops, self.compiled.failure, strict=True)):
            m = self.matched[k]
            for ch in text:
                while m and (m == len(s) or s[m] != ch):
                    m = failure[m - 1]
                if s[m] == ch:
                    m += 1
            self.matched[k] = m
        keep = max(self.matched)
        self.held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep] if keep else buf

    def flush(self) -> str:
        out, self.held = self.held, ""
        self.matched = [0] * len(self.matched)
        return out


class Engine:
    def __init__(self, model: Model, n_ctx: int | None = None, n_batch: int = 512) -> None:
        self.model = model
        self.state = model.new_state(n_ctx=n_ctx, n_batch=n_batch)
        self.stats = Stats()

    @property
    def tokenizer(self):
        return self.model.tokenizer

    def generate_tokens(
        self,
        prompt: Sequence[int],
        max_tokens: int,
        sampler: Sampler,
        stop_at_eog: bool = True,
        constraint: Any = None,
    ) -> Iterator[int]:
        """Sampled token ids, reusing the cached prefix of `prompt`; `constraint` (llamay.constraints) limits
        them to a grammar, JSON Schema or lexicon."""
        st, model = self.state, self.model
        if constraint is not None:
            sampler.set_constraint(constraint)
        sampler.accept_prompt(prompt)
        if len(prompt) >= st.n_ctx:
            raise LlamayError(f"the prompt has {len(prompt)} tokens; the context holds {st.n_ctx}")
        stats = self.stats = Stats(prompt_tokens=len(prompt))
        t0 = time.perf_counter()
        stats.cached_tokens = st.kv.reuse_prefix(0, list(prompt))
        prefill(model, st, prompt[stats.cached_tokens :])
        stats.prompt_seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        n_vocab = model.cfg.n_vocab
        stats.finish_reason = "length"
        for i in range(max_tokens):
            tok = sampler.sample(model.backend, st.logits, 0, n_vocab)
            if stop_at_eog and self.tokenizer.is_eog(tok):
                stats.finish_reason = "stop"
                break
            stats.generated_tokens += 1
            stats.generate_seconds = time.perf_counter() - t1
            yield tok
            if i + 1 == max_tokens:
                break
            if st.kv.sequences[0].n_past >= st.n_ctx:
                stats.finish_reason = "length"
                break
            decode_step(model, st, tok)
        stats.generate_seconds = time.perf_counter() - t1

    def complete(
        self,
        prompt: str | Sequence[int],
        max_tokens: int = 128,
        sampling: SamplerConfig | None = None,
        stop: Sequence[str] = (),
        add_special: bool = True,
        constraint: Any = None,
        decoder: StreamDecoder | None = None,
    ) -> Iterator[str]:
        """Stream the completion of `prompt` as text pieces (never a broken UTF-8 character); `decoder`: how the
        tokens become text (default: control tokens as nothing; with tools, `ToolPlan.decoder`)."""
        ids = self.tokenizer.encode(prompt, add_special=add_special) if isinstance(prompt, str) else list(prompt)
        detok = decoder or self.tokenizer.detokenizer()
        matcher = StopMatcher(list(stop))
        sampler = Sampler(sampling, constraint=constraint, tokenizer=self.tokenizer)
        for tok in self.generate_tokens(ids, max_tokens, sampler):
            piece = matcher.push(detok.push(tok))
            if piece:
                yield piece
            if matcher.stopped:
                self.stats.finish_reason = "stop"
                return
        tail = matcher.push(detok.flush()) + matcher.flush()
        if tail:
            yield tail

    def chat(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int = 512,
        sampling: SamplerConfig | None = None,
        stop: Sequence[str] = (),
        tools: list[dict[str, Any]] | None = None,
        constraint: Any = None,
        decoder: StreamDecoder | None = None,
    ) -> Iterator[str]:
        """Stream the assistant's reply to `messages`, rendered with the model's chat template (`decoder`: as
        `complete` takes it)."""
        prompt = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tools=tools)
        ids = self.tokenizer.encode(prompt, add_special=True, parse_special=True)
        bos = self.tokenizer.bos_id
        if len(ids) > 1 and ids[0] == ids[1] == bos:  # the template wrote the BOS text itself
            del ids[0]
        return self.complete(ids, max_tokens, sampling, stop, constraint=constraint, decoder=decoder)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised, pooled embedding per text (encoder models)."""
        return self.embed_ids([self.tokenizer.encode(text) for text in texts])

    @property
    def pooling(self) -> str | None:
        """How an encoder pools its token states ("mean", "cls", "last", "none"); None for a generative model."""
        params = getattr(self.model.cfg, "params", None)
        value = getattr(params, "pooling", None)
        return None if value is None else str(value)

    def embed_tokens(self, inputs: Sequence[Sequence[int]]) -> list[list[list[float]]]:
        """Each input's token states (one n_embd vector per token, not normalised), as the last layer leaves
        them: an encoder without pooling's output, and what any encoder pools."""
        model, st = self.model, self.state
        if model.cfg.causal:
            raise LlamayError(f"{model.name}: {model.cfg.arch!r} is a generative model: no token embeddings here")
        from .model import forward

        e, out = model.cfg.n_embd, []
        for ids in inputs:
            if len(ids) > st.n_ctx:
                raise LlamayError(f"text of {len(ids)} tokens exceeds the model's context of {st.n_ctx}")
            st.kv.reset(0)
            forward(model, st, list(ids), outputs=())
            out.append([model.backend.read_f32(st.x, j * e, e) for j in range(len(ids))])
        st.kv.reset(0)
        return out

    def scores(self, inputs: Sequence[Sequence[int]]) -> list[list[float]]:
        """A reranker's scores (n_cls_out each, unnormalised) of each input: a query and a document as one
        token list (`rerank_ids`)."""
        model, st = self.model, self.state
        if self.pooling != "rank":
            raise LlamayError(f"{model.name} is not a reranker (pooling {self.pooling}): it has no scores")
        from .model import forward

        n_out, out = model.cfg.params.n_cls_out, []
        for ids in inputs:
            if len(ids) > st.n_ctx:
                raise LlamayError(f"a pair of {len(ids)} tokens exceeds the model's context of {st.n_ctx}")
            st.kv.reset(0)
            forward(model, st, list(ids), outputs=())
            out.append(model.backend.read_f32(st.scratch.pooled, 0, n_out))
        st.kv.reset(0)
        return out

    def rerank_ids(self, query: str, document: str) -> list[int]:
        """A query-document pair as llama.cpp's server feeds a reranker: [BOS] query [EOS] [SEP] document [EOS],
        each special token where the vocabulary adds it."""
        tok = self.tokenizer
        v, ids = tok.vocab, tok.vocab.ids
        out: list[int] = [ids["bos"]] if v.add_bos and ids.get("bos") is not None else []
        out += tok.encode(query, add_special=False, parse_special=False)
        if v.add_eos and ids.get("eos") is not None:
            out.append(ids["eos"])
        if v.add_sep and ids.get("sep") is not None:
            out.append(ids["sep"])
        out += tok.encode(document, add_special=False, parse_special=False)
        if v.add_eos and ids.get("eos") is not None:
            out.append(ids["eos"])
        return out

    def embed_ids(self, inputs: Sequence[Sequence[int]]) -> list[list[float]]:
        """One L2-normalised, pooled embedding per list of token ids, read as given (encoder models)."""
        model, st = self.model, self.state
        if model.cfg.causal:
            raise LlamayError(
                f"{model.name}: {model.cfg.arch!r} is a generative model without pooling; embeddings need an "
                "encoder such as bert"
            )
        from .model import forward

        if self.pooling == "rank":
            raise LlamayError(f"{model.name} is a reranker (rank pooling): it scores query-document pairs "
                              "(scores), it has no embeddings")  # fmt: skip
        if self.pooling == "none":
            raise LlamayError(f"{model.name} has no pooling (pooling_type none): it gives one embedding per token "
                              "(embed_tokens), not one per text")  # fmt: skip
        out = []
        for ids in inputs:
            if len(ids) > st.n_ctx:
                raise LlamayError(f"text of {len(ids)} tokens exceeds the model's context of {st.n_ctx}")
            st.kv.reset(0)
            forward(model, st, list(ids), outputs=())
            out.append(model.backend.read_f32(st.scratch.pooled, 0, model.cfg.n_embd))
        st.kv.reset(0)
        return out
