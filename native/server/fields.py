"""Every request field of the APIs the server speaks, as data: what each body may hold and what becomes of it.

One table per request body (and per object inside one: a chat message, Ollama's `options`), each field with
where it is documented (`openai`, `ollama`, `llama.cpp`: llama-server's extension on the OpenAI routes, `llamay`:
this server's own) and its status here:

- "yes": honoured;
- "noop": accepted, with no effect here, and `why` says why that is its meaning (an end-user id for OpenAI's
  abuse monitoring, a GPU layer count);
- "value": accepted only at the values that describe what happens here anyway (`store: false`); any other is
  a 400 naming the field and saying why;
- "no": documented by its API but not supported: a 400 naming it and saying why (null is taken as absent).

A field in no table is a 400 `unknown_field` naming it, on every route. That is OpenAI's answer ("Unrecognized
request argument supplied"); llama-server and Ollama ignore unknown fields (Go and nlohmann's JSON readers drop
them; Ollama logs "invalid option provided" for an unknown option), which is exactly the silent ignoring that
made a client believe a setting took effect, so here every API refuses them by name.

`check` walks a request body against its table before pydantic sees it (`schemas._Checked`); docs/server.md's
field table is checked against these tables by tests/server/test_fields.py, so the two cannot drift.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .errors import bad_request

Status = Literal["yes", "noop", "value", "no"]
Source = Literal["openai", "ollama", "llama.cpp", "llamay"]


@dataclass(frozen=True)
class F:
    status: Status = "yes"
    src: Source = "openai"
    why: str = ""
    values: tuple[Any, ...] = ()  # "value": the values accepted
    sub: str | None = None  # the table of the object (or of each item of the list) this field holds


def yes(src: Source = "openai", why: str = "", sub: str | None = None) -> F:
    return F("yes", src, why, sub=sub)


def noop(why: str, src: Source = "openai") -> F:
    return F("noop", src, why)


def only(values: tuple[Any, ...], why: str, src: Source = "openai") -> F:
    return F("value", src, why, values)


def no(why: str, src: Source = "openai") -> F:
    return F("no", src, why)


KEEP_ALIVE = yes(
    "ollama",
    "serving the store: how long the model stays loaded after the request (0 unloads it); "
    "the -m model stays for the server's lifetime (0 refused)",
)
NO_STORE = "nothing is stored here: a reply lives only in its response"
EMBED_OPTIONS = F(
    "value",
    "ollama",
    "an embedding reads none of them (the sampling ones mean nothing there; the encoder's context is its own)",
    ({},),
)
TEXT_ONLY = "the served models read and write text only"
NO_HOSTED_TOOLS = "no hosted tools (web search, file search, code interpreter) here"

# the sampling fields llama-server takes on its OpenAI routes (its names), honoured on llamay's too
LLAMACPP_SAMPLING = (
    "top_k", "min_p", "typical_p", "repeat_penalty", "repeat_last_n", "dry_multiplier", "dry_base",
    "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers", "xtc_probability", "xtc_threshold",
    "mirostat", "mirostat_tau", "mirostat_eta", "dynatemp_range", "dynatemp_exponent", "top_n_sigma", "min_keep",
)  # fmt: skip
# llama-server's other request fields on its OpenAI routes, not (yet) served here: refused by name, but for
# the value that asks for what happens here anyway (its clients send their defaults: `cache_prompt: true`)
LLAMACPP_NEUTRAL: dict[str, tuple[tuple[Any, ...], str]] = {
    "cache_prompt": ((True,), "the prefix cache is always on"),
    "id_slot": ((-1,), "slots are not addressable here: -1 (any) only"),
    "n_probs": ((0,), "use logprobs / top_logprobs"),
    "ignore_eos": ((False,), "generation always stops at the end-of-generation token"),
    "return_tokens": ((False,), "token ids are not returned on these routes"),
    "post_sampling_probs": ((False,), "probabilities are before sampling"),
    "add_generation_prompt": ((True,), "the generation prompt is always added"),
    "parse_tool_calls": ((True,), "tool calls are parsed whenever tools are given"),
    "n_cmpl": ((1,), "use n"),
    "lora": (([],), "no LoRA adapters"),
}
LLAMACPP_NOT_YET = {
    "grammar": "a GBNF grammar (use response_format json_schema)",
    "json_schema": "llama-server's top-level schema (use response_format json_schema)",
    "samplers": "the sampler order is llama.cpp's default",
    "n_discard": "no context shift during generation (give truncation for an over-long prompt)",
    "t_max_predict_ms": "no time budget for a reply (--timeout bounds the request)",
    "n_indent": "no indentation stop",
    "chat_template_kwargs": "the template's variables are not settable",
    "reasoning_format": "reasoning is not split out on these routes",
}

SAMPLING_OPENAI = {
    "temperature": yes(), "top_p": yes(), "presence_penalty": yes(), "frequency_penalty": yes(),
    "seed": yes(), "stop": yes(), "logit_bias": yes(), "n": yes(),
    **{name: yes("llama.cpp") for name in LLAMACPP_SAMPLING},
    **{name: no(f"llama-server's field: {why}", "llama.cpp") for name, why in LLAMACPP_NOT_YET.items()},
    **{name: only(values, f"llama-server's field: {why}", "llama.cpp")
       for name, (values, why) in LLAMACPP_NEUTRAL.items()},
    "timings_per_token": yes("llama.cpp", "llama-server's timings in every stream chunk"),
    "n_keep": yes("llama.cpp", "with truncation: the prompt's first tokens kept (llama-server's n_keep)"),
    "truncation": yes("llamay", "'auto': an over-long prompt keeps its end (and n_keep first tokens); default "
                      "'disabled': refused"),
}  # fmt: skip

# fmt: off
TABLES: dict[str, dict[str, F]] = {
    "openai.chat": {
        "model": yes(), "messages": yes(sub="openai.message"), "stream": yes(),
        "stream_options": yes(sub="openai.stream_options"), "max_tokens": yes(), "max_completion_tokens": yes(),
        "logprobs": yes(), "top_logprobs": yes(), "response_format": yes(sub="openai.response_format"),
        "tools": yes(sub="openai.tool"), "tool_choice": yes(), "parallel_tool_calls": yes(),
        **SAMPLING_OPENAI,
        "user": noop("an end-user id for OpenAI's abuse monitoring: nothing reads it here"),
        "safety_identifier": noop("an end-user id for OpenAI's abuse monitoring: nothing reads it here"),
        "prompt_cache_key": noop("the prefix cache is automatic and shared by every request"),
        "metadata": noop("tags of a stored completion: " + NO_STORE),
        "store": only((False,), NO_STORE),
        "service_tier": only(("auto", "default"), "one tier here"),
        "modalities": only((["text"],), TEXT_ONLY),
        "audio": no(TEXT_ONLY),
        "prediction": no("predicted outputs (a known reply to speed up) are not implemented"),
        "reasoning_effort": no("no reasoning budget here"),
        "verbosity": no("no verbosity control here"),
        "web_search_options": no(NO_HOSTED_TOOLS),
        "functions": yes(why="the deprecated functions API, read as tools"),
        "function_call": yes(why="the deprecated functions API, read as tool_choice"),
    },
    "openai.message": {
        "role": yes(), "content": yes(sub="openai.content_part"), "name": yes(), "tool_calls": yes(),
        "tool_call_id": yes(), "reasoning_content": yes("llama.cpp", "passed to the chat template"),
        "refusal": noop("a refusal of an earlier reply: chat templates do not render it"),
        "audio": no(TEXT_ONLY), "function_call": no("the deprecated functions API: send tool_calls"),
    },
    "openai.content_part": {"type": yes(), "text": yes(), "image_url": no(TEXT_ONLY), "input_audio": no(TEXT_ONLY),
                            "file": no(TEXT_ONLY)},
    "openai.stream_options": {"include_usage": yes(),
                              "include_obfuscation": only((False,), "chunks are not padded here")},
    "openai.response_format": {"type": yes(), "json_schema": yes(sub="openai.json_schema"),
                               "schema": yes("llama.cpp", "json_object with a schema, as llama-server reads it")},
    "openai.json_schema": {"name": yes(), "description": yes(), "schema": yes(),
                           "strict": noop("the reply always follows the schema (a constraint)")},
    "openai.tool": {"type": yes(), "function": yes(sub="openai.function")},
    "openai.function": {"name": yes(), "description": yes(), "parameters": yes(),
                        "strict": noop("passed on to the template; tool arguments are parsed as the model wrote them")},
    "openai.completions": {
        "model": yes(), "prompt": yes(), "stream": yes(), "stream_options": yes(sub="openai.stream_options"),
        "max_tokens": yes(), "logprobs": yes(), "echo": yes(),
        "response_format": yes("llama.cpp", sub="openai.response_format"),
        "suffix": only(("", None), "fill-in-the-middle is not supported on this route"),
        "best_of": yes(why="only equal to n: candidates are not ranked"),
        **SAMPLING_OPENAI,
        "user": noop("an end-user id for OpenAI's abuse monitoring: nothing reads it here"),
    },
    "openai.embeddings": {
        "model": yes(), "input": yes(), "encoding_format": yes(),
        "dimensions": yes(why="only the model's own size: vectors cannot be shortened"),
        "user": noop("an end-user id for OpenAI's abuse monitoring: nothing reads it here"),
    },
    "openai.responses": {
        "model": yes(), "input": yes(sub="openai.input_item"), "instructions": yes(), "max_output_tokens": yes(),
        "temperature": yes(), "top_p": yes(), "stream": yes(), "text": yes(sub="openai.text"),
        "truncation": yes(why="'auto': an over-long input keeps its end; 'disabled' (default): refused"),
        "seed": yes("llamay"), "stop": yes("llamay"), "top_k": yes("llama.cpp"), "min_p": yes("llama.cpp"),
        "user": noop("an end-user id for OpenAI's abuse monitoring: nothing reads it here"),
        "safety_identifier": noop("an end-user id for OpenAI's abuse monitoring: nothing reads it here"),
        "prompt_cache_key": noop("the prefix cache is automatic and shared by every request"),
        "metadata": noop("tags of a stored response: " + NO_STORE),
        "store": only((False,), NO_STORE + " (so previous_response_id cannot name one): send store: false"),
        "service_tier": only(("auto", "default"), "one tier here"),
        "parallel_tool_calls": only((False, True), "no tools on this route yet: nothing to call"),
        "tools": only(([],), "tools on the Responses API are not supported here (use /v1/chat/completions)"),
        "tool_choice": only(("none", "auto"), "no tools on this route"),
        "previous_response_id": no(NO_STORE), "conversation": no(NO_STORE),
        "background": no("no background responses: a response is answered while the request is open"),
        "include": no("no extra output items (reasoning, search results) here"),
        "reasoning": no("no reasoning budget here"), "max_tool_calls": no("no tools on this route"),
        "prompt": no("stored prompt templates: " + NO_STORE), "top_logprobs": no("no logprobs on this route yet"),
        "stream_options": no("no stream options on this route"),
    },
    "openai.input_item": {
        "type": only(("message",), "input items are messages here"), "role": yes(),
        "content": yes(sub="openai.input_part"), "id": noop("an item id of the client's own"),
        "status": noop("an earlier output item's status"),
    },
    "openai.input_part": {
        "type": only(("input_text", "output_text", "text"), TEXT_ONLY), "text": yes(),
        "annotations": noop("citations of an earlier reply: not rendered"), "logprobs": noop("of an earlier reply"),
    },
    "openai.text": {"format": yes(sub="openai.text_format"), "verbosity": no("no verbosity control here")},
    "openai.text_format": {"type": yes(), "name": yes(), "schema": yes(), "description": yes(),
                           "strict": noop("the reply always follows the schema (a constraint)")},
    # -- Ollama ---------------------------------------------------------------------------------------------
    "ollama.generate": {
        "model": yes("ollama"), "prompt": yes("ollama"), "system": yes("ollama"), "template": yes("ollama"),
        "context": yes("ollama"), "stream": yes("ollama"), "raw": yes("ollama"), "format": yes("ollama"),
        "options": yes("ollama", sub="ollama.options"), "think": yes("ollama", "templates that reason (<think>)"),
        "suffix": only(("", None), "fill-in-the-middle is not supported on this route", "ollama"),
        "images": only(([], None), TEXT_ONLY, "ollama"),
        "keep_alive": KEEP_ALIVE,
        "truncate": yes("ollama", "with options.num_ctx: an over-long prompt keeps num_keep and its end"),
        "shift": only((False,), "no context shift during generation: a reply ends at the context's end (done_reason "
                     "length), which is Ollama's shift: false", "ollama"),
        "logprobs": yes("ollama"), "top_logprobs": yes("ollama"),
        "debug_render_only": no("no render-only mode", "ollama"),
        "width": no("no image generation", "ollama"), "height": no("no image generation", "ollama"),
        "steps": no("no image generation", "ollama"),
    },
    "ollama.chat": {
        "model": yes("ollama"), "messages": yes("ollama", sub="ollama.message"),
        "tools": yes("ollama", sub="openai.tool"),
        "format": yes("ollama"), "stream": yes("ollama"), "options": yes("ollama", sub="ollama.options"),
        "think": yes("ollama", "templates that reason (<think>)"),
        "keep_alive": KEEP_ALIVE,
        "truncate": yes("ollama", "with options.num_ctx: an over-long prompt keeps num_keep and its end"),
        "shift": only((False,), "no context shift during generation: a reply ends at the context's end (done_reason "
                     "length), which is Ollama's shift: false", "ollama"),
        "logprobs": yes("ollama"), "top_logprobs": yes("ollama"),
        "debug_render_only": no("no render-only mode", "ollama"),
    },
    "ollama.message": {
        "role": yes("ollama"), "content": yes("ollama"), "thinking": yes("ollama", "passed to the chat template"),
        "tool_calls": yes("ollama"), "tool_name": yes("ollama", "passed to the chat template"),
        "tool_call_id": yes("ollama", "passed to the chat template"), "images": only(([], None), TEXT_ONLY, "ollama"),
    },
    "ollama.embed": {
        "model": yes("ollama"), "input": yes("ollama"), "options": EMBED_OPTIONS,
        "truncate": only((True, None), "inputs longer than the context are refused, never cut", "ollama"),
        "dimensions": no("vectors cannot be shortened", "ollama"),
        "keep_alive": KEEP_ALIVE,
    },
    "ollama.embeddings": {
        "model": yes("ollama"), "prompt": yes("ollama"), "options": EMBED_OPTIONS,
        "keep_alive": KEEP_ALIVE,
    },
    "ollama.show": {"model": yes("ollama"), "name": yes("ollama"), "verbose": yes("ollama")},
    # the store's routes (served when serving the store: `llamay serve` without -m FILE)
    "ollama.pull": {
        "model": yes("ollama"), "name": yes("ollama", "older clients' spelling of model"), "stream": yes("ollama"),
        "insecure": only((False,), "the catalogue comes from the package registry", "ollama"),
        "username": only(("", None), "the catalogue needs no login", "ollama"),
        "password": only(("", None), "the catalogue needs no login", "ollama"),
    },
    "ollama.create": {
        "model": yes("ollama"), "from": yes("ollama", "a stored model"), "files": yes("ollama", "one uploaded GGUF"),
        "template": yes("ollama"), "system": yes("ollama"), "license": yes("ollama"),
        "parameters": yes("ollama", "Ollama's names, typed as a Modelfile's"),
        "messages": yes("ollama", sub="ollama.create_message"), "stream": yes("ollama"),
        "adapters": only(({}, None), "no LoRA adapters here", "ollama"),
        "quantize": only(("", None), "import a quantised GGUF instead", "ollama"),
    },
    "ollama.create_message": {"role": yes("ollama"), "content": yes("ollama")},
    "ollama.copy": {"source": yes("ollama"), "destination": yes("ollama")},
    "ollama.delete": {"model": yes("ollama"), "name": yes("ollama", "older clients' spelling of model")},
    "ollama.options": {
        **{name: yes("ollama") for name in (
            "num_predict", "temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_last_n", "repeat_penalty",
            "presence_penalty", "frequency_penalty", "mirostat", "mirostat_eta", "mirostat_tau", "seed", "stop")},
        "num_ctx": yes("ollama", "this request's context (at most the server's -c): the prompt and reply fit in it"),
        "num_keep": yes("ollama", "tokens kept at the prompt's start when it is truncated to num_ctx"),
        "tfs_z": only((1, 1.0), "tail-free sampling is gone (from llama.cpp too): only 1 (off)", "ollama"),
        "penalize_newline": only((True,), "newlines are penalised like any token: only true", "ollama"),
        **{name: noop("the runner is set up once at start-up (llamay serve's options)", "ollama") for name in (
            "num_batch", "num_gpu", "main_gpu", "num_thread", "numa", "low_vram", "f16_kv", "vocab_only", "use_mmap",
            "use_mlock")},
        "logits_all": no("gone from Ollama", "ollama"), "embedding_only": no("gone from Ollama", "ollama"),
    },
}
# fmt: on

# the routes whose request body each top-level table is (the others are objects inside them: `sub`)
ROUTES = {
    "openai.chat": "POST /v1/chat/completions (and /chat/completions)",
    "openai.completions": "POST /v1/completions (and /completions)",
    "openai.embeddings": "POST /v1/embeddings (and /embeddings)",
    "openai.responses": "POST /v1/responses (and /responses)",
    "ollama.generate": "POST /api/generate",
    "ollama.chat": "POST /api/chat",
    "ollama.embed": "POST /api/embed",
    "ollama.embeddings": "POST /api/embeddings",
    "ollama.show": "POST /api/show",
    "ollama.pull": "POST /api/pull",
    "ollama.create": "POST /api/create",
    "ollama.copy": "POST /api/copy",
    "ollama.delete": "DELETE /api/delete",
}

# the routes of the three APIs that are not served here (404), and why (llama-server's own routes have their
# fields in llamacpp_schemas.py, which refuses unknown fields by name)
NOT_SERVED = {
    "POST /api/push": ("ollama", "models come from the package registry's catalogue (`/api/pull`), not a hub"),
    "GET /lora-adapters, POST /lora-adapters": ("llama.cpp", "no LoRA adapters here"),
    "POST /v1/messages, POST /v1/messages/count_tokens": ("llama.cpp", "Anthropic's Messages API, which "
                                                          "llama-server also speaks, is not spoken here"),
    "/v1/audio/*, /v1/images/*": ("openai", "the served models read and write text only"),
    "/v1/files, /v1/uploads, /v1/batches, /v1/fine_tuning/*, /v1/vector_stores, /v1/assistants, /v1/threads, "
    "/v1/conversations, GET/DELETE /v1/responses/{id}, /v1/chat/completions/{id}": (
        "openai", "nothing is stored here: a reply lives only in its response"),
    "/v1/moderations, /v1/realtime, /v1/evals": ("openai", "no such models here"),
}  # fmt: skip

# how an error names the API of a table (its name's first part)
API_NAMES = {"openai": "OpenAI's", "ollama": "Ollama's"}


def check(table: str, body: Any, path: str = "") -> Any:
    """`body` checked against TABLES[table] (and its nested tables): a 400 naming the first field that is
    unknown, refused, or given a value this server does not take; returns the body with refused fields that
    were null left out."""
    if not isinstance(body, dict):
        return body  # not an object: pydantic says so, naming the place
    fields = TABLES[table]
    out = body
    for name, value in body.items():
        where = f"{path}{name}"
        spec = fields.get(name)
        if spec is None:
            raise bad_request(f"{where} is not a field of {_what(table)} (unrecognized request argument)", where,
                              "unknown_field")  # fmt: skip
        if spec.status == "no":
            if value is None:
                out = {k: v for k, v in out.items() if k != name}
                continue
            raise bad_request(f"{where} is not supported here: {spec.why}", where, "unsupported_parameter")
        if spec.status == "value" and value is not None and not any(_same(value, v) for v in spec.values):
            allowed = " or ".join(json.dumps(v) for v in spec.values if v is not None)
            got = json.dumps(value)[:80]
            raise bad_request(f"{where} takes only {allowed} here, got {got}: {spec.why}", where,
                              "unsupported_value")  # fmt: skip
        if spec.sub is not None:
            if isinstance(value, list):
                new = [check(spec.sub, item, f"{where}.{i}.") for i, item in enumerate(value)]
                if any(a is not b for a, b in zip(new, value, strict=True)):
                    out = {**out, name: new}
            elif isinstance(value, dict):
                new_value = check(spec.sub, value, f"{where}.")
                if new_value is not value:
                    out = {**out, name: new_value}
    return out


def _same(a: Any, b: Any) -> bool:
    """JSON equality that keeps booleans apart from numbers (true is not 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _what(table: str) -> str:
    api, _, body = table.partition(".")
    return f"{API_NAMES.get(api, api)} {body.replace('_', ' ')} object"
