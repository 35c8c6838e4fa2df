"""The server's small parts on their own: the Prometheus page, request-to-sampler mapping."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
from pydantic import ValidationError

from llamay.native.server import params
from llamay.native.server.errors import ApiError
from llamay.native.server.metrics import Metrics
from llamay.native.server.ollama_schemas import OllamaOptions
from llamay.native.server.schemas import CompletionRequest

pytestmark = pytest.mark.native_only


def test_prometheus_page():
    m = Metrics()
    m.requests[("POST", "/v1/completions", 200)] += 3
    m.rejected['odd"reason'] += 1
    m.generated_tokens = 42
    m.gauge("queue_depth", "Jobs waiting.", lambda: 2)
    page = m.render()
    assert 'llamay_requests_total{method="POST",route="/v1/completions",status="200"} 3' in page
    assert 'llamay_rejected_requests_total{reason="odd\\"reason"} 1' in page
    assert "llamay_generated_tokens_total 42" in page
    assert "# TYPE llamay_queue_depth gauge\nllamay_queue_depth 2" in page
    for line in page.splitlines():
        assert line.startswith("# ") or line.startswith("llamay_")


def test_openai_fields_to_params():
    req = CompletionRequest(model="m", prompt="x", temperature=0.5, seed=3, stop="END", n=2, logit_bias={"7": 1.5})
    p = params.from_openai(req, n_vocab=100, max_tokens=10, logprobs=2)
    assert (p.sampling, p.seed, p.stop, p.n, p.logprobs) == ({"temp": 0.5, "logit_bias": {7: 1.5}}, 3, ("END",), 2, 2)
    s0, s1 = params.sampler_for(p, 0), params.sampler_for(p, 1)
    assert s0.cfg.seed == 3 and s1.cfg.seed == 4
    assert s0.cfg.temperature == 0.5 and dict(s0.cfg.logit_bias) == {7: 1.5}


def test_ollama_options_to_params():
    p = params.from_ollama(OllamaOptions(num_predict=-1, temperature=0, typical_p=0.5, stop=["a", ""]), "json")
    assert p.max_tokens is None and p.sampling == {"temp": 0, "typ_p": 0.5} and p.stop == ("a",)
    assert params.sampler_for(p).cfg.typ_p == 0.5
    assert p.response_format == {"type": "json_object"}
    schema = {"type": "object"}
    assert params.from_ollama(None, schema).response_format["json_schema"]["schema"] == schema
    with pytest.raises(ApiError):
        params.from_ollama(None, "yaml")


def test_every_sampling_field_maps_to_a_config_field_and_unsupported_values_are_refused_by_name():
    fields = params._config_fields()
    assert set(params.OPENAI_FIELDS.values()) <= fields and set(params.OLLAMA_FIELDS.values()) <= fields
    assert set(params.OPENAI_FIELDS) <= set(CompletionRequest.model_fields)
    assert set(params.OLLAMA_FIELDS) <= set(OllamaOptions.model_fields)
    params.from_ollama(OllamaOptions(tfs_z=1.0, penalize_newline=True), None)  # neutral values pass
    for name, value in [("tfs_z", 0.9), ("penalize_newline", False), ("no_such_option", 1)]:
        with pytest.raises(ValidationError, match=name):
            OllamaOptions(**{name: value})
    with pytest.raises(ApiError, match="unknown_field"):
        params.check_supported(params.GenParams(max_tokens=1, sampling={"unknown_field": 1}))


def test_a_step_wakes_each_event_loop_once_and_keeps_every_sinks_order():
    import asyncio

    from llamay.native.server.scheduler import Sink, Update, deliver

    class CountingLoop(asyncio.SelectorEventLoop):
        wakes = 0

        def call_soon_threadsafe(self, *args, **kw):
            self.wakes += 1
            return super().call_soon_threadsafe(*args, **kw)

    loop = CountingLoop()
    try:
        sinks = [Sink(loop) for _ in range(3)]
        step = {s: [Update(job=None, token=10 * i + k) for k in range(2)] for i, s in enumerate(sinks)}
        deliver(step)
        assert loop.wakes == 1  # one self-pipe write (one GIL hand-over) for the whole step, not one per request
        loop.run_until_complete(asyncio.sleep(0))
        got = [[s.queue.get_nowait().token for _ in range(s.queue.qsize())] for s in sinks]
        assert got == [[0, 1], [10, 11], [20, 21]]
    finally:
        loop.close()
    deliver({Sink(loop): [Update(job=None, token=1)]})  # a closed loop (a gone client's) is skipped, not raised


@pytest.mark.parametrize("n", [0, 1, 4096, 9000])
@pytest.mark.parametrize("with_pieces", [False, True])
def test_tokenize_answers_written_in_slices_are_the_whole_json(n, with_pieces):
    """/tokenize writes its JSON a slice at a time (one json.dumps of a huge list holds the GIL): the text is
    the JSON of the whole answer."""
    from types import SimpleNamespace

    from llamay.native.server.app import _tokenize

    class Tok:
        def encode(self, content, add_special, parse_special):
            return list(range(len(content)))

        def token_bytes(self, i):
            return f"é{i}".encode()

    body = SimpleNamespace(content="x" * n, add_special=False, parse_special=True, with_pieces=with_pieces)
    want = [{"id": i, "piece": f"é{i}"} for i in range(n)] if with_pieces else list(range(n))
    assert json.loads(_tokenize(Tok(), body)) == {"tokens": want}
