"""Serving a store (llamay.native.server.pool): every stored model answers by its name, through the official
`ollama` client; a model loads on its first request, off the event loop; `keep_alive` unloads it (a duration,
0 at once); the memory budget unloads the least recently used idle model and never one with a request in
flight; unknown names get Ollama's 404 on its routes and OpenAI's on theirs; a failed load fails only its own
requests. The store is a temporary LLAMAY_MODELS holding three stories260K files under three names, each with
its own `num_predict` (so a reply shows which model's layers served it)."""

from __future__ import annotations

import threading
import time

import pytest

from tests import paths
from tests.server.conftest import Live, wait_for

pytestmark = pytest.mark.native_only
ollama = pytest.importorskip("ollama")

MODELS = {"alpha": ("f32", 3), "beta": ("q8_0", 5), "gamma": ("q4_0", 7)}  # name: (stories260K type, num_predict)
PROMPT = "Once upon a time"
WAIT = 20.0  # seconds a bounded wait allows (an unload is due within a second of its keep_alive)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """LLAMAY_MODELS with alpha, beta and gamma; an empty OLLAMA_MODELS."""
    from llamay.native.store.ops import create

    root = tmp_path_factory.mktemp("multi")
    mp = pytest.MonkeyPatch()
    mp.setenv("LLAMAY_MODELS", str(root / "store"))
    mp.setenv("OLLAMA_MODELS", str(root / "ollama"))
    mp.setenv("LLAMAY_MODELS_DIR", str(root / "legacy"))
    for name, (kind, n) in MODELS.items():
        create(name, f"FROM {paths.stories(kind)}\nPARAMETER num_predict {n}\n", root, log=lambda _m: None)
    yield root
    mp.undo()


