"""llama-server's routes side by side with llama-server itself: xllamacpp runs llama.cpp's server in process,
listening on loopback; the same requests go to both, and the answers' fields (names, and values where the two
engines agree: token ids, text, counts, logprobs) are compared. /infill on a tiny model the test writes with
FIM tokens: the same prompt layout, the same greedy reply."""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.request

import pytest

from tests.paths import stories
from tests.server.conftest import start_server

pytestmark = pytest.mark.native_only
xlc = pytest.importorskip("xllamacpp")

ONCE = "Once upon a time"
GREEDY = {"temperature": 0}
FIM = {"fim_pre": 400, "fim_suf": 401, "fim_mid": 402}  # token ids of the tiny model's vocabulary, as FIM tokens
REPO_LEVEL = {"fim_rep": 403, "fim_sep": 404}  # with these too, the extra chunks take the repo-level pattern


class Reference:
    """llama-server (xllamacpp) on 127.0.0.1, asked over HTTP."""

    def __init__(self, path, n_ctx: int = 512, n_batch: int = 256) -> None:
        p = xlc.CommonParams()
        p.model.path = str(path)
        p.n_ctx = n_ctx
        p.n_batch = n_batch
        p.n_parallel = 1
        p.cpuparams.n_threads = 1
        p.cpuparams_batch.n_threads = 1
        p.warmup = False
        p.verbosity = -1
        self.server = xlc.Server(p)
        self.url = self.server.listening_address

    def post(self, path: str, body: dict) -> tuple[int, object]:
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return r.status, _decode(r.read().decode())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode())


def _decode(text: str) -> object:
    if text.startswith("data: "):
        return [json.loads(b[len("data: ") :]) for b in text.strip().split("\n\n") if b]
    return json.loads(text)


def ours(client, path: str, body: dict) -> tuple[int, object]:
    r = client.post(path, json=body)
    return r.status_code, _decode(r.text)


@pytest.fixture(scope="module")
def ref():
    r = Reference(stories("f32"))
    yield r
    del r.server


def test_completion_fields_are_llama_servers(ref, client):
    body = {"prompt": ONCE, "n_predict": 6, "n_probs": 3, "return_tokens": True, "stop": ["girl"], **GREEDY}
    for b in (body, {**body, "stop": [], "n_predict": 4}):
        (s1, want), (s2, got) = ref.post("/completion", b), ours(client, "/completion", b)
        assert s1 == s2 == 200
        assert set(want) <= set(got), set(want) - set(got)
        for key in ("content", "tokens", "tokens_predicted", "tokens_evaluated", "stop_type", "stopping_word",
                    "truncated", "stop", "prompt", "has_new_line"):  # fmt: skip
            assert got[key] == want[key], key
        assert set(got["timings"]) == set(want["timings"])
        assert set(want["generation_settings"]) - set(got["generation_settings"]) <= REFERENCE_ONLY_SETTINGS
        for g, w in zip(got["completion_probabilities"], want["completion_probabilities"], strict=True):
            assert set(g) == set(w) and g["id"] == w["id"] and math.isclose(g["logprob"], w["logprob"], abs_tol=1e-3)
            assert [t["id"] for t in g["top_logprobs"]] == [t["id"] for t in w["top_logprobs"]]
            assert set(g["top_logprobs"][0]) == set(w["top_logprobs"][0])


# settings llama-server reports that have no meaning here (its chat parser, lazy grammars, speculative decoding)
REFERENCE_ONLY_SETTINGS = {"adaptive_target", "adaptive_decay", "grammar_lazy", "grammar_triggers", "preserved_tokens",
                           "chat_format", "reasoning_format", "reasoning_in_content", "generation_prompt",
                           "speculative.types", "backend_sampling"}  # fmt: skip


