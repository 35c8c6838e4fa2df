"""Every optimised backend is compared with `portable`, kernel by kernel (ggml's test-backend-ops idea):
adding a kernel or a weight type adds a case here, not a file."""

from __future__ import annotations

import pytest

from llamay.errors import LlamayError
from llamay.kernels import get_backend

FAST_BACKENDS = ("numba", "wasm")


def _load(name: str):
    try:
        return get_backend(name)
    except LlamayError as e:
        pytest.skip(f"backend {name} unavailable here: {e}")


@pytest.fixture(params=FAST_BACKENDS)
def backend(request):
    return _load(request.param)


@pytest.fixture
def ref():
    return get_backend("portable")
