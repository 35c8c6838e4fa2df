"""`llamay info` and `llamay tensor` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llamay.native.cli import main
from tests import paths
from tests.gguf.test_reader import FIXTURE_FILES

pytestmark = pytest.mark.native_only


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_info_prints_a_clean_audit_on_every_fixture(path, capsys):
    assert main(["info", "-m", str(path)]) == 0
    out = capsys.readouterr().out
    assert "architecture" in out
    assert ("audit         clean:" in out) or ("audit         vocab-only:" in out)


def test_info_json(capsys):
    assert main(["info", "-m", str(paths.stories("q4_0")), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["architecture"]["name"] == "llama" and d["architecture"]["hyperparameters"]["n_layer"] == 5
    assert d["tensor_types"] == {"F32": 16, "Q4_0": 31}
    assert d["metadata"]["tokenizer.ggml.tokens"]["value"]["count"] == 512
    assert {k: v for k, v in d["tensors"][1].items() if k != "offset"} == {
        "name": "output_norm.weight",
        "type": "F32",
        "shape": [64],
        "bytes": 256,
    }
    assert d["audit"]["status"] == "clean"


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llamay.native.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not a gguf at all", "bad magic"),
        (b"GGUF\x03\x00\x00\x00" + b"\x00" * 4, "tensor count needs 8 bytes"),
    ],
)
def test_bad_file_gives_one_line_error(tmp_path, content, message):
    p = tmp_path / "bad.gguf"
    p.write_bytes(content)
    r = _run_cli("info", "-m", str(p))
    assert r.returncode == 1
    assert r.stderr.startswith("llamay info: error: ") and message in r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1


def test_missing_tensor_name(tmp_path):
    r = _run_cli("tensor", str(paths.stories("f32")), "blk.0.nope.weight", "-o", str(tmp_path / "x"))
    assert r.returncode == 1 and "no tensor named 'blk.0.nope.weight'" in r.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("type_name", ["q4_1", "q5_0", "bf16"])
def test_tensor_writes_float32_like_gguf_py(tmp_path, type_name):
    gguf = pytest.importorskip("gguf")
    np = pytest.importorskip("numpy")
    path = paths.stories(type_name)
    out = tmp_path / "t.f32"
    assert main(["tensor", str(path), "blk.2.attn_q.weight", "-o", str(out)]) == 0
    ref = next(t for t in gguf.GGUFReader(path).tensors if t.name == "blk.2.attn_q.weight")
    want = gguf.quants.dequantize(ref.data, ref.tensor_type).astype("<f4").reshape(-1)
    got = np.frombuffer(out.read_bytes(), dtype="<f4")
    assert np.array_equal(got.view("<u4"), want.view("<u4"))


def test_info_shows_the_table_and_why_the_audit_refuses(tmp_path, capsys):
    from llamay.gguf import GGUFValueType
    from tests.gguf.helpers import edited

    p = tmp_path / "fewer-blocks.gguf"
    p.write_bytes(edited(paths.stories("f32"), {"llama.block_count": (4, GGUFValueType.UINT32)}))
    assert main(["info", "-m", str(p)]) == 2
    out = capsys.readouterr().out
    assert "  blk.4.ffn_up.weight" in out and "architecture  llama" in out  # the table is all there
    assert (
        "audit         refused: " + str(p) + ": key 'llama.block_count' = 4, but the file has tensors of layer 4"
    ) in out


def test_info_lists_the_architectures_from_the_registry(capsys):
    from llamay.arch import ALIASES, ARCHITECTURES
    from llamay.arch.refused import REFUSED

    assert main(["info", "--architectures"]) == 0
    out = capsys.readouterr().out
    for name, arch in ARCHITECTURES.items():
        assert f"  {name} " in out and arch.summary in out, name
    for alias in ALIASES:
        assert alias in out
    for name, why in REFUSED.items():
        assert f"  {name} " in out and why in out
    assert main(["info", "--architectures", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["supported"]) == set(ARCHITECTURES) and d["aliases"] == ALIASES and d["refused"] == REFUSED


def test_info_says_what_a_vehicle_model_identifies_as(capsys):
    path = paths.registry_model(paths.SMOLLM2)  # general.architecture "llama", basename "smollm2"
    assert main(["info", "-m", str(path)]) == 0
    assert "identifies as smollm2 (general.basename;" in capsys.readouterr().out


def test_info_without_a_model_says_what_to_give(capsys):
    assert main(["info"]) == 2
    assert "give -m MODEL (or --architectures" in capsys.readouterr().err
