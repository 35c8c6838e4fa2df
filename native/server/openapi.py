"""The OpenAPI description, made exact for the server that publishes it, so that a request valid against it is
one this server accepts (schemathesis checks both ways):

- `model` admits any name but a model's of the other kind (with --strict-model-name: lists the models each route
  serves); token limits (`max_tokens`, `num_predict`) end at the context;
- token ids lie in the vocabulary (`x-llamay: token-id`; the embedding model's for `embed-token-id`), logit-bias
  keys are token ids written as strings;
- `dimensions` is the embedding model's; `tools` is empty when the chat template cannot take tools;
- serving the store (any `-m` but a file), names are open (any may be a stored model's) and the bounds are the
  resident model's;
- links join the context routes (create → get, fork, snapshot, continue, delete; snapshot → restore, and the
  snapshot file's get and delete), for stateful clients and tests.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from .keep_alive import ZERO_PATTERN
from .limits import MAX_STOP_CHARS, MAX_STOPS

CONTEXT = "/llamay/contexts/{name}"
# (path, method) of a route that answers a context -> the routes its answer leads to
CONTEXT_LINKS = {
    "GetContext": (CONTEXT, "get"),
    "ForkContext": (CONTEXT + "/fork", "post"),
    "SnapshotContext": (CONTEXT + "/snapshot", "post"),
    "ContinueContext": (CONTEXT + "/completions", "post"),
    "DeleteContext": (CONTEXT, "delete"),
}
RAW_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}
SNAPSHOT = "/llamay/snapshots/{snapshot}"
# the routes a snapshot's answer leads to, with their parameters
SNAPSHOT_LINKS = {
    "RestoreSnapshot": (CONTEXT + "/restore", "post", {"parameters": {"name": "$response.body#/context"},
                                                       "requestBody": {"snapshot": "$response.body#/snapshot"}}),
    "GetSnapshot": (SNAPSHOT, "get", {"parameters": {"snapshot": "$response.body#/snapshot"}}),
    "DeleteSnapshot": (SNAPSHOT, "delete", {"parameters": {"snapshot": "$response.body#/snapshot"}}),
}  # fmt: skip
GIVES_A_CONTEXT = [("/llamay/contexts", "post"), (CONTEXT + "/fork", "post"), (CONTEXT + "/restore", "post")]


def openapi(app: FastAPI, service: Any) -> dict[str, Any]:
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes,
                          tags=app.openapi_tags)  # fmt: skip
        pool = getattr(app.state, "pool", None)
        _exact(doc, service, store=bool(pool and pool.store))
        _links(doc)
        app.openapi_schema = doc
    return app.openapi_schema


def _exact(doc: dict[str, Any], service: Any, store: bool = False) -> None:
    _json_schema_names(doc)
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        (_open_model if store else _exact_model)(name, schema, service)
    n_vocab = service.tokenizer.n_vocab
    engine = service.embed_engine
    embed_vocab = min(engine.tokenizer.n_vocab, engine.model.cfg.n_vocab) if engine is not None else n_vocab
    for node in _walk(doc):
        mark = node.pop("x-llamay", None)
        if mark == "token-id":
            node["maximum"] = n_vocab - 1
        elif mark == "slot-id":  # llama-server's slots are the scheduler's sequences
            node["maximum"] = service.scheduler.cfg.n_seq - 1
        elif mark == "embd-normalize":  # -1 (none) only where the output is not normalised inside: no pooling
            node["minimum"] = -1 if engine is not None and engine.pooling == "none" else 0
        elif mark == "embed-token-id":  # the embedding model's vocabulary (none served: every request is a 400)
            node["maximum"] = embed_vocab - 1
        elif mark == "logit-bias":
            for variant in _variants(node):
                if variant.get("type") == "object":
                    (value,) = variant.pop("patternProperties").values()
                    variant["propertyNames"] = {"pattern": f"^(?:{int_range_pattern(n_vocab - 1)})$"}
                    variant["additionalProperties"] = value


def _json_schema_names(doc: dict[str, Any]) -> None:
    """pydantic writes `ge`, `le` as they are where a validator wraps the type (our JSON integer): rename them."""
    for node in _walk(doc):
        if node.get("type") in ("integer", "number"):
            for raw, name in RAW_BOUNDS.items():
                if raw in node:
                    node[name] = node.pop(raw)


def _open_model(name: str, schema: dict[str, Any], service: Any) -> None:
    """Serving the store: any name may be a stored model's (names left open), the bounds are the resident's."""
    props = schema.get("properties", {})
    (props.get("model") or {}).pop("x-llamay", None)
    for key in ("max_tokens", "max_completion_tokens", "num_predict"):
        _bound(props.get(key), service.n_ctx)


def _exact_model(name: str, schema: dict[str, Any], service: Any) -> None:
    """One request model's fields, bounded by what this server has loaded."""
    props = schema.get("properties", {})

    def names(kinds: tuple[str, ...]) -> list[str]:
        return sorted({n for m in service.models if m.kind in kinds for n in (m.id, *m.aliases)})

    kinds = ("embed",) if "Embed" in name else ("generate", "embed") if "Show" in name else ("generate",)
    optional_name = (props.get("model") or {}).pop("x-llamay", None) == "model-name"
    if service.strict_names or "Show" in name:  # only the served names (a lookup always)
        for key in ("model", "name") if "Show" in name else ("model",):
            _enum(props.get(key), names(kinds))
        if optional_name:  # --strict-model-name: required as well
            schema["required"] = sorted({*schema.get("required", ()), "model"})
    else:  # any name but one of a model of the other kind (Service.resolve)
        others = names(tuple({"generate", "embed"} - set(kinds)))
        for variant in _variants(props.get("model")):
            if variant.get("type") == "string" and others:
                variant["not"] = {"enum": others}
    for key in ("max_tokens", "max_completion_tokens", "num_predict", "n_predict"):
        _bound(props.get(key), service.n_ctx)
    if "dimensions" in props and service.embed_engine is not None:
        dim = service.embedder.model.cfg.n_embd
        _bound(props["dimensions"], dim, dim)
    if "stop" in props:
        _stop_limits(props["stop"])
    if "keep_alive" in props:
        _not_zero(props["keep_alive"])


