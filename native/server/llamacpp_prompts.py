"""What llama-server's routes build from a request and give back, apart from HTTP: prompts (text, token ids, both
mixed, several), the fill-in-the-middle prompt of `/infill`, `generation_settings`, `timings`, and
`completion_probabilities`. Called on preparation threads where they tokenize."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

from llamay.sampling import SamplerConfig, request

from .errors import bad_request
from .limits import MAX_BATCH

# SamplerConfig's names as llama-server writes them in generation_settings
SETTING_NAMES = {"temp": "temperature", "typ_p": "typical_p"}
RANDOM_SEED = 0xFFFFFFFF  # llama.cpp's LLAMA_DEFAULT_SEED: how it reports "a random seed"
HIDDEN_SETTINGS = ("seed", "logit_bias")  # written on their own
SNIPPET = "\n\n--- snippet ---\n\n"  # between /infill's extra chunks when the model has no FIM_SEP token
REPO_NAME = "myproject\n"  # llama-server's repository line of the repo-level FIM pattern
FILE_NAME = "filename\n"  # and its name for the file being completed


# -- prompts --------------------------------------------------------------------------------------------------


def _is_id(x: Any) -> bool:
    return type(x) is int


def split_prompts(value: Any, param: str = "prompt") -> list[list[int | str]]:
    """The prompts of a request, each a list of pieces (token ids and texts), as llama-server tells them apart: a
    text, a list of ids, or a list mixing ids and texts is one prompt; any other list is a list of prompts."""
    if isinstance(value, str):
        return [[value]]
    if not isinstance(value, list) or not value:
        raise bad_request(f"{param} is a text, token ids, or a list of those; got an empty or other value", param)
    has_id = any(_is_id(x) for x in value)
    if has_id and all(_is_id(x) or isinstance(x, str) for x in value):
        return [list(value)]
    if len(value) > MAX_BATCH:
        raise bad_request(f"at most {MAX_BATCH} prompts per request (max_batch), got {len(value)}", param)
    out: list[list[int | str]] = []
    for i, p in enumerate(value):
        if isinstance(p, str):
            out.append([p])
        elif isinstance(p, list) and p and all(_is_id(x) or isinstance(x, str) for x in p):
            out.append(list(p))
        else:
            raise bad_request(f"{param}[{i}] is a text or a non-empty list of token ids and texts", param)
    return out


def tokenize_mixed(service: Any, pieces: list[int | str], add_special: bool = True, param: str = "prompt",
                   parse_special: bool = True) -> list[int]:  # fmt: skip
    """One prompt's token ids: texts tokenized (the BOS only before a first piece that is text, as llama-server
    does), ids taken as given and checked against the vocabulary."""
    tok = service.tokenizer
    service.check_chars(sum(len(p) for p in pieces if isinstance(p, str)), param)
    ids: list[int] = []
    for i, p in enumerate(pieces):
        if isinstance(p, str):
            ids += tok.encode(p, add_special=add_special and i == 0, parse_special=parse_special)
        else:
            ids.append(p)
    return service.check_ids(ids, param)


def prompt_ids(service: Any, value: Any, param: str = "prompt") -> list[list[int]]:
    return [tokenize_mixed(service, pieces, param=param) for pieces in split_prompts(value, param)]


# -- /infill --------------------------------------------------------------------------------------------------


def fim_ids(service: Any, prefix: str, suffix: str, extra: list[Any], prompt: Any) -> list[int]:
    """/infill's prompt from the GGUF's FIM tokens, in llama-server's order (its code's, which its README
    simplifies): [extra] [BOS] FIM_PRE prefix prompt FIM_SUF suffix FIM_MID; the extra chunks in the repo-level
    pattern (FIM_REP myproject, FIM_SEP filename, text..., FIM_SEP filename) when the model has FIM_REP and
    FIM_SEP, else each after a snippet line. Nothing is cut to fit (llama-server drops the oldest extra tokens
    and the prefix's start): a prompt past the context is refused."""
    tok = service.tokenizer
    ids = tok.vocab.ids
    pre, suf, mid = ids.get("fim_pre"), ids.get("fim_suf"), ids.get("fim_mid")
    if pre is None or suf is None or mid is None:
        missing = [n for n, t in (("FIM_PRE", pre), ("FIM_SUF", suf), ("FIM_MID", mid)) if t is None]
        raise bad_request(f"{service.generator.id} has no fill-in-the-middle tokens ({', '.join(missing)} missing "
                          "from its GGUF): /infill needs a code model with them", "input_prefix",
                          "fim_not_supported")  # fmt: skip
    rep, sep = ids.get("fim_rep"), ids.get("fim_sep")
    service.check_chars(len(prefix) + len(suffix) + sum(len(c.filename) + len(c.text) for c in extra), "input_prefix")

    def text(s: str) -> list[int]:
        return tok.encode(s, add_special=False, parse_special=False)

    out: list[int] = []
    if rep is not None and sep is not None:
        out += [rep, *text(REPO_NAME)]
    for chunk in extra:
        if sep is not None:
            out += [sep, *text((chunk.filename or "tmp") + "\n")]
        else:
            out += text(SNIPPET)
        out += text(chunk.text)
    if sep is not None:
        out += [sep, *text(FILE_NAME)]
    if tok.vocab.add_bos and tok.bos_id is not None:
        out.append(tok.bos_id)
    out += [pre, *text(prefix)]
    if prompt:
        for pieces in split_prompts(prompt):
            out += tokenize_mixed(service, pieces, add_special=False)
    out += [suf, *text(suffix), mid]
    return service.check_ids(out, "input_prefix")


# -- what comes back ------------------------------------------------------------------------------------------


def generation_settings(sampling: dict[str, Any], seed: int | None, *, n_predict: int, stop: tuple[str, ...],
                        n_ctx: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """llama-server's `generation_settings`: the sampler's settings by llama.cpp's names (the request's over the
    defaults), with n_predict, the seed and the stop strings."""
    cfg = request.config_for(sampling, seed)
    out: dict[str, Any] = {"n_ctx": n_ctx, "n_predict": n_predict, "max_tokens": n_predict, "n_discard": 0}
    out["seed"] = cfg.seed if cfg.seed is not None else RANDOM_SEED
    for f in dataclasses.fields(SamplerConfig):
        if f.name in HIDDEN_SETTINGS:
            continue
        value = getattr(cfg, f.name)
        out[SETTING_NAMES.get(f.name, f.name)] = list(value) if isinstance(value, tuple) else value
    out["logit_bias"] = [[t, None if math.isinf(b) else b] for t, b in cfg.logit_bias]
    out["stop"] = list(stop)
    return {**out, **(extra or {})}


def timings(job: Any, n_predicted: int, now: float | None = None) -> dict[str, Any]:
    """llama-server's `timings` of one job: prompt tokens computed (cache_n reused) and their time, tokens
    predicted and theirs (milliseconds; per token and per second)."""
    end = job.t_done or now or time.monotonic()
    first = job.t_first or end
    admit = job.t_admit or first
    prompt_n = max(len(job.prompt) - job.cached_tokens, 0)
    prompt_ms = max(first - admit, 0.0) * 1e3
    predicted_ms = max(end - first, 0.0) * 1e3
    return {
        "cache_n": job.cached_tokens,
        "prompt_n": prompt_n,
        "prompt_ms": prompt_ms,
        "prompt_per_token_ms": prompt_ms / prompt_n if prompt_n else 0.0,
        "prompt_per_second": 1e3 * prompt_n / prompt_ms if prompt_ms > 0 else 0.0,
        "predicted_n": n_predicted,
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": predicted_ms / n_predicted if n_predicted else 0.0,
        "predicted_per_second": 1e3 * n_predicted / predicted_ms if predicted_ms > 0 else 0.0,
    }


def _token(tok: Any, t: int, lp: float) -> dict[str, Any]:
    data = tok.token_bytes(t)
    return {"id": t, "token": data.decode("utf-8", "replace"), "bytes": list(data), "logprob": lp}


def probabilities(tok: Any, lps: list[tuple[int, float, Any]]) -> list[dict[str, Any]]:
    """`completion_probabilities`: per generated token its id, text, bytes, logprob and the top ones'."""
    return [{**_token(tok, t, lp), "top_logprobs": [_token(tok, u, v) for u, v in top]} for t, lp, top in lps]


def stop_word(raw: str, stops: tuple[str, ...]) -> str:
    """The stop string that ended `raw` (the decoded reply with what followed): the earliest found."""
    found = [(raw.find(s), i) for i, s in enumerate(stops) if s in raw]
    return stops[min(found)[1]] if found else ""


def pick_fields(body: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    """llama-server's `response_fields`: only those fields; `a/b` takes b out of a, under the name b."""
    if fields is None:
        return body
    out = {}
    for name in fields:
        value: Any = body
        for part in name.split("/"):
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
        if value is not _MISSING:
            out[name.split("/")[-1]] = value
    return out


_MISSING = object()
