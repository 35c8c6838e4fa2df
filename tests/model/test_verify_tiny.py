"""`llamay verify`'s invariants on every tiny decoder, F32 and Q8_0: batched prefill == token-by-token decode,
prefix-cache reuse == cold, several sequences decoded together == alone, and each backend == portable (an
encoder: its embedding against portable's)."""

from __future__ import annotations

import pytest

from llamay.ggml_types import GGMLType
from llamay.gguf import GGUFFile
from llamay.verify import verify
from tests.models.tiny import TINY_QUANTISED, build_tiny

N_TOKENS = 12


@pytest.mark.parametrize("ggml_type", [GGMLType.F32, GGMLType.Q8_0], ids=["f32", "q8_0"])
@pytest.mark.parametrize("arch", [*TINY_QUANTISED, "nomic-bert"])
def test_verify_passes(backend_name, arch, ggml_type):
    if ggml_type != GGMLType.F32:
        pytest.importorskip("llamay.quants")
    f = GGUFFile.from_buffer(build_tiny(arch, ggml_type=ggml_type).to_bytes(), f"tiny-{arch}.gguf")
    backends = ["portable"] if backend_name == "portable" else ["portable", backend_name]
    checks = verify(f, backends, n_tokens=N_TOKENS, n_tokens_portable=4, log=lambda _msg: None)
    assert checks and all(c.passed for c in checks), [c for c in checks if not c.passed]
