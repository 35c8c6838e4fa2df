"""Which kernel backends a test run must have. `LLAMAY_EXPECT_BACKENDS` (set by scripts/test-all.sh per target,
e.g. "portable,numba,wasm" natively) turns a missing backend from a skip into a failure, so CI cannot go
green by skipping the fast paths."""

from __future__ import annotations

import os

import pytest

from llamay.errors import LlamayError
from llamay.kernels import get_backend


def require_backend(name: str):
    try:
        return get_backend(name)
    except LlamayError as e:
        expected = {b for b in os.environ.get("LLAMAY_EXPECT_BACKENDS", "").split(",") if b}
        if name in expected:
            pytest.fail(f"backend {name} is expected on this target but unavailable: {e}")
        pytest.skip(f"backend {name} unavailable here: {e}")
