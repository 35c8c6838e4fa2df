"""Every request field is honoured or refused by name: the field tables (native/server/fields.py) against the
request models, against real requests (plain HTTP, the `openai` client's `extra_body`, the `ollama` client),
and against docs/server.md's table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.server.conftest import STORIES_ID
from tests.server.test_bad_input import error_of

pytestmark = pytest.mark.native_only

fields = pytest.importorskip("llamay.native.server.fields")
schemas = pytest.importorskip("llamay.native.server.schemas")
ollama_schemas = pytest.importorskip("llamay.native.server.ollama_schemas")

MSG = [{"role": "user", "content": "Once"}]
DOCS = Path(__file__).resolve().parents[2] / "docs" / "server.md"


def _names(model) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


# a table and the model that reads it (nested objects: the model of one of them)
MODELS = {
    "openai.chat": schemas.ChatCompletionRequest,
    "openai.message": schemas.ChatMessage,
    "openai.content_part": schemas.ContentPart,
    "openai.stream_options": schemas.StreamOptions,
    "openai.json_schema": schemas.JsonSchemaSpec,
    "openai.tool": schemas.Tool,
    "openai.function": schemas.ToolFunction,
    "openai.completions": schemas.CompletionRequest,
    "openai.embeddings": schemas.EmbeddingRequest,
    "ollama.generate": ollama_schemas.OllamaGenerateRequest,
    "ollama.chat": ollama_schemas.OllamaChatRequest,
    "ollama.message": ollama_schemas.OllamaMessage,
    "ollama.embed": ollama_schemas.OllamaEmbedRequest,
    "ollama.embeddings": ollama_schemas.OllamaEmbeddingsRequest,
    "ollama.show": ollama_schemas.OllamaShowRequest,
    "ollama.options": ollama_schemas.OllamaOptions,
}
store_routes = pytest.importorskip("llamay.native.server.store_routes")
MODELS.update({
    "ollama.pull": store_routes.PullRequest,
    "ollama.create": store_routes.CreateRequest,
    "ollama.create_message": store_routes.CreateMessage,
    "ollama.copy": store_routes.CopyRequest,
    "ollama.delete": store_routes.DeleteRequest,
})  # fmt: skip
responses = pytest.importorskip("llamay.native.server.responses")
MODELS.update({
    "openai.responses": responses.ResponsesRequest,
    "openai.input_item": responses.InputItem,
    "openai.input_part": responses.InputPart,
    "openai.text": responses.TextOptions,
    "openai.text_format": responses.TextFormat,
})  # fmt: skip


@pytest.mark.parametrize("table", sorted(MODELS))
def test_each_table_is_exactly_what_its_model_reads(table):
    """The model declares exactly the fields its table accepts: each honoured one is read (none silently
    dropped), each accepted one is declared (so pydantic does not refuse what the table lets through), and the
    model reads nothing its table does not list (what it accepts is documented)."""
    names = _names(MODELS[table])
    spec = fields.TABLES[table]
    honoured = {n for n, f in spec.items() if f.status == "yes"}
    accepted = {n for n, f in spec.items() if f.status in ("noop", "value")}
    assert honoured - names == set(), f"{table}: honoured but not read"
    if MODELS[table].model_config.get("extra") != "allow":
        assert accepted - names == set(), f"{table}: accepted by the table but refused by the model"
    assert names - honoured - accepted == set(), f"{table}: read but not in the table"


def test_every_table_is_reachable_and_every_refusal_says_why():
    # every table is checked against its model but response_format's, a union whose members share it
    assert set(fields.TABLES) - set(MODELS) == {"openai.response_format"}
    subs = {f.sub for t in fields.TABLES.values() for f in t.values() if f.sub}
    assert subs <= set(fields.TABLES)
    for name, table in fields.TABLES.items():
        for field, f in table.items():
            assert f.status in ("yes", "noop", "value", "no"), (name, field)
            if f.status != "yes":
                assert f.why, (name, field)
            assert (f.status == "value") == bool(f.values), (name, field)


def test_each_route_body_checks_its_table():
    """The top-level tables are the routes' bodies (ROUTES), and each route's model checks its own table."""
    nested = {f.sub for t in fields.TABLES.values() for f in t.values() if f.sub}
    assert set(fields.TABLES) - nested == set(fields.ROUTES)
    for table in fields.ROUTES:
        assert table == MODELS[table].FIELDS


UNKNOWN = [
    ("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "frobnicate": 1}, "frobnicate", "unknown_field"),
    ("/v1/chat/completions", {"messages": [{**MSG[0], "colour": "red"}], "max_tokens": 1}, "messages.0.colour",
     "unknown_field"),
    ("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "stream_options": {"x": 1}}, "stream_options.x",
     "unknown_field"),
    ("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "audio": {"voice": "x"}}, "audio",
     "unsupported_parameter"),
    ("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "grammar": "root ::= \"a\""}, "grammar",
     "unsupported_parameter"),
    ("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "store": True}, "store", "unsupported_value"),
    # the published schema says so too (schemathesis found ["text", "text"] schema-valid and refused)
    ("/v1/chat/completions", {"messages": MSG, "max_tokens": 1, "modalities": ["text", "text"]}, "modalities",
     "unsupported_value"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
                              "max_tokens": 1}, "messages.0.content.0.image_url", "unsupported_parameter"),
    ("/v1/completions", {"prompt": "Once", "max_tokens": 1, "suffix2": ""}, "suffix2", "unknown_field"),
    ("/v1/embeddings", {"input": "Once", "truncate": True}, "truncate", "unknown_field"),
    ("/v1/completions", {"prompt": "Once", "max_tokens": 1, "cache_prompt": False}, "cache_prompt",
     "unsupported_value"),
    ("/v1/completions", {"prompt": "Once", "max_tokens": 1, "id_slot": 2}, "id_slot", "unsupported_value"),
    ("/chat/completions", {"messages": MSG, "max_tokens": 1, "frobnicate": 1}, "frobnicate", "unknown_field"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "body", "param", "code"), UNKNOWN)
def test_openai_fields_unknown_or_unsupported_are_400s_naming_them(client, path, body, param, code):
    err = error_of(client.post(path, json={"model": STORIES_ID, **body}), 400)
    assert err["param"] == param and err["code"] == code, err
    assert err["message"].startswith(param), err


def test_documented_noop_and_value_fields_are_accepted(client):
    body = {"model": STORIES_ID, "messages": MSG, "max_tokens": 2, "temperature": 0, "user": "u1", "store": False,
            "metadata": {"k": "v"}, "service_tier": "auto", "modalities": ["text"], "prompt_cache_key": "k",
            "audio": None, "safety_identifier": "s", "cache_prompt": True, "id_slot": -1, "n_probs": 0,
            "ignore_eos": False}  # fmt: skip
    r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 200, r.text
    plain = client.post("/v1/chat/completions", json={"model": STORIES_ID, "messages": MSG, "max_tokens": 2,
                                                      "temperature": 0})  # fmt: skip
    assert r.json()["choices"][0]["message"] == plain.json()["choices"][0]["message"]


def test_openai_client_extra_body_fields_are_refused_by_name(server):
    openai = pytest.importorskip("openai")
    oa = server.openai()
    with pytest.raises(openai.BadRequestError) as e:
        oa.chat.completions.create(model=STORIES_ID, messages=MSG, max_tokens=1, extra_body={"n_probs": 3})
    assert e.value.body["param"] == "n_probs" and "n_probs" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        oa.completions.create(model=STORIES_ID, prompt="Once", max_tokens=1, extra_body={"bogus": 1})
    assert e.value.body["param"] == "bogus" and e.value.body["code"] == "unknown_field"
    # a documented llama.cpp extension through extra_body is honoured
    r = oa.completions.create(model=STORIES_ID, prompt="Once", max_tokens=3, extra_body={"top_k": 1})
    assert r.usage.completion_tokens == 3


OLLAMA_REFUSED = [
    ("/api/chat", {"messages": MSG, "colour": 1}, "colour"),
    ("/api/chat", {"messages": [{**MSG[0], "colour": 1}]}, "messages.0.colour"),
    ("/api/chat", {"messages": MSG, "shift": True}, "shift"),
    ("/api/chat", {"messages": MSG, "debug_render_only": True}, "debug_render_only"),
    ("/api/generate", {"prompt": "Once", "width": 64}, "width"),
    ("/api/generate", {"prompt": "Once", "options": {"logits_all": True}}, "options.logits_all"),
    ("/api/generate", {"prompt": "Once", "options": {"tfs_z": 0.5}}, "options.tfs_z"),
    ("/api/embed", {"input": "Once", "dimensions": 8}, "dimensions"),
    ("/api/embed", {"input": "Once", "truncate": False}, "truncate"),
]


@pytest.mark.parametrize(("path", "body", "field"), OLLAMA_REFUSED)
def test_ollama_fields_unknown_or_unsupported_are_400s_naming_them(client, path, body, field):
    model = "all-MiniLM-L6-v2-f16" if "embed" in path else STORIES_ID
    stream = {} if "embed" in path else {"stream": False}
    err = error_of(client.post(path, json={"model": model, **stream, **body}), 400)
    assert err["message"].startswith(field), err


def test_ollama_client_sees_the_refusal_by_name(server):
    ollama = pytest.importorskip("ollama")
    c = ollama.Client(host=server.url)
    with pytest.raises(ollama.ResponseError) as e:
        c.generate(model=STORIES_ID, prompt="Once", options={"num_predict": 1, "embedding_only": True})
    assert e.value.status_code == 400 and e.value.error.startswith("options.embedding_only")


# -- docs/server.md's table -----------------------------------------------------------------------------------

MARKS = {"yes": "✓", "noop": "n/a", "value": "only", "no": "400"}
ROW = re.compile(r"^\| `([a-z_.0-9]+)` \| `([a-z_0-9]+)` \| (\S+) \| (\S+) \|")


def _doc_rows() -> dict[tuple[str, str], tuple[str, str]]:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("<!-- fields:start -->")
    end = text.index("<!-- fields:end -->")
    rows = {}
    for line in text[start:end].splitlines():
        m = ROW.match(line)
        if m:
            rows[(m[1], m[2])] = (m[3], m[4])
    return rows


def test_docs_field_table_is_the_tables():
    """Every field of every table has its row in docs/server.md (its status mark and source), and no row
    names a field the tables do not have: the two cannot drift (scripts/field_table.py writes the rows)."""
    rows = _doc_rows()
    want = {(t, n): (MARKS[f.status], f.src) for t, table in fields.TABLES.items() for n, f in table.items()}
    assert set(rows) == set(want), (sorted(set(want) - set(rows))[:5], sorted(set(rows) - set(want))[:5])
    wrong = {k: (rows[k], want[k]) for k in want if rows[k] != want[k]}
    assert wrong == {}


def test_docs_field_block_is_what_the_script_writes():
    import importlib.util

    spec = importlib.util.spec_from_file_location("field_table", DOCS.parents[1] / "scripts" / "field_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.main(["--check"]) == 0, "docs/server.md's field block is stale: run scripts/field_table.py"


def test_routes_listed_as_not_served_are_404(client):
    """The table's not-served routes (a sample of each line, with the method it names) answer 404."""
    for routes in fields.NOT_SERVED:
        first = routes.split(", ")[0]
        method, _, path = first.partition(" ") if " " in first else ("POST", "", first)
        method = method.split("/")[0]
        path = path.replace("{digest}", "sha256-0").replace("{id}", "0").replace("*", "x")
        r = client.request(method, path, json={})
        assert r.status_code == 404, (method, path, r.status_code)
