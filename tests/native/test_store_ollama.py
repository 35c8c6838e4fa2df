"""The local Ollama store, read in place: a fake one built here from the stories260K fixture in Ollama's real
layout (blobs/sha256-<hex>, manifests/registry.ollama.ai/library/<model>/<tag>, the config blob and the
model, template, system and params layers with Ollama's media types).

It is listed (marked as Ollama's), runs by name with the same tokens as the plain file under the same settings
(the blob itself, no copy), its parameters are the sampling defaults of `run` and of the server, its template
(Go) is translated and its system prompt added to chats; `show` says which template is used; llamay never
writes to it (`rm` refuses), and `cp` links its blobs into llamay's store.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llamay.native.cli import main
from llamay.native.store import resolve
from tests import paths

pytestmark = pytest.mark.native_only

MODEL = paths.stories("f32")
PROMPT = "Once upon a time"
CHATML = """{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
"""
SYSTEM = "You tell stories."
PARAMS = {"num_predict": 12, "temperature": 0}


def put_blob(root: Path, data: bytes) -> dict:
    hexa = hashlib.sha256(data).hexdigest()
    (root / "blobs").mkdir(parents=True, exist_ok=True)
    (root / "blobs" / f"sha256-{hexa}").write_bytes(data)
    return {"digest": f"sha256:{hexa}", "size": len(data)}


def fake_ollama(root: Path, name: str = "fake", tag: str = "latest", template: str = CHATML,
                params: dict | None = None) -> Path:  # fmt: skip
    """A model in Ollama's layout, as `ollama create` writes one (JSON as Go marshals it)."""
    config = {"model_format": "gguf", "model_family": "llama", "model_families": ["llama"], "model_type": "260K",
              "file_type": "F32", "architecture": "amd64", "os": "linux"}  # fmt: skip
    layers = [("application/vnd.ollama.image.model", MODEL.read_bytes()),
              ("application/vnd.ollama.image.template", template.encode()),
              ("application/vnd.ollama.image.system", SYSTEM.encode()),
              ("application/vnd.ollama.image.params", json.dumps(params or PARAMS).encode())]  # fmt: skip
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            **put_blob(root, json.dumps(config).encode() + b"\n"),
        },
        "layers": [{"mediaType": media, **put_blob(root, data)} for media, data in layers],
    }
    path = root / "manifests" / "registry.ollama.ai" / "library" / name / tag
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(manifest, separators=(",", ":")))
    return path


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict[str, str]:
    values = {"LLAMAY_MODELS": str(tmp_path / "store"), "OLLAMA_MODELS": str(tmp_path / "ollama"),
              "LLAMAY_MODELS_DIR": str(tmp_path / "legacy"), "LLAMAY_BACKEND": "portable"}  # fmt: skip
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    fake_ollama(tmp_path / "ollama")
    return {**os.environ, **values}


def llamay(env: dict, *args: str) -> str:
    r = subprocess.run([sys.executable, "-m", "llamay.native.cli", *args], env=env, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_ollama_store_is_listed_and_read_in_place(env, capsys):
    assert main(["list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("fake:latest"))
    assert "(ollama)" in line
    r = resolve("fake:latest", pull=False)
    assert r.source == "Ollama" and r.path.parent == Path(env["OLLAMA_MODELS"]) / "blobs"  # the blob, in place
    assert r.layers.system == SYSTEM and r.layers.template == CHATML and r.layers.parameters == PARAMS
    assert resolve("fake", pull=False).path == r.path  # the tag defaults to latest
    assert not (Path(env["LLAMAY_MODELS"]) / "blobs").exists()  # nothing was copied


def test_run_by_ollama_name_gives_the_files_tokens(env):
    settings = ["-p", PROMPT, "-n", "24", "--temp", "0"]
    assert llamay(env, "run", "-m", "fake:latest", *settings) == llamay(env, "run", "-m", str(MODEL), *settings)


def test_its_parameters_are_the_sampling_defaults(env):
    """params: temperature 0, num_predict 12: run with no flags is greedy for 12 tokens; a flag still wins."""
    greedy_12 = llamay(env, "run", "-m", str(MODEL), "-p", PROMPT, "-n", "12", "--temp", "0")
    assert llamay(env, "run", "-m", "fake:latest", "-p", PROMPT) == greedy_12
    greedy_5 = llamay(env, "run", "-m", str(MODEL), "-p", PROMPT, "-n", "5", "--temp", "0")
    assert llamay(env, "run", "-m", "fake:latest", "-p", PROMPT, "-n", "5") == greedy_5
    assert greedy_5 != greedy_12


def test_its_stop_parameter_ends_the_text(env, tmp_path):
    fake_ollama(Path(env["OLLAMA_MODELS"]), "stops", params={"temperature": 0, "num_predict": 40, "stop": ["Lily"]})
    full = llamay(env, "run", "-m", str(MODEL), "-p", PROMPT, "-n", "40", "--temp", "0")
    assert "Lily" in full, "the fixture's greedy story names Lily"
    assert llamay(env, "run", "-m", "stops", "-p", PROMPT) == full[: full.index("Lily")] + "\n"


def test_its_template_and_system_prompt_make_the_chat_prompt(env):
    r = resolve("fake:latest", pull=False)
    with r.load("portable") as model:
        text = model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}])
        own = model.tokenizer.apply_chat_template([{"role": "system", "content": "Be brief."},
                                                   {"role": "user", "content": "Hi"}])  # fmt: skip
    # Ollama's rendering of this template: the model's system prompt first when the chat has none
    assert text == f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert own.startswith("<|im_start|>system\nBe brief.<|im_end|>") and SYSTEM not in own
    assert "translated to Jinja" in r.chat_template[1]


