"""Every optimised backend is compared with `portable`, kernel by kernel (ggml's test-backend-ops idea):
adding a kernel or a weight type adds a case here, not a file."""

from __future__ import annotations

import pytest

from llamay.kernels import get_backend
from tests.backends import require_backend

FAST_BACKENDS = ("numba", "wasm")


@pytest.fixture(params=FAST_BACKENDS)
def backend(request):
    return require_backend(request.param)


@pytest.fixture
def ref():
    return get_backend("portable")
