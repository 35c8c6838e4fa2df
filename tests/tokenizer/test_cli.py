"""`llamay tokenize` and `llamay detokenize`."""

from __future__ import annotations

import io
import json

import pytest

from llamay.native.cli import main
from tests.tokenizer.vocabs import vocab_path

pytestmark = pytest.mark.native_only  # the CLI is the native front end


@pytest.fixture(scope="module")
def smollm() -> str:
    return str(vocab_path("smollm2"))


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_tokenize(capsys: pytest.CaptureFixture[str], smollm: str) -> None:
    rc, out, _ = _run(capsys, "tokenize", "-m", smollm, "Hello <|im_start|> world")
    assert rc == 0 and json.loads(out) == [19556, 216, 1, 905]


def test_tokenize_no_special(capsys: pytest.CaptureFixture[str], smollm: str) -> None:
    _, out, _ = _run(capsys, "tokenize", "-m", smollm, "--no-special", "<|im_start|>")
    assert 1 not in json.loads(out)


def test_tokenize_adds_bos_unless_asked(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(vocab_path("llama-spm"))
    assert json.loads(_run(capsys, "tokenize", "-m", path, "Hello")[1]) == [1, 15043]
    assert json.loads(_run(capsys, "tokenize", "-m", path, "--no-add-special", "Hello")[1]) == [15043]


def test_tokenize_pieces(capsys: pytest.CaptureFixture[str], smollm: str) -> None:
    _, out, _ = _run(capsys, "tokenize", "-m", smollm, "--pieces", "Hi there")
    assert json.loads(out) == [{"id": 26843, "piece": "Hi"}, {"id": 665, "piece": " there"}]


def test_tokenize_batch(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, smollm: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO('"Hi there"\n\n"<|im_end|>"\n"caf\\u00e9"\n'))
    rc, out, _ = _run(capsys, "tokenize", "-m", smollm, "--batch")
    assert rc == 0
    assert [json.loads(line) for line in out.splitlines()] == [[26843, 665], [2], [83, 1939, 2756]]


def test_detokenize(capsys: pytest.CaptureFixture[str], smollm: str) -> None:
    assert _run(capsys, "detokenize", "-m", smollm, "19556", "216", "1", "905")[1] == "Hello  world\n"
    assert _run(capsys, "detokenize", "-m", smollm, "--special", "[19556, 216, 1, 905]")[1] == (
        "Hello <|im_start|> world\n"
    )


def test_detokenize_batch(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, smollm: str) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("[26843, 665]\n[83, 1939, 2756]\n"))
    _, out, _ = _run(capsys, "detokenize", "-m", smollm, "--batch")
    assert [json.loads(line) for line in out.splitlines()] == ["Hi there", "café"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tokenize"], "either TEXT or --batch"),
        (["detokenize", "x"], "integers"),
        (["detokenize", "99999"], "out of range"),
        (["detokenize"], "either IDS or --batch"),
    ],
)
def test_errors(capsys: pytest.CaptureFixture[str], smollm: str, argv: list[str], message: str) -> None:
    rc, _, err = _run(capsys, *argv[:1], "-m", smollm, *argv[1:])
    assert rc == 1 and message in err and "Traceback" not in err


def test_missing_model_file(capsys: pytest.CaptureFixture[str], tmp_path: object) -> None:
    rc, _, err = _run(capsys, "tokenize", "-m", f"{tmp_path}/nope.gguf", "x")
    assert rc == 1 and "nope.gguf" in err