def _not_zero(prop: dict[str, Any]) -> None:
    """The one model stays loaded: a keep_alive of zero is refused (pool.ModelPool._take)."""
    for variant in _variants(prop):
        if variant.get("type") == "string":
            variant["not"] = {"pattern": ZERO_PATTERN}
        elif variant.get("type") == "number":
            variant["not"] = {"const": 0}


def _stop_limits(prop: dict[str, Any]) -> None:
    """llamay.sampling.request.stops' limits, which it checks itself (its 400s name them)."""
    for variant in _variants(prop):
        if variant.get("type") == "string":
            variant["maxLength"] = MAX_STOP_CHARS
        elif variant.get("type") == "array":
            variant["maxItems"] = MAX_STOPS
            variant.setdefault("items", {})["maxLength"] = MAX_STOP_CHARS


def _links(doc: dict[str, Any]) -> None:
    paths = doc.get("paths", {})
    ids = {name: paths[p][m]["operationId"] for name, (p, m) in CONTEXT_LINKS.items() if m in paths.get(p, {})}
    for path, method in GIVES_A_CONTEXT:
        op = paths.get(path, {}).get(method)
        if op is None:
            continue
        links = {
            name: {"operationId": oid, "parameters": {"name": "$response.body#/name"}} for name, oid in ids.items()
        }
        op["responses"]["200"]["links"] = links
    snapshot = paths.get(CONTEXT + "/snapshot", {}).get("post")
    if snapshot is not None:
        snapshot["responses"]["200"]["links"] = {
            name: {"operationId": paths[p][m]["operationId"], **how}
            for name, (p, m, how) in SNAPSHOT_LINKS.items()
            if m in paths.get(p, {})
        }


def int_range_pattern(hi: int) -> str:
    """A regular expression (alternatives, no anchors) matching the decimal integers 0..hi, no leading zeros."""
    top = str(hi)
    parts = ["[0-9]" if len(top) > 1 else f"[0-{top}]"]
    parts += [f"[1-9][0-9]{{{d - 1}}}" for d in range(2, len(top))]
    if len(top) > 1:
        for i, digit in enumerate(top):
            lo = 1 if i == 0 else 0
            if int(digit) > lo:
                rest = len(top) - i - 1
                parts.append(f"{top[:i]}[{lo}-{int(digit) - 1}]" + (f"[0-9]{{{rest}}}" if rest else ""))
        parts.append(top)
    return "|".join(parts)


def _variants(prop: dict[str, Any] | None) -> list[dict[str, Any]]:
    return (prop or {}).get("anyOf", [prop] if prop else [])


def _walk(node: Any):
    """Every dict inside a JSON document."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _enum(prop: dict[str, Any] | None, values: list[str]) -> None:
    for variant in _variants(prop):
        if variant.get("type") == "string" and values:
            variant["enum"] = values


def _bound(prop: dict[str, Any] | None, hi: int, lo: int | None = None) -> None:
    for variant in _variants(prop):
        if variant.get("type") == "integer":
            variant["maximum"] = hi
            if lo is not None:
                variant["minimum"] = lo
