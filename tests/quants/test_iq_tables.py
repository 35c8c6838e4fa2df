"""The generated i-quant tables are what scripts/gen_iq_tables.py writes from the installed gguf-py."""

from __future__ import annotations

import importlib.util

import pytest

from tests.paths import REPO

pytestmark = pytest.mark.native_only


def test_generated_module_is_up_to_date():
    pytest.importorskip("numpy")
    pytest.importorskip("gguf")
    spec = importlib.util.spec_from_file_location("gen_iq_tables", REPO / "scripts" / "gen_iq_tables.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.OUT.read_text() == generator.render(), "run python scripts/gen_iq_tables.py"


def test_generated_module_needs_neither_numpy_nor_gguf():
    source = (REPO / "core" / "quants" / "iq_tables.py").read_text()
    assert "import" not in source