def start(resident: str = "alpha", loader=None, max_blob_bytes: int | None = None, **pool_kw) -> Live:
    """A server as `llamay serve -m RESIDENT` starts one over a store (serve.run's steps)."""
    import uvicorn

    from llamay.native.commands.serve import server_config
    from llamay.native.server import Service, create_app
    from llamay.native.server.pool import ModelPool, stored_loader
    from llamay.native.store import resolve

    r = resolve(resident, pull=False)
    with r.held() as path:
        service = Service.load(path, n_ctx=256, parallel=2, queue=8, name=r.name, defaults=r.options)
    r.apply(service.generator.model)
    pool = ModelPool(service, store=True, loader=loader or stored_loader(n_ctx=256, parallel=2, queue=8), **pool_kw)
    app = create_app(service, pool=pool, **({"max_blob_bytes": max_blob_bytes} if max_blob_bytes else {}))
    server = uvicorn.Server(server_config(app, host="127.0.0.1", port=0))
    thread = threading.Thread(target=server.run, name="uvicorn-multi", daemon=True)
    thread.start()
    wait_for(lambda: server.started, 60, "the server to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    live = Live(service, server, thread, f"http://127.0.0.1:{port}")
    live.pool = pool  # type: ignore[attr-defined]
    return live


@pytest.fixture
def live(store):
    s = start()
    yield s
    s.stop()


def loaded(client) -> list[str]:
    return sorted(m.model for m in client.ps().models)


def reference(name: str) -> str:
    """What the library's greedy completion of PROMPT gives with the model's file and num_predict."""
    import llamay

    kind, n = MODELS[name]
    with llamay.load(str(paths.stories(kind))) as m:
        return m.complete(PROMPT, max_tokens=n, temperature=0)


def generate(client, name: str, **kw):
    return client.generate(model=name, prompt=PROMPT, raw=True, options={"temperature": 0}, **kw)


def test_two_stored_models_answer_by_name_and_the_second_loads_on_demand(live):
    c = ollama.Client(host=live.url)
    assert loaded(c) == ["alpha:latest"]
    assert {m.model for m in c.list().models} >= {"alpha:latest", "beta:latest", "gamma:latest"}
    a = generate(c, "alpha")
    b = generate(c, "beta:latest")
    assert (a.model, a.eval_count, a.response) == ("alpha:latest", 3, reference("alpha"))
    assert (b.model, b.eval_count, b.response) == ("beta:latest", 5, reference("beta"))
    assert loaded(c) == ["alpha:latest", "beta:latest"]
    ps = {m.model: m for m in c.ps().models}
    assert ps["beta:latest"].size > paths.stories("q8_0").stat().st_size  # weights and KV
    assert ps["alpha:latest"].expires_at.year == 9999  # the resident model stays
    # and through the OpenAI routes, by the same names
    oai = live.openai()
    r = oai.completions.create(model="beta", prompt=PROMPT, max_tokens=2, temperature=0)
    assert r.model == "beta:latest" and r.choices[0].text == reference("beta")[: len(r.choices[0].text)]
    assert {m.id for m in oai.models.list().data} >= {"alpha:latest", "beta:latest", "gamma:latest"}


def test_keep_alive_unloads_after_its_duration_and_zero_at_once(live):
    c = ollama.Client(host=live.url)
    t0 = time.monotonic()
    generate(c, "beta", keep_alive="1s")
    (beta,) = [m for m in c.ps().models if m.model == "beta:latest"]
    assert beta.expires_at.timestamp() - time.time() <= 1.5
    wait_for(lambda: loaded(c) == ["alpha:latest"], WAIT, "beta to be unloaded after keep_alive 1s")
    assert time.monotonic() - t0 >= 1.0
    # an empty prompt loads; keep_alive 0 with an empty prompt unloads, as Ollama's `ollama stop` asks
    r = c.generate(model="gamma", prompt="", keep_alive=-1)
    assert r.done_reason == "load" and "gamma:latest" in loaded(c)
    (gamma,) = [m for m in c.ps().models if m.model == "gamma:latest"]
    assert gamma.expires_at.year == 9999  # negative: forever
    r = c.generate(model="gamma", prompt="", keep_alive=0)
    assert r.done_reason == "unload" and loaded(c) == ["alpha:latest"]
    # a chat with keep_alive 0: answered, then unloaded
    r = c.chat(model="beta", messages=[{"role": "user", "content": "hi"}], keep_alive=0)
    assert r.message.role == "assistant"
    wait_for(lambda: loaded(c) == ["alpha:latest"], WAIT, "beta to be unloaded after keep_alive 0")


def test_the_server_default_keep_alive_applies(store):
    s = start(keep_alive=0.5)
    try:
        c = ollama.Client(host=s.url)
        generate(c, "beta")
        wait_for(lambda: loaded(c) == ["alpha:latest"], WAIT, "beta to be unloaded after the default 0.5 s")
    finally:
        s.stop()


def test_bad_keep_alive_is_refused_by_name(live):
    c = ollama.Client(host=live.url)
    for bad in ("5 minutes", "1d", "1h30"):
        with pytest.raises(ollama.ResponseError) as e:
            generate(c, "beta", keep_alive=bad)
        assert e.value.status_code == 400 and e.value.error.startswith("keep_alive"), e.value.error
    with live.client() as h:  # the client would send True as 1.0
        r = h.post("/api/generate", json={"model": "beta", "prompt": PROMPT, "keep_alive": True})
        assert r.status_code == 400 and "keep_alive" in r.json()["error"]
    with pytest.raises(ollama.ResponseError) as e:  # the resident model is never unloaded
        generate(c, "alpha", keep_alive=0)
    assert e.value.status_code == 400 and "resident" in e.value.error


def test_unknown_names_get_ollamas_404_and_openais(live):
    c = ollama.Client(host=live.url)
    with pytest.raises(ollama.ResponseError) as e:
        generate(c, "nosuch")
    assert e.value.status_code == 404 and e.value.error.startswith("model 'nosuch' not found, try pulling it first")
    assert "available: alpha:latest, beta:latest, gamma:latest" in e.value.error  # what could be asked instead
    with pytest.raises(ollama.ResponseError) as e:
        c.show("nosuch")
    assert e.value.status_code == 404
    openai = pytest.importorskip("openai")
    with pytest.raises(openai.NotFoundError) as e2:
        live.openai().chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert e2.value.body["code"] == "model_not_found" and "gpt-4o" in e2.value.body["message"]
    assert "available: alpha:latest" in e2.value.body["message"] and "--any-model-name" in e2.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        live.openai().models.retrieve("gpt-4o")
    with live.client() as h:  # llama-server's own routes serve the resident model only, by its names
        assert h.post("/completion", json={"model": "alpha", "prompt": PROMPT, "n_predict": 1}).status_code == 200
        r = h.post("/completion", json={"model": "beta", "prompt": PROMPT, "n_predict": 1})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    assert loaded(c) == ["alpha:latest"]


def test_any_model_name_serves_an_unknown_name_with_the_resident_model_on_every_route(store):
    """--any-model-name: a name no model has (a client's hard-coded gpt-4o) is the resident model on the OpenAI,
    Ollama and llama-server routes alike, the reply naming it; a stored model's name is still that model (or,
    on the routes only the resident serves, a 404 saying so); nothing else is loaded."""
    openai = pytest.importorskip("openai")
    live = start(any_name=True)
    try:
        c = ollama.Client(host=live.url)
        r = generate(c, "nosuch")
        assert (r.model, r.eval_count, r.response) == ("alpha:latest", 3, reference("alpha"))  # alpha's layers
        assert generate(c, "beta").model == "beta:latest"  # a stored name is still its model
        msgs = [{"role": "user", "content": "hi"}]
        assert c.chat(model="gpt-4o", messages=msgs, options={"num_predict": 2}).model == "alpha:latest"
        oa = live.openai()
        assert oa.chat.completions.create(model="gpt-4o", messages=msgs, max_tokens=2).model == "alpha:latest"
        done = oa.completions.create(model="gpt-3.5-turbo-instruct", prompt=PROMPT, max_tokens=3, temperature=0)
        assert (done.model, done.choices[0].text) == ("alpha:latest", reference("alpha"))
        assert oa.responses.create(model="gpt-4o", input=PROMPT, max_output_tokens=2).model == "alpha:latest"
        with live.client() as h:
            r = h.post("/completion", json={"model": "gpt-4o", "prompt": PROMPT, "n_predict": 3, "temperature": 0})
            assert r.status_code == 200 and r.json()["content"] == reference("alpha"), r.text
            r = h.post("/completion", json={"model": "gamma", "prompt": PROMPT, "n_predict": 1})
            assert r.status_code == 404 and "resident model alpha:latest only" in r.json()["error"]["message"]
        with pytest.raises(openai.NotFoundError):  # a lookup still wants a served name
            oa.models.retrieve("gpt-4o")
        assert loaded(c) == ["alpha:latest", "beta:latest"]
    finally:
        live.stop()


def test_any_model_name_and_strict_model_name_are_refused_together(capsys):
    from llamay.native import cli

    assert cli.main(["serve", "--any-model-name", "--strict-model-name", "-m", "nosuch"]) == 1
    assert "--any-model-name and --strict-model-name contradict each other" in capsys.readouterr().err


def test_the_budget_unloads_the_least_recently_used_idle_model(store):
    s = start(max_loaded=2)
    try:
        c = ollama.Client(host=s.url)
        generate(c, "beta")
        assert loaded(c) == ["alpha:latest", "beta:latest"]
        generate(c, "gamma")  # no room for three: beta, idle, goes
        assert loaded(c) == ["alpha:latest", "gamma:latest"]
        sizes = {m.model: m.size for m in c.ps().models}
    finally:
        s.stop()
    s = start()  # the sizes of all three loaded at once
    try:
        c = ollama.Client(host=s.url)
        generate(c, "beta")
        sizes.update({m.model: m.size for m in c.ps().models})
    finally:
        s.stop()
    memory = sizes["alpha:latest"] + max(sizes["beta:latest"], sizes["gamma:latest"])  # room for one beside alpha
    s = start(memory=memory)
    try:
        c = ollama.Client(host=s.url)
        generate(c, "beta")
        generate(c, "gamma")  # beta, idle, goes
        assert loaded(c) == ["alpha:latest", "gamma:latest"]
        assert sum(m.size for m in c.ps().models) <= memory
    finally:
        s.stop()


def test_a_model_with_a_request_in_flight_is_never_unloaded(store):
    s = start(max_loaded=2)
    try:
        c = ollama.Client(host=s.url)
        body = {"model": "beta", "prompt": PROMPT, "raw": True, "options": {"num_predict": 100}}
        gate = threading.Event()
        with s.client() as h, h.stream("POST", "/api/generate", json=body) as r:
            lines = r.iter_lines()
            assert '"model":"beta:latest"' in next(lines).replace(" ", "")
            beta = s.pool.loaded["beta:latest"]
            held = beta.service.scheduler.call(lambda _st: gate.wait(WAIT))  # beta's stream stops mid-way
            try:
                with pytest.raises(ollama.ResponseError) as e:
                    generate(c, "gamma")  # beta is busy: no room
                assert e.value.status_code == 503 and "beta:latest" in e.value.error
                assert beta.leases == 1 and "beta:latest" in loaded(c)
            finally:
                gate.set()
                held.result(WAIT)
            final = [x for x in lines if x.strip()][-1]
            assert '"done":true' in final.replace(" ", "")
        wait_for(lambda: beta.leases == 0, WAIT, "the stream's lease to be released")
        assert generate(c, "gamma").model == "gamma:latest"
        assert loaded(c) == ["alpha:latest", "gamma:latest"]
    finally:
        s.stop()


def test_loading_is_off_the_event_loop_and_a_failed_load_fails_only_its_requests(store):
    from llamay.errors import LlamayError
    from llamay.native.server.pool import stored_loader

    real = stored_loader(n_ctx=256, parallel=2, queue=8)
    gate, started = threading.Event(), threading.Event()

    def loader(resolved):
        started.set()
        assert gate.wait(WAIT)
        if resolved.name == "gamma:latest":
            raise LlamayError("gamma's file is damaged (a test's loader)")
        return real(resolved)

    s = start(loader=loader)
    try:
        c = ollama.Client(host=s.url)
        results: dict[str, object] = {}

        def ask(name: str, key: str) -> None:
            try:
                results[key] = generate(c, name)
            except ollama.ResponseError as e:
                results[key] = e

        threads = [threading.Thread(target=ask, args=(n, k)) for n, k in (("beta", "b1"), ("beta", "b2"),
                                                                         ("gamma", "g"))]  # fmt: skip
        for t in threads:
            t.start()
        assert started.wait(WAIT)
        with s.client(timeout=5) as h:  # the event loop answers while the loads wait
            assert h.get("/api/version").status_code == 200
            assert generate(c, "alpha").model == "alpha:latest"
        gate.set()
        for t in threads:
            t.join(WAIT)
        assert results["b1"].model == results["b2"].model == "beta:latest"  # one load served both
        g = results["g"]
        assert isinstance(g, ollama.ResponseError) and g.status_code == 500 and "damaged" in g.error
        assert loaded(c) == ["alpha:latest", "beta:latest"]
    finally:
        s.stop()


def test_llamay_server_serves_the_store_and_llamay_ps_shows_what_it_loaded(store, capsys):
    """The `llamay-server` console script (the same program: argv[0] makes it `llamay serve`), and `llamay ps`."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from llamay.native.cli import main

    script = Path(sys.executable).with_name("llamay-server")
    if not script.exists():
        script = Path(shutil.which("llamay-server") or "llamay-server")
    if not script.exists():
        pytest.skip("the llamay-server console script is not installed (pip install -e .)")
    cmd = [str(script), "--port", "0", "-m", "alpha", "--parallel", "1", "-c", "128", "--keep-alive", "-1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://"), proc.stderr.read() if proc.poll() is not None else url
        c = ollama.Client(host=url)
        assert generate(c, "beta").model == "beta:latest"
        capsys.readouterr()
        assert main(["ps", "--host", url]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[0].split()[:2] == ["NAME", "ID"]
        rows = {line.split()[0]: line for line in lines[1:]}
        assert set(rows) == {"alpha:latest", "beta:latest"}
        assert all(row.rstrip().endswith("Forever") for row in rows.values())  # resident; keep-alive -1
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


def test_a_stored_split_model_is_served_by_name(live, store):
    """A split model in the store (its shards as model layers) loads on demand as the whole file."""
    pytest.importorskip("gguf")
    from llamay.native.store.ops import create
    from tests.gguf.split_files import split_with_gguf_py

    (store / "split").mkdir(exist_ok=True)
    shards = split_with_gguf_py(paths.stories("f32"), store / "split" / "stories", 3)
    create("split", f"FROM {shards[0]}\nPARAMETER num_predict 3\n", store, log=lambda _m: None)
    c = ollama.Client(host=live.url)
    r = generate(c, "split")
    assert (r.model, r.response) == ("split:latest", reference("alpha"))  # alpha is the whole file, num_predict 3
    assert "split:latest" in loaded(c)
