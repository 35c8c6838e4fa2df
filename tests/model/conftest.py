"""Model-level tests run on every backend available on this target (portable always)."""

from __future__ import annotations

import pytest

from tests.backends import require_backend

ALL_BACKENDS = ("portable", "numba", "wasm")


@pytest.fixture(params=ALL_BACKENDS)
def backend_name(request):
    require_backend(request.param)
    return request.param