def test_stream_chunks_are_llama_servers(ref, client):
    body = {"prompt": ONCE, "n_predict": 4, "n_probs": 1, "stream": True, **GREEDY}
    (_, want), (_, got) = ref.post("/completion", body), ours(client, "/completion", body)
    assert len(got) == len(want)
    for g, w in zip(got[:-1], want[:-1], strict=True):
        assert set(g) == set(w) and g["content"] == w["content"] and g["tokens"] == w["tokens"]
    assert set(want[-1]) <= set(got[-1]) and got[-1]["stop"] is want[-1]["stop"] is True
    assert got[-1]["content"] == want[-1]["content"] == ""


def test_tokenize_and_apply_template_are_llama_servers(ref, client):
    for body in ({"content": "á Once", "with_pieces": True}, {"content": ONCE, "add_special": True}):
        assert ours(client, "/tokenize", body) == ref.post("/tokenize", body)
    body = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]}
    assert ours(client, "/apply-template", body) == ref.post("/apply-template", body)


# -- /infill --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["fim", "repo-level"])
def fim_model(request, tmp_path_factory):
    from tests.models.tiny import V, build_tiny

    w = build_tiny("llama")
    for name, tid in {**FIM, **(REPO_LEVEL if request.param == "repo-level" else {})}.items():
        w.add(f"tokenizer.ggml.{name}_token_id", tid, V.UINT32)
    path = tmp_path_factory.mktemp("fim") / f"tiny-llama-{request.param}.gguf"
    w.write(path)
    return path


@pytest.fixture(scope="module")
def fim_servers(fim_model):
    live = start_server(fim_model, n_ctx=512, parallel=1, queue=4)
    # llama-server cuts what does not fit its heuristics (the suffix to n_batch / 4, the extra chunks, the
    # prefix's start); the requests below fit them: nothing is cut
    ref = Reference(fim_model, n_ctx=512, n_batch=64)
    yield live, ref
    del ref.server
    live.stop()


@pytest.mark.parametrize(
    "body",
    [
        {"input_prefix": "def add(a, b):\n    return ", "input_suffix": "\nprint(add)"},
        {"input_prefix": "Once upon", "input_suffix": " a time", "prompt": " there",
         "input_extra": [{"filename": "story.txt", "text": "Lily and the park."}]},
    ],
)  # fmt: skip
def test_infill_is_llama_servers(fim_servers, body):
    live, ref = fim_servers
    body = {**body, "n_predict": 6, "return_tokens": True, **GREEDY}
    status, want = ref.post("/infill", body)
    assert status == 200, want
    with live.client() as c:
        status, got = ours(c, "/infill", body)
    assert status == 200, got
    assert got["prompt"] == want["prompt"] and got["tokens_evaluated"] == want["tokens_evaluated"]
    assert got["tokens"] == want["tokens"] and got["content"] == want["content"]
    repo_level = "repo-level" in live.service.generator.id
    assert ("myproject" in got["prompt"]) == repo_level and ("snippet" in got["prompt"]) == (
        not repo_level and "input_extra" in body
    )


# -- /embedding without pooling -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def unpooled(tmp_path_factory):
    """A tiny BERT with pooling_type none (0): llama-server's /embedding answers every token's state."""
    import dataclasses
    from unittest import mock

    from tests.models.tiny import SPECS, V, build_tiny

    spec = SPECS["bert"]
    hparams = (*(h for h in spec.hparams if h[0] != "pooling_type"), ("pooling_type", 0, V.UINT32))
    with mock.patch.dict(SPECS, {"bert": dataclasses.replace(spec, hparams=hparams)}):
        w = build_tiny("bert")
    path = tmp_path_factory.mktemp("unpooled") / "tiny-bert-unpooled.gguf"
    w.write(path)
    live = start_server(stories("f32"), n_ctx=128, parallel=1, queue=4, embedding_model=path)
    p = xlc.CommonParams()
    p.model.path = str(path)
    p.n_ctx = spec.n_ctx
    p.n_parallel = 1
    p.cpuparams.n_threads = 1
    p.cpuparams_batch.n_threads = 1
    p.warmup = False
    p.verbosity = -1
    p.embedding = True
    ref = Reference.__new__(Reference)
    ref.server = xlc.Server(p)
    ref.url = ref.server.listening_address
    yield live, ref
    del ref.server
    live.stop()


