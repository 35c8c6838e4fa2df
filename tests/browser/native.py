"""What the native engine says, for the other targets to equal."""

from __future__ import annotations

import functools

from llamay.engine import Engine
from llamay.model import load_model
from llamay.sampling import SamplerConfig

STORIES_PROMPT = "Once upon a time"
STORIES_TOKENS = 27
# the model's own greedy sample (its README) and llama.cpp's: see ../shared/fixtures/README.md
STORIES_TEXT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."


@functools.cache
def greedy_text(model: str, prompt: str, n: int, backend: str = "portable") -> str:
    """The prompt and its greedy completion, natively."""
    with load_model(model, backend) as m:
        return prompt + "".join(Engine(m).complete(prompt, n, SamplerConfig(temperature=0)))
