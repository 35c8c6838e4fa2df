"""llamay as a Python library: no server, the loop stays in your code (docs/library.md).

    import llamay
    model = llamay.load("stories260K-f32.gguf")        # a path, bytes, or natively a stored/Ollama name
    ctx = model.context(n_ctx=128)
    logits = ctx.decode(model.tokenize("Once upon a time"))
    tok = llamay.Sampler(temperature=0).sample(ctx)

Everything here is exported from the package root (`llamay.load`, `llamay.Model`, ...), and is the same
natively and under Pyodide.
"""

from .context import Context, Logits, Snapshot
from .errors import ContextClosedError, ContextFullError, ModelSourceError, TokenError
from .loading import load
from .model import Defaults, Model
from .sampler import Sampler

__all__ = [
    "Context",
    "ContextClosedError",
    "ContextFullError",
    "Defaults",
    "Logits",
    "Model",
    "ModelSourceError",
    "Sampler",
    "Snapshot",
    "TokenError",
    "load",
]