def test_embedding_per_token_is_llama_servers(unpooled):
    live, ref = unpooled
    body = {"content": ["a man is eating food.", "the girl carries a baby"]}
    status, want = ref.post("/embedding", body)
    assert status == 200, want
    with live.client() as c:
        status, got = ours(c, "/embedding", body)
        assert status == 200, got
        assert [g["index"] for g in got] == [w["index"] for w in want] == [0, 1]
        for g, w in zip(got, want, strict=True):
            assert len(g["embedding"]) == len(w["embedding"]) > 1  # a vector per token
            for gt, wt in zip(g["embedding"], w["embedding"], strict=True):  # as tests/model/test_goldens.py
                norm_g, norm_w = math.hypot(*gt), math.hypot(*wt)  # not normalised: the raw states
                cos = sum(a * b for a, b in zip(gt, wt, strict=True)) / (norm_g * norm_w)
                assert len(gt) == len(wt) and cos >= 0.9999 and math.isclose(norm_g, norm_w, rel_tol=1e-3)
        r = c.post("/v1/embeddings", json={"input": "a man is eating food."})
        assert r.status_code == 400 and r.json()["error"]["code"] == "model_not_pooled"


# -- /rerank --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reranker(tmp_path_factory):
    """A tiny BERT reranker: rank pooling (4) and a classifier head (cls, cls.output), served beside stories260K
    here and by llama-server with --reranking."""
    import dataclasses
    from unittest import mock

    from tests.models.tiny import SPECS, V, build_tiny

    spec = SPECS["bert"]
    hparams = (*(h for h in spec.hparams if h[0] != "pooling_type"), ("pooling_type", 4, V.UINT32))
    ranking = dataclasses.replace(spec, hparams=hparams, optional_slots=("cls", "cls_bias", "cls_out_bias"))
    with mock.patch.dict(SPECS, {"bert": ranking}):
        w = build_tiny("bert")
    path = tmp_path_factory.mktemp("rerank") / "tiny-bert-reranker.gguf"
    w.write(path)
    live = start_server(stories("f32"), n_ctx=128, parallel=1, queue=4, embedding_model=path)
    p = xlc.CommonParams()
    p.model.path = str(path)
    p.n_ctx = spec.n_ctx
    p.n_parallel = 1
    p.cpuparams.n_threads = 1
    p.cpuparams_batch.n_threads = 1
    p.warmup = False
    p.verbosity = -1
    p.embedding = True
    p.pooling_type = xlc.llama_pooling_type.LLAMA_POOLING_TYPE_RANK  # llama-server's --reranking
    ref = Reference.__new__(Reference)
    ref.server = xlc.Server(p)
    ref.url = ref.server.listening_address
    yield live, ref
    del ref.server
    live.stop()


@pytest.mark.parametrize("path", ["/rerank", "/v1/rerank", "/reranking"])
@pytest.mark.parametrize("top_n", [None, 2])
def test_rerank_is_llama_servers(reranker, path, top_n):
    live, ref = reranker
    body = {"query": "what is a panda?", "documents": ["hi", "it is a bear", "the giant panda is a bear species",
                                                        "pandas eat bamboo"]}  # fmt: skip
    if top_n:
        body["top_n"] = top_n
    status, want = ref.post(path, body)
    assert status == 200, want
    with live.client() as c:
        status, got = ours(c, path, body)
        assert status == 200, got
        assert set(got) == set(want) and got["object"] == "list" and got["usage"] == want["usage"]
        assert [r["index"] for r in got["results"]] == [r["index"] for r in want["results"]]
        for g, w in zip(got["results"], want["results"], strict=True):
            assert set(g) == set(w) and math.isclose(g["relevance_score"], w["relevance_score"], abs_tol=5e-3)
        r = c.post("/v1/embeddings", json={"input": "a panda"})
        assert r.status_code == 400 and r.json()["error"]["code"] == "model_is_reranker"
