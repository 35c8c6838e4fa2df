"""Running a model: State (buffers, KV cache), the forward pass, and the Model that ties them to a backend."""

from .forward import forward
from .model import Model, load_model
from .state import State

__all__ = ["Model", "State", "forward", "load_model"]
