"""llama-server's own routes: `/completion` (and `/completions`), `/infill`, `/apply-template`, `/embedding`,
`/rerank`, answered in llama-server's shapes (its README's fields) over the same machinery as the OpenAI routes:
the same prompt checks, sampler validation (llama.cpp's field names), constraint engine, scheduler and prefix
cache. `/props` and `/slots` are in `llamacpp_slots.py`.

A request's fields are each honoured or refused by name: the sampling ones go through the core's "llamacpp"
table; fields llama-server has but that mean nothing here take only their neutral value; any other is a 400.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request

from llamay.sampling import request as sampling_request
from llamay.sampling.request import RequestFieldError, sampling_from_request

from .bodies import StrictJsonRoute
from .context_store import Context
from .contexts import _adopt, _discard, _settled
from .deps import PoolDep, ServiceDep
from .errors import ApiError, bad_request
from .llamacpp_prompts import (
    fim_ids,
    generation_settings,
    pick_fields,
    probabilities,
    prompt_ids,
    stop_word,
    timings,
)
from .llamacpp_schemas import (
    MAX_N_PROBS,
    ApplyTemplateBody,
    CompletionBody,
    InfillBody,
    NativeEmbeddingBody,
    RerankBody,
)
from .params import GenParams, refused
from .scheduler import Pin
from .service import Service
from .streaming import Generation, check_room, sse, sse_response
from .tools import message_dicts, plan_for

router = APIRouter(tags=["llama.cpp"], route_class=StrictJsonRoute)
SAMPLING = frozenset(sampling_request.accepted("llamacpp")) - {"n_predict", "n_probs"}  # read from the body
STOP_TYPES = {"length": "limit", "stop": "eos"}  # finish -> llama-server's stop_type ("word": a stop string)
SLOT_CONTEXT = "slot-{}"  # the named context that holds a slot's prompt cache


def slot_name(i: int) -> str:
    return SLOT_CONTEXT.format(i)


# -- request fields -------------------------------------------------------------------------------------------


def native_params(body: CompletionBody, service: Service) -> GenParams:
    """The generation parameters of a /completion body; a 400 naming the first field that cannot be honoured."""
    fields = {name: getattr(body, name) for name in SAMPLING if name in type(body).model_fields}
    try:
        got = sampling_from_request(fields, "llamacpp", service.tokenizer.n_vocab)
    except RequestFieldError as e:
        raise refused(e) from None
    sampling = dict(got.sampling)
    alias = sampling.pop("n_probs", 0)  # top_logprobs / logprobs: llama.cpp's other names of n_probs
    n_probs = body.n_probs or alias
    if n_probs > MAX_N_PROBS:
        raise bad_request(f"n_probs is {n_probs}; at most {MAX_N_PROBS}", "n_probs")
    if body.json_schema is not None and body.grammar:
        raise bad_request("give either grammar or json_schema", "json_schema", "conflicting_fields")
    fmt = {"type": "json_schema", "json_schema": {"schema": body.json_schema}} if body.json_schema is not None else None
    return GenParams(max_tokens=None, sampling=sampling, seed=got.seed, stop=got.stop, n=body.n_cmpl,
                     logprobs=n_probs or None, response_format=fmt, grammar=body.grammar,
                     format_field="json_schema")  # fmt: skip


def n_predict(body: CompletionBody) -> int:
    """n_predict (or max_tokens), -1 when not given: until the context is full."""
    if body.n_predict is not None:
        return body.n_predict
    return body.max_tokens if body.max_tokens is not None else -1


def check_slot(body: CompletionBody, service: Service, n_sequences: int) -> int | None:
    if body.id_slot < 0:
        return None
    n_slots = service.scheduler.cfg.n_seq
    if body.id_slot >= n_slots:
        raise bad_request(f"id_slot {body.id_slot} does not exist: the server has {n_slots} slots (--parallel)",
                          "id_slot", "invalid_slot")  # fmt: skip
    if n_sequences != 1:
        raise bad_request("id_slot takes one prompt and n_cmpl 1 (a slot holds one prompt cache)", "id_slot",
                          "conflicting_fields")  # fmt: skip
    return body.id_slot


# -- /completion ----------------------------------------------------------------------------------------------


class Native:
    """One /completion (or /infill) request: its generation and how its results are written."""

    def __init__(self, service: Service, model: str, body: CompletionBody, prompts: list[list[int]],
                 params: GenParams, slot: int | None) -> None:  # fmt: skip
        self.service, self.body, self.prompts, self.params, self.slot = service, body, prompts, params, slot
        self.n_predict = n_predict(body)
        self.model = model
        self.gen: Generation | None = None

    async def start(self) -> Native:
        s = self.service
        limit = None if self.n_predict < 0 else self.n_predict
        budgets = [s.budget(p, limit, "n_predict") for p in self.prompts]
        pin = None
        if self.slot is not None and slot_name(self.slot) in s.contexts.items:
            pin = s.contexts.items[slot_name(self.slot)].pin  # its pages offered to the prefix cache
        self.gen = await Generation.create(s, self.prompts, self.params, budgets, keep=self.slot is not None,
                                           pin=pin, reuse_cache=self.body.cache_prompt)  # fmt: skip
        self.gen.start()
        return self

    def settings(self) -> dict[str, Any]:
        p, b = self.params, self.body
        extra = {"model": self.model, "stream": b.stream, "n_probs": b.n_probs, "n_keep": b.n_keep,
                 "grammar": b.grammar or "", "timings_per_token": b.timings_per_token, "post_sampling_probs": False,
                 "cache_prompt": b.cache_prompt, "n_cmpl": b.n_cmpl, "lora": []}  # fmt: skip
        return generation_settings(p.sampling, p.seed, n_predict=self.n_predict, stop=p.stop,
                                   n_ctx=self.service.n_ctx, extra=extra)  # fmt: skip

    def result(self, i: int, stream: bool = False) -> dict[str, Any]:
        gen = self.gen
        assert gen is not None
        ch, tok = gen.choices[i], self.service.tokenizer
        prompt = self.prompts[i // self.params.n]
        stop_type = "word" if ch.matcher.stopped else STOP_TYPES.get(ch.finish or "", "none")
        truncated = stop_type == "limit" and (self.n_predict < 0 or len(ch.tokens) < self.n_predict)
        out: dict[str, Any] = {
            "index": i,
            "content": "" if stream else gen.text(i),
            "tokens": [] if stream or not self.body.return_tokens else list(ch.tokens),
            "id_slot": self.slot if self.slot is not None else -1,
            "stop": True,
            "model": self.model,
            "tokens_predicted": len(ch.tokens),
            "tokens_evaluated": len(prompt),
            "generation_settings": self.settings(),
            "prompt": tok.decode(prompt, special=True),
            "has_new_line": "\n" in gen.text(i),
            "truncated": truncated,
            "stop_type": stop_type,
            "stopping_word": stop_word(tok.decode(ch.tokens), self.params.stop) if stop_type == "word" else "",
            # what the sequence's cache holds at the end (the last token is never fed back), as llama-server counts
            "tokens_cached": len(prompt) + max(len(ch.tokens) - 1, 0),
            "timings": timings(ch.job, len(ch.tokens)),
        }
        if self.params.logprobs and not stream:  # a stream sent them with each chunk
            out["completion_probabilities"] = probabilities(tok, ch.logprobs)
        return pick_fields(out, self.body.response_fields)

    async def keep_slot(self) -> None:
        """The slot's prompt cache becomes this request's (prompt and reply), once the model thread has let go."""
        gen = self.gen
        if self.slot is None or gen is None:
            return
        await _settled(self.service)
        ch = gen.choices[0]
        if ch.job.kept is None:
            return
        if ch.finish == "cancelled":
            _discard(self.service, ch.job)
            return
        ctx = Context(slot_name(self.slot), self.prompts[0] + ch.tokens, Pin(_adopt(ch.job), self.service.scheduler),
                      int(time.time()))  # fmt: skip
        self.service.contexts.put(ctx)
        self.service.slot_params[self.slot] = self.settings()

    async def chunks(self) -> AsyncIterator[dict[str, Any]]:
        """llama-server's stream: a chunk per piece of text (its tokens, probabilities, and timings when asked),
        then each completion's full result with `stop: true`."""
        gen = self.gen
        assert gen is not None
        tok, n = self.service.tokenizer, self.params.n
        held: dict[int, list[Any]] = {i: [] for i in range(len(gen.choices))}  # tokens whose text is not out yet
        async for piece in gen.pieces():
            if piece.token is not None:
                held[piece.index].append((piece.token, piece.logprob, piece.top))
            if piece.text:
                ch = gen.choices[piece.index]
                items = held[piece.index]
                chunk: dict[str, Any] = {"index": piece.index, "content": piece.text,
                                         "tokens": [t for t, _, _ in items], "stop": False,
                                         "id_slot": self.slot if self.slot is not None else -1,
                                         "tokens_predicted": len(ch.tokens),
                                         "tokens_evaluated": len(self.prompts[piece.index // n])}  # fmt: skip
                if self.params.logprobs:
                    chunk["completion_probabilities"] = probabilities(tok, [x for x in items if x[1] is not None])
                if self.body.timings_per_token:
                    chunk["timings"] = timings(ch.job, len(ch.tokens), time.monotonic())
                held[piece.index] = []
                yield chunk
            if piece.finish is not None:
                await asyncio.sleep(0)
                yield self.result(piece.index, stream=True)
        await self.keep_slot()

    def discard(self) -> None:
        """Drop what the slot's job kept unless the slot took it (`keep_slot`): a reply not sent to its end."""
        if self.slot is not None and self.gen is not None:
            _discard(self.service, self.gen.choices[0].job)


async def native_stream(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    """SSE frames (`data: {...}`) as llama-server streams /completion: no `[DONE]`; an error after the headers
    went out is an `{"error": ...}` event."""
    try:
        async for event in events:
            yield sse(event)
    except ApiError as e:
        yield sse(e.body())


async def run_native(native: Native, request: Request) -> Any:
    await native.start()
    gen = native.gen
    assert gen is not None
    if native.body.stream:
        return sse_response(native_stream(native.chunks()), gen, native.discard)
    try:
        await gen.collect(request.is_disconnected)
        await native.keep_slot()
    except BaseException:
        native.discard()
        raise
    results = [native.result(i) for i in range(len(gen.choices))]
    return results[0] if len(results) == 1 else results


@router.post("/completion", summary="llama-server's completion: its fields, its response (SSE with stream)",
             responses={200: {"content": {"text/event-stream": {}}}})  # fmt: skip
async def completion(body: CompletionBody, request: Request, service: ServiceDep, pool: PoolDep) -> Any:
    model = (await pool.resident_only(body.model, "generate")).id
    check_room(service, body.n_cmpl)  # before the prompt is tokenized
    params = native_params(body, service)
    prompts = await service.offload(prompt_ids, service, body.prompt)
    slot = check_slot(body, service, len(prompts) * params.n)
    return await run_native(Native(service, model, body, prompts, params, slot), request)


router.add_api_route("/completions", completion, methods=["POST"], include_in_schema=False)


@router.post("/infill", summary="Code infill from the model's fill-in-the-middle tokens (as /completion answers)",
             responses={200: {"content": {"text/event-stream": {}}}})  # fmt: skip
async def infill(body: InfillBody, request: Request, service: ServiceDep, pool: PoolDep) -> Any:
    model = (await pool.resident_only(body.model, "generate")).id
    check_room(service, body.n_cmpl)  # before the prompt is tokenized
    params = native_params(body, service)
    ids = await service.offload(fim_ids, service, body.input_prefix, body.input_suffix, body.input_extra,
                                body.prompt)  # fmt: skip
    slot = check_slot(body, service, params.n)
    return await run_native(Native(service, model, body, [ids], params, slot), request)


# -- /apply-template ------------------------------------------------------------------------------------------


@router.post("/apply-template", summary="The chat template applied to messages: the prompt /completion takes")
async def apply_template(body: ApplyTemplateBody, service: ServiceDep, pool: PoolDep) -> dict[str, Any]:
    await pool.resident_only(body.model, "generate")
    # the tools go in as the chat route puts them: the template's own syntax, or the generic format's system text
    plan = plan_for(service.chat_template, body.tools)
    return {"prompt": await service.offload(service.chat_text, message_dicts(body.messages), plan,
                                            body.add_generation_prompt)}  # fmt: skip


# -- /embedding -----------------------------------------------------------------------------------------------


def normalize(v: list[float], p: int) -> list[float]:
    """llama.cpp's embd_normalize: -1 none, 0 max-abs (scaled to int16's range), 1 taxicab, 2 L2, >2 p-norm."""
    if p < 0:
        return v
    if p == 0:
        norm = max((abs(x) for x in v), default=0.0) / 32760.0
    elif p == 2:
        norm = math.sqrt(sum(x * x for x in v))
    else:
        norm = sum(abs(x) ** p for x in v) ** (1.0 / p)
    return [x / norm for x in v] if norm > 0 else [0.0 for _ in v]


@router.post("/embedding", summary="llama-server's embedding: [{index, embedding: [[...]]}] (encoder models)")
async def embedding(body: NativeEmbeddingBody, service: ServiceDep, pool: PoolDep) -> list[dict[str, Any]]:
    await pool.resident_only(body.model, "embed")
    value = body.content if body.content is not None else body.input
    if value is None:
        raise bad_request("content (or input) is required", "content")
    # a text, texts, token ids, or lists of them (the schema made sure of which)
    inputs: list[Any] = [value] if isinstance(value, str) or (value and isinstance(value[0], int)) else list(value)
    engine = service.embed_engine
    if engine is not None and engine.pooling == "none":  # llama-server: every token's state, not normalised
        _model, states, _n = await service.embed(body.model, inputs, per_token=True)
        return [{"index": i, "embedding": s} for i, s in enumerate(states)]
    if body.embd_normalize < 0:
        raise bad_request("embd_normalize -1 (no normalization): the served encoder's pooled output is "
                          "L2-normalised before it leaves the model", "embd_normalize")  # fmt: skip
    _model, vectors, _n = await service.embed(body.model, inputs)
    # every norm is scale-free: normalising the L2-normalised vector gives the raw one's normalisation
    return [{"index": i, "embedding": [normalize(v, body.embd_normalize)]} for i, v in enumerate(vectors)]


# -- /rerank --------------------------------------------------------------------------------------------------


async def rerank(body: RerankBody, service: ServiceDep, pool: PoolDep) -> dict[str, Any]:
    """llama-server's rerank: each document's relevance score (the reranker's raw output), best first, the
    first top_n."""
    await pool.resident_only(body.model, "rerank")
    model, scores, n_tokens = await service.rerank(body.model, body.query, body.documents)
    results = sorted(({"index": i, "relevance_score": s} for i, s in enumerate(scores)),
                     key=lambda r: -r["relevance_score"])  # fmt: skip
    return {"model": model.id, "object": "list", "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens},
            "results": results[: body.top_n] if body.top_n else results}  # fmt: skip


for _path in ("/rerank", "/reranking", "/v1/rerank", "/v1/reranking"):
    router.add_api_route(_path, rerank, methods=["POST"], include_in_schema=_path == "/rerank",
                         summary="Rerank documents against a query (reranker models)")  # fmt: skip
