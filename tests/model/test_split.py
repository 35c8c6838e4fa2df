"""A split model runs as the whole file does: the same logits, bit for bit, and the same greedy tokens, on every
backend; and llama.cpp, loading the same shards, agrees on the greedy tokens."""

from __future__ import annotations

import json
import subprocess
import sys
from array import array

import pytest

from llamay.generate import decode_step, prefill
from llamay.model import load_model
from tests.gguf.split_files import split_with_gguf_py, split_with_llamay
from tests.models.tiny import SPECS, write_tiny

PROMPT = [1, 320, 300, 400]  # stories260K's ids: llama.cpp reports all 8 greedy tokens (none a partial UTF-8 byte)
N_STEPS = 8


def _split(whole, tmp_path, n_shards: int):
    """gguf-py's shards where it runs (the independent writer), llamay's own under Pyodide."""
    try:
        import gguf  # noqa: F401
    except ImportError:
        return split_with_llamay(whole, tmp_path / "tiny", n_shards)
    return split_with_gguf_py(whole, tmp_path / "tiny", n_shards)


def _greedy(path, backend_name: str) -> tuple[list[int], list[bytes]]:
    """Greedy tokens after PROMPT and the raw f32 logits of every step."""
    with load_model(path, backend_name) as m:
        st = m.new_state(n_ctx=len(PROMPT) + N_STEPS + 1)
        prefill(m, st, PROMPT)
        tokens, logits = [], []
        for _ in range(N_STEPS):
            row = m.backend.read_f32(st.logits, 0, m.cfg.n_vocab)
            logits.append(array("f", row).tobytes())  # bit for bit
            tok = max(range(m.cfg.n_vocab), key=row.__getitem__)
            tokens.append(tok)
            decode_step(m, st, tok)
    return tokens, logits


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("split")
    whole = tmp / "tiny-gemma3.gguf"
    write_tiny("gemma3", whole)
    return whole, _split(whole, tmp, 3)


def test_split_model_gives_the_whole_files_logits(backend_name, tiny):
    whole, shards = tiny
    assert _greedy(shards[0], backend_name) == _greedy(whole, backend_name)


_LLAMACPP_GREEDY = """
import json, os, sys, xllamacpp
p = xllamacpp.CommonParams()
p.model.path = sys.argv[1]
p.n_ctx, p.n_parallel, p.warmup, p.verbosity = int(sys.argv[2]), 1, False, -1
p.cpuparams.n_threads = p.cpuparams_batch.n_threads = 1
server = xllamacpp.Server(p)
r = server.handle_completions({"prompt": json.loads(sys.argv[3]), "max_tokens": int(sys.argv[4]), "temperature": 0,
                               "top_k": 1, "seed": 0, "cache_prompt": False, "n_probs": 1})
print(json.dumps([t["id"] for t in r["choices"][0]["logprobs"]["content"]]), flush=True)
os._exit(0)  # the server's destructor can hang: the answer is printed, leave without it
"""


def _llamacpp_greedy(path) -> list[int]:
    r = subprocess.run(
        [sys.executable, "-c", _LLAMACPP_GREEDY, str(path), str(SPECS["gemma3"].n_ctx), json.dumps(PROMPT),
         str(N_STEPS)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    if r.returncode != 0 or not r.stdout.strip():
        raise AssertionError(f"llama.cpp gave no answer (exit {r.returncode}): {r.stdout[-300:]} {r.stderr[-800:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.native_only
def test_llama_cpp_runs_the_same_shards_alike(tiny):
    pytest.importorskip("xllamacpp")
    pytest.importorskip("gguf")
    whole, shards = tiny
    theirs = _llamacpp_greedy(shards[0])
    assert len(theirs) == N_STEPS  # every token reported (none merged into the next as a partial UTF-8 piece)
    assert theirs == _llamacpp_greedy(whole)
    assert _greedy(shards[0], "portable")[0] == theirs


def test_split_model_has_the_whole_files_fingerprint(tiny):
    """The same tensors make the same fingerprint: a KV snapshot saved with one loads into the other."""
    whole, shards = tiny
    with load_model(whole, "portable") as a, load_model(shards[0], "portable") as b:
        assert a.fingerprint == b.fingerprint and a.name == b.name
