"""The library on every backend this target has (portable always), as the model tests run."""

from tests.model.conftest import backend_name  # noqa: F401 (a fixture)