def test_an_untranslatable_template_falls_back_to_the_ggufs_and_show_says_so(env, capsys):
    fake_ollama(Path(env["OLLAMA_MODELS"]), "named", template='{{ define "x" }}hi{{ end }}{{ template "x" }}')
    r = resolve("named", pull=False)
    assert r.chat_template[0] is None and "could not be translated" in r.chat_template[1]
    with r.load("portable") as model:  # stories260K has no template of its own: ChatML, llama.cpp's fallback
        assert model.tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}]).startswith(
            f"<|im_start|>system\n{SYSTEM}<|im_end|>"
        )
    assert main(["show", "named"]) == 0
    assert "the GGUF's own: the TEMPLATE layer could not be translated" in capsys.readouterr().out
    assert main(["show", "fake"]) == 0
    out = capsys.readouterr().out
    assert "translated to Jinja" in out and SYSTEM in out and "num_predict" in out


def test_llamay_never_writes_to_ollamas_store_and_cp_links_its_blobs(env, capsys):
    before = sorted(p for p in Path(env["OLLAMA_MODELS"]).rglob("*"))
    assert main(["rm", "fake"]) == 1
    assert "Ollama's store" in capsys.readouterr().err
    assert main(["cp", "fake", "mine"]) == 0
    mine = resolve("mine", pull=False)
    theirs = resolve("fake", pull=False)
    assert mine.source == "llamay" and mine.layers == theirs.layers
    assert os.stat(mine.path).st_ino == os.stat(theirs.path).st_ino  # linked, not copied
    assert resolve("fake", pull=False).source == "Ollama"
    assert sorted(p for p in Path(env["OLLAMA_MODELS"]).rglob("*")) == before


def test_the_server_answers_by_its_name_with_its_parameters_and_ps_lists_it(env, capsys):
    pytest.importorskip("uvicorn")
    from tests.server.conftest import start_server

    r = resolve("fake:latest", pull=False)
    live = start_server(r.path, backend="portable", n_ctx=128, parallel=1, queue=2, name=r.name, defaults=r.options,
                        aliases=("fake",))  # fmt: skip
    try:
        r.apply(live.service.generator.model)
        with live.client() as c:
            got = c.post("/v1/completions", json={"model": "fake:latest", "prompt": PROMPT, "max_tokens": 12})
            assert got.status_code == 200, got.text
            greedy = llamay(env, "run", "-m", str(MODEL), "-p", PROMPT, "-n", "12", "--temp", "0")
            assert PROMPT + got.json()["choices"][0]["text"] + "\n" == greedy  # temperature 0 from its params
            got = c.post("/api/generate", json={"model": "fake", "prompt": PROMPT, "raw": True, "stream": False})
            assert got.status_code == 200, got.text
            assert got.json()["eval_count"] == PARAMS["num_predict"]  # its num_predict when the request has none
            assert PROMPT + got.json()["response"] + "\n" == greedy
        assert main(["ps", "--host", live.url]) == 0
        out = capsys.readouterr().out
        assert any(line.startswith("fake:latest ") and "Forever" in line for line in out.splitlines()), out
    finally:
        live.stop()


def test_the_server_samples_with_parameters_requests_cannot_set(env):
    """mirostat and typical_p come only from the model's PARAMETERs: the server's draws are `run`'s (which takes
    every PARAMETER), seed for seed."""
    pytest.importorskip("uvicorn")
    from tests.server.conftest import start_server

    params = {"mirostat": 2, "mirostat_tau": 3.0, "typical_p": 0.7, "temperature": 1.0, "seed": 7, "num_predict": 16}
    fake_ollama(Path(env["OLLAMA_MODELS"]), "miro", params=params)
    r = resolve("miro", pull=False)
    live = start_server(r.path, backend="portable", n_ctx=128, parallel=1, queue=2, name=r.name, defaults=r.options,
                        aliases=("miro",))  # fmt: skip
    try:
        with live.client() as c:
            got = c.post("/v1/completions", json={"model": "miro", "prompt": PROMPT})
            assert got.status_code == 200, got.text
            served = got.json()["choices"][0]["text"]
    finally:
        live.stop()
    ran = llamay(env, "run", "-m", "miro", "-p", PROMPT)
    plain = llamay(env, "run", "-m", str(MODEL), "-p", PROMPT, "-n", "16", "--temp", "1", "--seed", "7")
    assert PROMPT + served + "\n" == ran
    assert ran != plain, "the model's mirostat and typical_p change nothing here: the test cannot tell"


def test_llamay_web_serves_stored_models_by_name(env, tmp_path):
    from llamay.native.commands.web import WebServer
    from tests.native.test_static_site import get

    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html>")
    assert main(["import", str(MODEL), "mine"]) == 0
    srv = WebServer(web, None).start()  # no --models: the stores
    try:
        status, _h, body = get(srv.url, "/models/index.json")
        index = {m["name"]: m for m in json.loads(body)}
        assert status == 200 and set(index) == {"mine:latest", "fake:latest"}
        fake = index["fake:latest"]  # the index also says what each model is (tests/native/test_model_facts.py)
        want = {"name": "fake:latest", "url": "/models/fake:latest.gguf", "size": MODEL.stat().st_size}
        assert {k: fake[k] for k in want} == want
        assert fake["architecture"] == "llama" and fake["kind"] == "text"
        for name in index:
            status, headers, body = get(srv.url, index[name]["url"])
            assert status == 200 and body == MODEL.read_bytes()
            assert headers["content-type"] == "application/octet-stream"
        for path in ("/models/nothing:latest.gguf", "/models/../blobs", "/models/blobs/", "/models/.lock"):
            assert get(srv.url, path)[0] == 404, path
    finally:
        srv.close()
