"""`llamay verify` passes on every fixture and registry model (the engine's invariants, on real weights)."""

from __future__ import annotations

import pytest

from llamay.native.cli import main
from tests import paths

pytestmark = pytest.mark.native_only


@pytest.mark.parametrize("type_name", paths.STORIES_TYPES)
def test_verify_stories(type_name, capsys):
    assert main(["verify", "-m", str(paths.stories(type_name))]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and "checks passed" in out


def test_verify_minilm(capsys):
    assert main(["verify", "-m", str(paths.MINILM), "--tokens", "12", "--portable-tokens", "12"]) == 0
    assert "embedding cosine" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("name", [paths.SMOLLM2, paths.GEMMA3])
def test_verify_registry_models(name, capsys):
    path = paths.registry_model(name)
    assert main(["verify", "-m", str(path), "--tokens", "8", "--portable-tokens", "2"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "block by block" in out and "FAIL" not in out
